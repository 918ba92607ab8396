import Foundation
import TidingsCore

/// A request to deliver a notification: an identifier, content and an optional trigger.
///
/// The identifier is the key for every later operation: adding a request with the
/// identifier of a pending or delivered notification replaces it; removing by identifier
/// cancels or withdraws it. A nil trigger delivers the notification right away.
open class UNNotificationRequest: NSObject, NSCopying, NSSecureCoding {
    public let identifier: String
    /// An immutable copy of the content given at creation.
    public let content: UNNotificationContent
    public let trigger: UNNotificationTrigger?

    /// Creates a request. The content is copied: later changes to a mutable content do not
    /// affect the request.
    public convenience init(identifier: String, content: UNNotificationContent, trigger: UNNotificationTrigger?) {
        self.init(identifier: identifier, immutableContent: content.copy() as! UNNotificationContent, trigger: trigger)
    }

    init(identifier: String, immutableContent: UNNotificationContent, trigger: UNNotificationTrigger?) {
        self.identifier = identifier
        self.content = immutableContent
        self.trigger = trigger
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any { self }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? UNNotificationRequest else { return false }
        return other.identifier == identifier && other.content == content && other.trigger == trigger
    }

    open override var hash: Int { identifier.hashValue }

    open override var description: String {
        "<UNNotificationRequest: identifier: \(identifier), content: \(content), trigger: \(trigger.map { "\($0)" } ?? "(null)")>"
    }

    open class var supportsSecureCoding: Bool { true }

    open func encode(with coder: NSCoder) {
        ArchivedValue.encode(NotificationRequestValue(identifier: identifier, content: content.lossyValue(), trigger: trigger?.archivableValue), with: coder)
    }

    public required convenience init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(NotificationRequestValue.self, from: coder) else { return nil }
        self.init(value: value)
    }
}

/// A delivered notification: its request and the date it was delivered.
open class UNNotification: NSObject, NSCopying, NSSecureCoding {
    public let date: Date
    public let request: UNNotificationRequest

    /// The system creates notifications; this initializer exists for tests and tools.
    @_spi(Tidings) public init(request: UNNotificationRequest, date: Date) {
        self.request = request
        self.date = date
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any { self }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? UNNotification else { return false }
        return other.date == date && other.request == request
    }

    open override var hash: Int { request.hash ^ date.hashValue }

    open override var description: String {
        "<UNNotification: date: \(date), request: \(request)>"
    }

    open class var supportsSecureCoding: Bool { true }

    open func encode(with coder: NSCoder) {
        let requestValue = NotificationRequestValue(identifier: request.identifier, content: request.content.lossyValue(), trigger: request.trigger?.archivableValue)
        ArchivedValue.encode(DeliveredNotificationValue(request: requestValue, date: date), with: coder)
    }

    public required convenience init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(DeliveredNotificationValue.self, from: coder) else { return nil }
        self.init(value: value)
    }
}

/// The person's answer to a notification: which action, on which notification.
open class UNNotificationResponse: NSObject, NSCopying, NSSecureCoding {
    public let notification: UNNotification
    /// `UNNotificationDefaultActionIdentifier` (tapped), `UNNotificationDismissActionIdentifier`
    /// (dismissed, only for categories with `.customDismissAction`) or an action's identifier.
    public let actionIdentifier: String

    /// The system creates responses; this initializer exists for tests and tools.
    @_spi(Tidings) public init(notification: UNNotification, actionIdentifier: String) {
        self.notification = notification
        self.actionIdentifier = actionIdentifier
        super.init()
    }

    var responseValue: ResponseValue {
        let requestValue = NotificationRequestValue(identifier: notification.request.identifier, content: notification.request.content.lossyValue(), trigger: notification.request.trigger?.archivableValue)
        return ResponseValue(notification: DeliveredNotificationValue(request: requestValue, date: notification.date), actionIdentifier: actionIdentifier, userText: (self as? UNTextInputNotificationResponse)?.userText)
    }

    open func copy(with zone: NSZone? = nil) -> Any { self }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? UNNotificationResponse, Swift.type(of: other) == Swift.type(of: self) else { return false }
        return other.actionIdentifier == actionIdentifier && other.notification == notification
            && (other as? UNTextInputNotificationResponse)?.userText == (self as? UNTextInputNotificationResponse)?.userText
    }

    open override var hash: Int { notification.hash ^ actionIdentifier.hashValue }

    open override var description: String {
        "<\(Swift.type(of: self)): actionIdentifier: \(actionIdentifier), notification: \(notification)>"
    }

    open class var supportsSecureCoding: Bool { true }

    open func encode(with coder: NSCoder) { ArchivedValue.encode(responseValue, with: coder) }

    public required init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(ResponseValue.self, from: coder) else { return nil }
        notification = UNNotification(value: value.notification)
        actionIdentifier = value.actionIdentifier
        super.init()
    }
}

/// The response to a `UNTextInputNotificationAction`: carries the text the person typed.
open class UNTextInputNotificationResponse: UNNotificationResponse {
    public let userText: String

    @_spi(Tidings) public init(notification: UNNotification, actionIdentifier: String, userText: String) {
        self.userText = userText
        super.init(notification: notification, actionIdentifier: actionIdentifier)
    }

    public required init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(ResponseValue.self, from: coder), let text = value.userText else { return nil }
        userText = text
        super.init(coder: coder)
    }

    open override var description: String {
        "<UNTextInputNotificationResponse: actionIdentifier: \(actionIdentifier), userText: \(userText), notification: \(notification)>"
    }
}
