import Foundation
import TidingsCore

// Mapping between the `UN…` classes and the TidingsCore values that cross the daemon
// socket, in both directions. Classes → values can fail (a `userInfo` value that is no
// property list, a negative badge); values → classes cannot.

extension UNNotificationContent.Storage {
    init(value: NotificationContentValue) {
        self.init()
        title = value.title
        subtitle = value.subtitle
        body = value.body
        badge = value.badge.map { NSNumber(value: $0) }
        sound = value.sound.map(UNNotificationSound.init(value:))
        launchImageName = value.launchImageName
        userInfo = value.userInfo.reduce(into: [AnyHashable: Any]()) { $0[$1.key] = $1.value.anyValue }
        attachments = value.attachments.map(UNNotificationAttachment.init(value:))
        categoryIdentifier = value.categoryIdentifier
        threadIdentifier = value.threadIdentifier
        targetContentIdentifier = value.targetContentIdentifier
        summaryArgument = value.summaryArgument
        summaryArgumentCount = value.summaryArgumentCount
        interruptionLevel = UNNotificationInterruptionLevel(rawValue: value.interruptionLevel.rawValue) ?? .active
        relevanceScore = value.relevanceScore
        filterCriteria = value.filterCriteria
    }
}

extension UNNotificationContent {
    @_spi(Tidings) public convenience init(value: NotificationContentValue) {
        self.init(storage: Storage(value: value))
    }

    /// The content as a value. Throws `invalidRequest` for a `userInfo` that is no property
    /// list and `badgeInputInvalid` for a negative badge.
    @_spi(Tidings) public func value() throws(UNError) -> NotificationContentValue {
        var value = NotificationContentValue()
        let s = storage
        value.title = s.title
        value.subtitle = s.subtitle
        value.body = s.body
        if let badge = s.badge {
            guard badge.intValue >= 0 else {
                throw UNError(.badgeInputInvalid, "The content's badge is \(badge); a badge must be 0 (remove) or greater.")
            }
            value.badge = badge.intValue
        }
        value.sound = s.sound?.value
        value.launchImageName = s.launchImageName
        value.userInfo = try Self.propertyList(s.userInfo)
        value.attachments = s.attachments.map(\.value)
        value.categoryIdentifier = s.categoryIdentifier
        value.threadIdentifier = s.threadIdentifier
        value.targetContentIdentifier = s.targetContentIdentifier
        value.summaryArgument = s.summaryArgument
        value.summaryArgumentCount = s.summaryArgumentCount
        value.interruptionLevel = InterruptionLevel(rawValue: s.interruptionLevel.rawValue)
        value.relevanceScore = s.relevanceScore
        value.filterCriteria = s.filterCriteria
        return value
    }

    /// The value with non-property-list `userInfo` entries dropped and the badge clamped
    /// (for archiving, which must not fail).
    func lossyValue() -> NotificationContentValue {
        let stripped = UNNotificationContent(storage: {
            var s = storage
            s.userInfo = s.userInfo.filter { $0.key.base is String && PropertyListValue(any: $0.value) != nil }
            if let badge = s.badge, badge.intValue < 0 { s.badge = 0 }
            return s
        }())
        return (try? stripped.value()) ?? NotificationContentValue()
    }

    static func propertyList(_ userInfo: [AnyHashable: Any]) throws(UNError) -> [String: PropertyListValue] {
        var result: [String: PropertyListValue] = [:]
        for (key, item) in userInfo {
            guard let key = key.base as? String else {
                throw UNError(.invalidRequest, "userInfo keys must be strings; found the key \(key.base) of type \(type(of: key.base)).")
            }
            guard let converted = PropertyListValue(any: item) else {
                throw UNError(.invalidRequest, "userInfo[\"\(key)\"] holds a \(type(of: item)), which is no property-list value (use strings, numbers, booleans, dates, data, and arrays or string-keyed dictionaries of them).")
            }
            result[key] = converted
        }
        return result
    }
}

extension UNNotificationTrigger {
    /// The trigger for a value.
    @_spi(Tidings) public static func make(_ value: TriggerValue) -> UNNotificationTrigger {
        switch value {
        case .timeInterval(let seconds, let repeats):
            UNTimeIntervalNotificationTrigger(timeInterval: seconds, repeats: repeats)
        case .calendar(let components, let repeats):
            UNCalendarNotificationTrigger(dateMatching: components, repeats: repeats)
        case .location(let region, let repeats):
            UNLocationNotificationTrigger(region: CLCircularRegion(value: region), repeats: repeats)
        case .push:
            UNPushNotificationTrigger(pushRepeats: false)
        }
    }
}

