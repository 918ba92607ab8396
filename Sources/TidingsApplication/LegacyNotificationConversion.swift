import Foundation
import TidingsCore
@_spi(Tidings) import UserNotifications

// Seed 004's conversion between the two APIs (its table "UILocalNotification →
// UNNotificationRequest → APNs payload"), used by UIApplication's legacy API and public
// for code that keeps both (Tidings additions; UIKit has no such initializers).

@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationRequest")
extension UNNotificationRequest {
    /// The request UIKit schedules for `localNotification`. Its identifier is derived from
    /// the notification's fields; `alertTitle`/`alertBody`/`alertLaunchImage`/`category`/
    /// `userInfo` become the content's `title`/`body`/`launchImageName`/`categoryIdentifier`/
    /// `userInfo`, `soundName` the sound (`UILocalNotificationDefaultSoundName`: `.default`),
    /// `applicationIconBadgeNumber` the badge (0: unchanged); `hasAction` and `alertAction`
    /// have no counterpart. The trigger: `region` → a location trigger (`repeats` =
    /// `!regionTriggersOnce`); `fireDate` → a calendar trigger on its components, in a fixed
    /// zone (GMT) when `timeZone` is nil (an absolute time) or floating (wall-clock time)
    /// when it is set, matching only the components below `repeatInterval` when it repeats;
    /// no `fireDate` → delivered at once.
    @MainActor
    public convenience init(localNotification: UILocalNotification) {
        let content = UNMutableNotificationContent()
        content.title = localNotification.alertTitle ?? ""
        content.body = localNotification.alertBody ?? ""
        content.launchImageName = localNotification.alertLaunchImage ?? ""
        content.categoryIdentifier = localNotification.category ?? ""
        content.userInfo = localNotification.userInfo ?? [:]
        if let soundName = localNotification.soundName {
            content.sound = soundName == UILocalNotificationDefaultSoundName ? UNNotificationSound.default : UNNotificationSound(named: UNNotificationSoundName(soundName))
        }
        if localNotification.applicationIconBadgeNumber > 0 {
            content.badge = NSNumber(value: localNotification.applicationIconBadgeNumber)
        }
        self.init(identifier: localNotification.identity.requestIdentifier, content: content,
                  trigger: Self.trigger(for: localNotification))
    }

    /// The components below each repeat interval: what stays the same between firings.
    static let repeatingComponents: [(NSCalendar.Unit, Set<Calendar.Component>)] = [
        (.year, [.month, .day, .hour, .minute, .second]),
        (.month, [.day, .hour, .minute, .second]),
        (.weekOfYear, [.weekday, .hour, .minute, .second]),
        (.weekday, [.weekday, .hour, .minute, .second]),
        (.day, [.hour, .minute, .second]),
        (.hour, [.minute, .second]),
        (.minute, [.second]),
    ]

    @MainActor
    private static func trigger(for notification: UILocalNotification) -> UNNotificationTrigger? {
        if let region = notification.region {
            return UNLocationNotificationTrigger(region: region, repeats: !notification.regionTriggersOnce)
        }
        guard let fireDate = notification.fireDate else { return nil }
        var calendar = notification.repeatCalendar ?? Calendar(identifier: .gregorian)
        calendar.timeZone = notification.timeZone ?? TimeZone(identifier: "GMT")!
        let repeating = repeatingComponents.first { notification.repeatInterval.contains($0.0) }?.1
        var components = calendar.dateComponents(repeating ?? [.era, .year, .month, .day, .hour, .minute, .second], from: fireDate)
        if notification.repeatCalendar != nil { components.calendar = notification.repeatCalendar }
        // nil time zone: an absolute time, so the components carry a fixed zone; a time
        // zone: wall-clock time, so they float with the device's zone.
        if notification.timeZone == nil { components.timeZone = calendar.timeZone }
        return UNCalendarNotificationTrigger(dateMatching: components, repeats: repeating != nil)
    }
}

