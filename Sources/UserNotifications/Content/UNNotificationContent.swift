import Foundation
import TidingsCore

/// Objects that add information to a notification's content (iOS 15 communication
/// notifications: Intents' `INSendMessageIntent`, `INStartCallIntent`).
public protocol UNNotificationContentProviding: NSObjectProtocol {}

/// The content of a notification: immutable. Build content with
/// `UNMutableNotificationContent`; `mutableCopy()` returns a mutable copy, `copy()` of a
/// mutable content an immutable one.
open class UNNotificationContent: NSObject, NSCopying, NSMutableCopying, NSSecureCoding {
    struct Storage {
        var title = ""
        var subtitle = ""
        var body = ""
        var badge: NSNumber?
        var sound: UNNotificationSound?
        var launchImageName = ""
        var userInfo: [AnyHashable: Any] = [:]
        var attachments: [UNNotificationAttachment] = []
        var categoryIdentifier = ""
        var threadIdentifier = ""
        var targetContentIdentifier: String?
        var summaryArgument = ""
        var summaryArgumentCount = 0
        var interruptionLevel: UNNotificationInterruptionLevel = .active
        var relevanceScore: Double = 0
        var filterCriteria: String?
    }

    var storage: Storage

    /// Empty content. Apple's immutable content is made by the system; an empty
    /// `UNNotificationContent()` is what a service extension delivers to suppress a
    /// notification.
    public override init() {
        storage = Storage()
        super.init()
    }

    init(storage: Storage) {
        self.storage = storage
        super.init()
    }

    /// The notification's title.
    open var title: String { storage.title }
    /// A secondary description.
    open var subtitle: String { storage.subtitle }
    /// The message.
    open var body: String { storage.body }
    /// The app icon badge: nil leaves it unchanged, 0 removes it.
    open var badge: NSNumber? { storage.badge }
    /// The sound to play; nil is silent.
    open var sound: UNNotificationSound? { storage.sound }
    /// The launch image shown when the app opens from the notification.
    open var launchImageName: String { storage.launchImageName }
    /// Custom data: property-list values only (strings, numbers, booleans, dates, data,
    /// arrays and string-keyed dictionaries of them). For remote notifications, the whole
    /// payload.
    open var userInfo: [AnyHashable: Any] { storage.userInfo }
    /// Media shown with the notification; the default presentation shows the first.
    open var attachments: [UNNotificationAttachment] { storage.attachments }
    /// The identifier of the registered `UNNotificationCategory` (its actions).
    open var categoryIdentifier: String { storage.categoryIdentifier }
    /// Groups related notifications.
    open var threadIdentifier: String { storage.threadIdentifier }
    /// The window/scene that should handle the notification.
    open var targetContentIdentifier: String? { storage.targetContentIdentifier }
    @available(*, deprecated, message: "summaryArgument is ignored")
    open var summaryArgument: String { storage.summaryArgument }
    @available(*, deprecated, message: "summaryArgumentCount is ignored")
    open var summaryArgumentCount: Int { storage.summaryArgumentCount }
    /// How urgently the notification interrupts.
    open var interruptionLevel: UNNotificationInterruptionLevel { storage.interruptionLevel }
    /// 0.0–1.0: ranks the app's notifications in a summary.
    open var relevanceScore: Double { storage.relevanceScore }
    /// Matched against the current Focus filter.
    open var filterCriteria: String? { storage.filterCriteria }

    /// Communication notifications (iOS 15) need Intents' message and call intents, which
    /// do not exist on Linux: every provider is refused with
    /// `UNError.Code.contentProvidingObjectNotAllowed`.
    open func updating(from provider: any UNNotificationContentProviding) throws -> UNNotificationContent {
        throw UNError(.contentProvidingObjectNotAllowed, "\(Swift.type(of: provider)) cannot update notification content: communication notifications need the Intents framework, which Tidings does not provide on Linux.")
    }

    // MARK: NSCopying / NSMutableCopying

    open func copy(with zone: NSZone? = nil) -> Any {
        UNNotificationContent(storage: storage)
    }

    open func mutableCopy(with zone: NSZone? = nil) -> Any {
        UNMutableNotificationContent(storage: storage)
    }

