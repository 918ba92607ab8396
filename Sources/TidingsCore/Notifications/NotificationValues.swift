import Foundation

// The notification value model: what the `UN…` classes hold, what crosses the app socket,
// and what the engine stores. Raw values are Apple's, so the wire keeps the header values.

/// `UNNotificationInterruptionLevel` raw values.
public struct InterruptionLevel: RawRepresentable, Sendable, Hashable, Codable {
    public var rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let passive = InterruptionLevel(rawValue: 0)
    public static let active = InterruptionLevel(rawValue: 1)
    public static let timeSensitive = InterruptionLevel(rawValue: 2)
    public static let critical = InterruptionLevel(rawValue: 3)

    /// The `aps.interruption-level` spelling.
    public var apsName: String {
        switch rawValue {
        case 0: "passive"
        case 2: "time-sensitive"
        case 3: "critical"
        default: "active"
        }
    }

    public init?(apsName: String) {
        switch apsName {
        case "passive": self = .passive
        case "active": self = .active
        case "time-sensitive": self = .timeSensitive
        case "critical": self = .critical
        default: return nil
        }
    }
}

/// A notification sound: `UNNotificationSound`'s state.
public struct SoundValue: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case `default`, named, defaultCritical, criticalNamed, defaultRingtone, ringtoneNamed
    }
    public var kind: Kind
    public var name: String?
    /// Critical-alert volume, 0.0–1.0.
    public var volume: Float?

    public init(kind: Kind, name: String? = nil, volume: Float? = nil) {
        self.kind = kind
        self.name = name
        self.volume = volume
    }

    public static let `default` = SoundValue(kind: .default)
}

/// A notification attachment as stored: the file lives in the app's attachment store.
public struct AttachmentValue: Sendable, Hashable, Codable {
    public var identifier: String
    /// A file path (the app's original path before `add`, the data store path after).
    public var path: String
    /// The uniform type identifier, e.g. `public.png`.
    public var type: String
    public var options: AttachmentOptions

    public init(identifier: String, path: String, type: String, options: AttachmentOptions = .init()) {
        self.identifier = identifier
        self.path = path
        self.type = type
        self.options = options
    }
}

/// The `UNNotificationAttachmentOptions…Key` values that survive a round trip.
public struct AttachmentOptions: Sendable, Hashable, Codable {
    public var typeHint: String?
    public var thumbnailHidden: Bool?
    /// A normalized clipping rectangle: x, y, width, height in 0…1.
    public var thumbnailClippingRect: [Double]?
    /// Frame number (animated images) or seconds (movies).
    public var thumbnailTime: Double?

    public init(typeHint: String? = nil, thumbnailHidden: Bool? = nil, thumbnailClippingRect: [Double]? = nil, thumbnailTime: Double? = nil) {
        self.typeHint = typeHint
        self.thumbnailHidden = thumbnailHidden
        self.thumbnailClippingRect = thumbnailClippingRect
        self.thumbnailTime = thumbnailTime
    }
}

/// `UNNotificationContent`'s state.
public struct NotificationContentValue: Sendable, Hashable, Codable {
    public var title: String = ""
    public var subtitle: String = ""
    public var body: String = ""
    public var badge: Int?
    public var sound: SoundValue?
    public var launchImageName: String = ""
    public var userInfo: [String: PropertyListValue] = [:]
    public var attachments: [AttachmentValue] = []
    public var categoryIdentifier: String = ""
    public var threadIdentifier: String = ""
    public var targetContentIdentifier: String?
    public var summaryArgument: String = ""
    public var summaryArgumentCount: Int = 0
    public var interruptionLevel: InterruptionLevel = .active
    public var relevanceScore: Double = 0
    public var filterCriteria: String?

    public init() {}

    /// Whether a person would see anything: the condition for presenting an alert.
    public var hasAlertContent: Bool {
        !title.isEmpty || !subtitle.isEmpty || !body.isEmpty
    }
}

extension NotificationContentValue {
    /// The content with its numbers made safe to keep, compare, encode as JSON and show:
    /// an app's values are untrusted. A negative badge is an error (`badgeInputInvalid`,
    /// as `setBadgeCount`); the rest is clamped to its range, as Apple clamps
    /// `relevanceScore` to 0–1: NaN and infinities (which JSON cannot carry and which break
    /// equality) become the default, a volume goes to 0–1, a count to ≥ 0.
    public func withCheckedNumbers() throws(NotificationError) -> NotificationContentValue {
        if let badge, badge < 0 {
            throw NotificationError(.badgeInputInvalid, "badge count must not be negative (got \(badge))")
        }
        var c = self
        c.relevanceScore = relevanceScore.isNaN ? 0 : min(max(relevanceScore, 0), 1)
        if let volume = sound?.volume {
            c.sound?.volume = volume.isNaN ? nil : min(max(volume, 0), 1)
        }
        c.summaryArgumentCount = max(summaryArgumentCount, 0)
        for index in c.attachments.indices {
            var options = c.attachments[index].options
            if let time = options.thumbnailTime, !time.isFinite || time < 0 { options.thumbnailTime = nil }
            if let rect = options.thumbnailClippingRect, rect.count != 4 || !rect.allSatisfy({ $0.isFinite }) {
                options.thumbnailClippingRect = nil
            }
            c.attachments[index].options = options
        }
        return c
    }
}