@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationRequest")
extension UILocalNotification {
    /// The notification a request stands for (the reverse of
    /// `UNNotificationRequest(localNotification:)`): `fireDate` is `date` when given (a
    /// delivered notification), else the trigger's next date; a floating calendar trigger
    /// gives the device's time zone, a fixed one none; `repeatInterval` follows the
    /// components a repeating calendar trigger matches.
    public convenience init(request: UNNotificationRequest, date: Date?) {
        self.init()
        let content = request.content
        alertTitle = content.title.isEmpty ? nil : content.title
        alertBody = content.body.isEmpty ? nil : content.body
        alertLaunchImage = content.launchImageName.isEmpty ? nil : content.launchImageName
        category = content.categoryIdentifier.isEmpty ? nil : content.categoryIdentifier
        userInfo = content.userInfo.isEmpty ? nil : content.userInfo
        applicationIconBadgeNumber = content.badge?.intValue ?? 0
        if let sound = try? content.value().sound {
            soundName = sound.kind == .named ? sound.name : UILocalNotificationDefaultSoundName
        }
        requestIdentifier = request.identifier
        switch request.trigger {
        case let trigger as UNCalendarNotificationTrigger:
            let components = trigger.dateComponents
            timeZone = components.timeZone == nil ? .current : nil
            repeatCalendar = components.calendar
            if trigger.repeats {
                let present = Set<Calendar.Component>([.month, .day, .weekday, .hour, .minute, .second].filter { components.value(for: $0) != nil })
                repeatInterval = UNNotificationRequest.repeatingComponents.first { $0.1 == present }?.0 ?? []
            }
            fireDate = date ?? (trigger.repeats || components.year == nil ? trigger.nextTriggerDate() : (components.calendar ?? Calendar(identifier: .gregorian)).date(from: components))
        case let trigger as UNLocationNotificationTrigger:
            region = trigger.region
            regionTriggersOnce = !trigger.repeats
            fireDate = date
        case let trigger as UNTimeIntervalNotificationTrigger:
            fireDate = date ?? trigger.nextTriggerDate()
            if trigger.repeats { repeatInterval = trigger.timeInterval >= 86_400 ? .day : trigger.timeInterval >= 3_600 ? .hour : .minute }
        default:
            fireDate = date
        }
    }
}

@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationCategory")
extension UNNotificationCategory {
    /// The category for `category`'s default-context actions: activation in the foreground →
    /// `.foreground`, authentication → `.authenticationRequired`, destructive →
    /// `.destructive`; a text-input behaviour → `UNTextInputNotificationAction` with the
    /// button title of its parameters.
    @MainActor
    public convenience init(userNotificationCategory category: UIUserNotificationCategory) {
        let actions = (category.actions(for: .default) ?? []).map { action -> UNNotificationAction in
            var options: UNNotificationActionOptions = []
            if action.activationMode == .foreground { options.insert(.foreground) }
            if action.isAuthenticationRequired { options.insert(.authenticationRequired) }
            if action.isDestructive { options.insert(.destructive) }
            if action.behavior == .textInput {
                return UNTextInputNotificationAction(
                    identifier: action.identifier ?? "", title: action.title ?? "", options: options,
                    textInputButtonTitle: action.parameters[UIUserNotificationTextInputActionButtonTitleKey] as? String ?? "",
                    textInputPlaceholder: "")
            }
            return UNNotificationAction(identifier: action.identifier ?? "", title: action.title ?? "", options: options)
        }
        self.init(identifier: category.identifier ?? "", actions: actions, intentIdentifiers: [], options: [])
    }
}

@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationCategory")
extension UIUserNotificationCategory {
    /// The reverse of `UNNotificationCategory(userNotificationCategory:)`.
    public convenience init(category: UNNotificationCategory) {
        self.init()
        storedIdentifier = category.identifier
        let actions = category.actions.map { action -> UIUserNotificationAction in
            let legacy = UIMutableUserNotificationAction()
            legacy.identifier = action.identifier
            legacy.title = action.title
            legacy.activationMode = action.options.contains(.foreground) ? .foreground : .background
            legacy.isAuthenticationRequired = action.options.contains(.authenticationRequired)
            legacy.isDestructive = action.options.contains(.destructive)
            if let text = action as? UNTextInputNotificationAction {
                legacy.behavior = .textInput
                legacy.parameters = [UIUserNotificationTextInputActionButtonTitleKey: text.textInputButtonTitle]
            }
            return legacy
        }
        actionsByContext[.default] = actions
        actionsByContext[.minimal] = Array(actions.prefix(2))
    }
}