extension UNNotificationRequest {
    @_spi(Tidings) public convenience init(value: NotificationRequestValue) {
        self.init(
            identifier: value.identifier,
            immutableContent: UNNotificationContent(value: value.content),
            trigger: value.trigger.map(UNNotificationTrigger.make)
        )
    }

    /// A pending request as the daemon reports it: a time-interval trigger knows the date
    /// it was scheduled for.
    @_spi(Tidings) public convenience init(pending: PendingRequestValue) {
        let value = pending.request
        var trigger = value.trigger.map(UNNotificationTrigger.make)
        if case .timeInterval(let seconds, let repeats)? = value.trigger, let date = pending.nextTriggerDate {
            trigger = UNTimeIntervalNotificationTrigger(timeInterval: seconds, repeats: repeats, scheduledDate: date)
        }
        self.init(identifier: value.identifier, immutableContent: UNNotificationContent(value: value.content), trigger: trigger)
    }

    /// The request as a value; validates the trigger and the content.
    @_spi(Tidings) public func value() throws(UNError) -> NotificationRequestValue {
        let trigger = try trigger?.value()
        return NotificationRequestValue(identifier: identifier, content: try content.value(), trigger: trigger)
    }
}

extension UNNotification {
    @_spi(Tidings) public convenience init(value: DeliveredNotificationValue) {
        self.init(request: UNNotificationRequest(value: value.request), date: value.date)
    }
}

extension UNNotificationResponse {
    /// A `UNTextInputNotificationResponse` when the person typed text, so
    /// `response as! UNTextInputNotificationResponse` works for text-input actions.
    @_spi(Tidings) public static func make(_ value: ResponseValue) -> UNNotificationResponse {
        let notification = UNNotification(value: value.notification)
        if let text = value.userText {
            return UNTextInputNotificationResponse(notification: notification, actionIdentifier: value.actionIdentifier, userText: text)
        }
        return UNNotificationResponse(notification: notification, actionIdentifier: value.actionIdentifier)
    }
}

extension UNNotificationAction {
    @_spi(Tidings) public var value: ActionValue {
        ActionValue(
            identifier: identifier, title: title, options: options.rawValue, icon: icon?.value,
            textInput: (self as? UNTextInputNotificationAction).map {
                ActionValue.TextInput(buttonTitle: $0.textInputButtonTitle, placeholder: $0.textInputPlaceholder)
            }
        )
    }

    @_spi(Tidings) public static func make(_ value: ActionValue) -> UNNotificationAction {
        let icon = value.icon.map(UNNotificationActionIcon.init(value:))
        let options = UNNotificationActionOptions(rawValue: value.options)
        if let input = value.textInput {
            return UNTextInputNotificationAction(identifier: value.identifier, title: value.title, options: options, icon: icon, textInputButtonTitle: input.buttonTitle, textInputPlaceholder: input.placeholder)
        }
        return UNNotificationAction(identifier: value.identifier, title: value.title, options: options, icon: icon)
    }
}

extension UNNotificationCategory {
    @_spi(Tidings) public var value: CategoryValue {
        CategoryValue(
            identifier: identifier,
            actions: actions.map(\.value),
            intentIdentifiers: intentIdentifiers,
            hiddenPreviewsBodyPlaceholder: hiddenPreviewsBodyPlaceholder.isEmpty ? nil : hiddenPreviewsBodyPlaceholder,
            categorySummaryFormat: categorySummaryFormat.isEmpty ? nil : categorySummaryFormat,
            options: options.rawValue
        )
    }

    @_spi(Tidings) public convenience init(value: CategoryValue) {
        self.init(
            identifier: value.identifier,
            actions: value.actions.map(UNNotificationAction.make),
            intentIdentifiers: value.intentIdentifiers,
            hiddenPreviewsBodyPlaceholder: value.hiddenPreviewsBodyPlaceholder ?? "",
            categorySummaryFormat: value.categorySummaryFormat ?? "",
            options: UNNotificationCategoryOptions(rawValue: value.options)
        )
    }
}

extension AuthorizationOptionsValue {
    init(_ options: UNAuthorizationOptions) { self.init(rawValue: options.rawValue) }
}

extension PresentationOptionsValue {
    init(_ options: UNNotificationPresentationOptions) { self.init(rawValue: options.rawValue) }
}