extension NotificationContentValue {
    private enum CodingKeys: String, CodingKey {
        case title, subtitle, body, badge, sound, launchImageName, userInfo, attachments
        case categoryIdentifier, threadIdentifier, targetContentIdentifier, summaryArgument
        case summaryArgumentCount, interruptionLevel, relevanceScore, filterCriteria
    }

    // Only what differs from the defaults is written: content crosses the app socket and
    // lands in storage for every request, and most of its sixteen fields are empty.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        title = try c.decodeIfPresent(String.self, forKey: .title) ?? ""
        subtitle = try c.decodeIfPresent(String.self, forKey: .subtitle) ?? ""
        body = try c.decodeIfPresent(String.self, forKey: .body) ?? ""
        badge = try c.decodeIfPresent(Int.self, forKey: .badge)
        sound = try c.decodeIfPresent(SoundValue.self, forKey: .sound)
        launchImageName = try c.decodeIfPresent(String.self, forKey: .launchImageName) ?? ""
        userInfo = try c.decodeIfPresent([String: PropertyListValue].self, forKey: .userInfo) ?? [:]
        attachments = try c.decodeIfPresent([AttachmentValue].self, forKey: .attachments) ?? []
        categoryIdentifier = try c.decodeIfPresent(String.self, forKey: .categoryIdentifier) ?? ""
        threadIdentifier = try c.decodeIfPresent(String.self, forKey: .threadIdentifier) ?? ""
        targetContentIdentifier = try c.decodeIfPresent(String.self, forKey: .targetContentIdentifier)
        summaryArgument = try c.decodeIfPresent(String.self, forKey: .summaryArgument) ?? ""
        summaryArgumentCount = try c.decodeIfPresent(Int.self, forKey: .summaryArgumentCount) ?? 0
        interruptionLevel = try c.decodeIfPresent(InterruptionLevel.self, forKey: .interruptionLevel) ?? .active
        relevanceScore = try c.decodeIfPresent(Double.self, forKey: .relevanceScore) ?? 0
        filterCriteria = try c.decodeIfPresent(String.self, forKey: .filterCriteria)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        if !title.isEmpty { try c.encode(title, forKey: .title) }
        if !subtitle.isEmpty { try c.encode(subtitle, forKey: .subtitle) }
        if !body.isEmpty { try c.encode(body, forKey: .body) }
        try c.encodeIfPresent(badge, forKey: .badge)
        try c.encodeIfPresent(sound, forKey: .sound)
        if !launchImageName.isEmpty { try c.encode(launchImageName, forKey: .launchImageName) }
        if !userInfo.isEmpty { try c.encode(userInfo, forKey: .userInfo) }
        if !attachments.isEmpty { try c.encode(attachments, forKey: .attachments) }
        if !categoryIdentifier.isEmpty { try c.encode(categoryIdentifier, forKey: .categoryIdentifier) }
        if !threadIdentifier.isEmpty { try c.encode(threadIdentifier, forKey: .threadIdentifier) }
        try c.encodeIfPresent(targetContentIdentifier, forKey: .targetContentIdentifier)
        if !summaryArgument.isEmpty { try c.encode(summaryArgument, forKey: .summaryArgument) }
        if summaryArgumentCount != 0 { try c.encode(summaryArgumentCount, forKey: .summaryArgumentCount) }
        if interruptionLevel != .active { try c.encode(interruptionLevel, forKey: .interruptionLevel) }
        if relevanceScore != 0 { try c.encode(relevanceScore, forKey: .relevanceScore) }
        try c.encodeIfPresent(filterCriteria, forKey: .filterCriteria)
    }
}

/// A circular region: `CLCircularRegion`'s state.
public struct CircularRegionValue: Sendable, Hashable, Codable {
    public var identifier: String
    public var latitude: Double
    public var longitude: Double
    /// Metres.
    public var radius: Double
    public var notifyOnEntry: Bool
    public var notifyOnExit: Bool