    // MARK: Equality

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? UNNotificationContent else { return false }
        if other === self { return true }
        guard let a = try? value(), let b = try? other.value() else { return false }
        return a == b
    }

    open override var hash: Int {
        var hasher = Hasher()
        hasher.combine(storage.title)
        hasher.combine(storage.subtitle)
        hasher.combine(storage.body)
        hasher.combine(storage.categoryIdentifier)
        hasher.combine(storage.threadIdentifier)
        return hasher.finalize()
    }

    open override var description: String {
        let s = storage
        var parts = [
            "title: \(quoted(s.title))", "subtitle: \(quoted(s.subtitle))", "body: \(quoted(s.body))",
            "categoryIdentifier: \(s.categoryIdentifier)", "launchImageName: \(s.launchImageName)",
            "threadIdentifier: \(s.threadIdentifier)",
            "attachments: \(s.attachments)", "badge: \(s.badge.map { "\($0)" } ?? "(null)")",
            "sound: \(s.sound.map { "\($0)" } ?? "(null)")",
            "interruptionLevel: \(s.interruptionLevel.rawValue)", "relevanceScore: \(s.relevanceScore)",
        ]
        if let target = s.targetContentIdentifier { parts.append("targetContentIdentifier: \(target)") }
        if let filter = s.filterCriteria { parts.append("filterCriteria: \(filter)") }
        parts.append("userInfo: \(s.userInfo)")
        return "<\(Swift.type(of: self)): \(parts.joined(separator: ", "))>"
    }

    private func quoted(_ s: String) -> String { s.isEmpty ? "(null)" : s }

    // MARK: NSSecureCoding

    open class var supportsSecureCoding: Bool { true }

    open func encode(with coder: NSCoder) {
        ArchivedValue.encode(lossyValue(), with: coder)
    }

    public required init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(NotificationContentValue.self, from: coder) else { return nil }
        storage = Storage(value: value)
        super.init()
    }
}

/// Content you build for a notification request, or edit in a service extension.
open class UNMutableNotificationContent: UNNotificationContent {
    public override init() {
        super.init()
    }

    override init(storage: Storage) {
        super.init(storage: storage)
    }

    public required init?(coder: NSCoder) {
        super.init(coder: coder)
    }

    open override var title: String {
        get { storage.title }
        set { storage.title = newValue }
    }
    open override var subtitle: String {
        get { storage.subtitle }
        set { storage.subtitle = newValue }
    }
    open override var body: String {
        get { storage.body }
        set { storage.body = newValue }
    }
    open override var badge: NSNumber? {
        get { storage.badge }
        set { storage.badge = newValue }
    }
    open override var sound: UNNotificationSound? {
        get { storage.sound }
        set { storage.sound = newValue }
    }
    open override var launchImageName: String {
        get { storage.launchImageName }
        set { storage.launchImageName = newValue }
    }
    open override var userInfo: [AnyHashable: Any] {
        get { storage.userInfo }
        set { storage.userInfo = newValue }
    }
    open override var attachments: [UNNotificationAttachment] {
        get { storage.attachments }
        set { storage.attachments = newValue }
    }
    open override var categoryIdentifier: String {
        get { storage.categoryIdentifier }
        set { storage.categoryIdentifier = newValue }
    }
    open override var threadIdentifier: String {
        get { storage.threadIdentifier }
        set { storage.threadIdentifier = newValue }
    }
    open override var targetContentIdentifier: String? {
        get { storage.targetContentIdentifier }
        set { storage.targetContentIdentifier = newValue }
    }
    @available(*, deprecated, message: "summaryArgument is ignored")
    open override var summaryArgument: String {
        get { storage.summaryArgument }
        set { storage.summaryArgument = newValue }
    }
    @available(*, deprecated, message: "summaryArgumentCount is ignored")
    open override var summaryArgumentCount: Int {
        get { storage.summaryArgumentCount }
        set { storage.summaryArgumentCount = newValue }
    }
    open override var interruptionLevel: UNNotificationInterruptionLevel {
        get { storage.interruptionLevel }
        set { storage.interruptionLevel = newValue }
    }
    open override var relevanceScore: Double {
        get { storage.relevanceScore }
        set { storage.relevanceScore = newValue }
    }
    open override var filterCriteria: String? {
        get { storage.filterCriteria }
        set { storage.filterCriteria = newValue }
    }
}