    public init(identifier: String, latitude: Double, longitude: Double, radius: Double, notifyOnEntry: Bool = true, notifyOnExit: Bool = true) {
        self.identifier = identifier
        self.latitude = latitude
        self.longitude = longitude
        self.radius = radius
        self.notifyOnEntry = notifyOnEntry
        self.notifyOnExit = notifyOnExit
    }
}

/// A trigger: one of Apple's four.
public enum TriggerValue: Sendable, Hashable, Codable {
    case timeInterval(seconds: Double, repeats: Bool)
    case calendar(DateComponents, repeats: Bool)
    case location(CircularRegionValue, repeats: Bool)
    case push

    public var repeats: Bool {
        switch self {
        case .timeInterval(_, let repeats), .calendar(_, let repeats), .location(_, let repeats): repeats
        case .push: false
        }
    }
}

/// `UNNotificationRequest`'s state.
public struct NotificationRequestValue: Sendable, Hashable, Codable {
    public var identifier: String
    public var content: NotificationContentValue
    public var trigger: TriggerValue?

    public init(identifier: String, content: NotificationContentValue, trigger: TriggerValue?) {
        self.identifier = identifier
        self.content = content
        self.trigger = trigger
    }
}

/// `UNNotification`'s state: a delivered request and its date.
public struct DeliveredNotificationValue: Sendable, Hashable, Codable {
    public var request: NotificationRequestValue
    public var date: Date

    public init(request: NotificationRequestValue, date: Date) {
        self.request = request
        self.date = date
    }
}

/// `UNNotificationActionIcon`'s state.
public struct ActionIconValue: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable { case template, system }
    public var kind: Kind
    public var name: String
    public init(kind: Kind, name: String) {
        self.kind = kind
        self.name = name
    }
}

/// `UNNotificationAction` / `UNTextInputNotificationAction` state.
public struct ActionValue: Sendable, Hashable, Codable {
    public struct TextInput: Sendable, Hashable, Codable {
        public var buttonTitle: String
        public var placeholder: String
        public init(buttonTitle: String, placeholder: String) {
            self.buttonTitle = buttonTitle
            self.placeholder = placeholder
        }
    }
    public var identifier: String
    public var title: String
    /// `UNNotificationActionOptions` raw value.
    public var options: UInt
    public var icon: ActionIconValue?
    /// Present for a text-input action.
    public var textInput: TextInput?

    public init(identifier: String, title: String, options: UInt = 0, icon: ActionIconValue? = nil, textInput: TextInput? = nil) {
        self.identifier = identifier
        self.title = title
        self.options = options
        self.icon = icon
        self.textInput = textInput
    }

    public static let authenticationRequired: UInt = 1 << 0
    public static let destructive: UInt = 1 << 1
    public static let foreground: UInt = 1 << 2
}

/// `UNNotificationCategory`'s state.
public struct CategoryValue: Sendable, Hashable, Codable {
    public var identifier: String
    public var actions: [ActionValue]
    public var intentIdentifiers: [String]
    public var hiddenPreviewsBodyPlaceholder: String?
    public var categorySummaryFormat: String?
    /// `UNNotificationCategoryOptions` raw value.
    public var options: UInt

    public init(identifier: String, actions: [ActionValue], intentIdentifiers: [String] = [], hiddenPreviewsBodyPlaceholder: String? = nil, categorySummaryFormat: String? = nil, options: UInt = 0) {
        self.identifier = identifier
        self.actions = actions
        self.intentIdentifiers = intentIdentifiers
        self.hiddenPreviewsBodyPlaceholder = hiddenPreviewsBodyPlaceholder
        self.categorySummaryFormat = categorySummaryFormat
        self.options = options
    }

    public static let customDismissAction: UInt = 1 << 0
    public static let allowInCarPlay: UInt = 1 << 1
    public static let hiddenPreviewsShowTitle: UInt = 1 << 2
    public static let hiddenPreviewsShowSubtitle: UInt = 1 << 3
    public static let allowAnnouncement: UInt = 1 << 4
}

/// Action identifiers with a fixed meaning.
public enum ActionIdentifier {
    public static let `default` = "com.apple.UNNotificationDefaultActionIdentifier"
    public static let dismiss = "com.apple.UNNotificationDismissActionIdentifier"
}

/// `UNNotificationResponse`'s state.
public struct ResponseValue: Sendable, Hashable, Codable {
    public var notification: DeliveredNotificationValue
    public var actionIdentifier: String
    /// Set for a text-input action: `UNTextInputNotificationResponse.userText`.
    public var userText: String?

    public init(notification: DeliveredNotificationValue, actionIdentifier: String, userText: String? = nil) {
        self.notification = notification
        self.actionIdentifier = actionIdentifier
        self.userText = userText
    }
}
