import Foundation

/// A remote-notification payload: the `aps` dictionary plus the provider's custom keys.
///
/// Parsing is as lenient as iOS: a key with the wrong type is ignored rather than refused
/// (APNs itself accepts any JSON object, even one without `aps`), so the only errors are a
/// body that is not JSON or not a JSON object.
public struct APNsPayload: Sendable, Hashable {
    public var aps: APS
    /// Every top-level key except `aps`, as parsed.
    public var customKeys: [String: JSONValue]
    /// The whole document as parsed.
    public var json: JSONValue

    public init(aps: APS = APS(), customKeys: [String: JSONValue] = [:]) {
        self.aps = aps
        self.customKeys = customKeys
        var all = customKeys
        all["aps"] = aps.json
        self.json = .object(all)
    }

    /// Parses a UTF-8 JSON body.
    public init(json bytes: some Collection<UInt8>) throws(APNsPayloadError) {
        let value: JSONValue
        do { value = try JSONValue(parsing: bytes) } catch { throw APNsPayloadError.invalidJSON(error) }
        try self.init(value: value)
    }

    public init(value: JSONValue) throws(APNsPayloadError) {
        guard case .object(var dict) = value else { throw APNsPayloadError.notAnObject }
        let apsValue = dict.removeValue(forKey: "aps")
        self.aps = apsValue?.objectValue.map(APS.init(dictionary:)) ?? APS()
        self.customKeys = dict
        self.json = value
    }
}

/// Why a payload was refused.
public struct APNsPayloadError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Kind: Hashable { case invalidJSON, notAnObject }
    private let kind: Kind
    public let detail: String

    public static func invalidJSON(_ error: JSONParseError) -> APNsPayloadError { .init(kind: .invalidJSON, detail: error.description) }
    public static let notAnObject = APNsPayloadError(kind: .notAnObject, detail: "the payload is not a JSON object")

    public var description: String { detail }

    /// The reason the gateway answers with.
    public var reason: APNsReason { .badRequestPayload }
}

/// The `aps` dictionary (Apple's Table 1, plus the keys in use that the table leaves out).
public struct APS: Sendable, Hashable {
    public var alert: Alert?
    public var badge: Int?
    public var sound: Sound?
    public var threadID: String?
    public var category: String?
    /// `content-available: 1`.
    public var contentAvailable: Bool = false
    /// `mutable-content: 1` (or `"1"`, which some providers send).
    public var mutableContent: Bool = false
    public var targetContentID: String?
    public var interruptionLevel: InterruptionLevel?
    public var relevanceScore: Double?
    public var filterCriteria: String?
    // Live Activities
    public var staleDate: Int64?
    public var contentState: JSONValue?
    public var timestamp: Int64?
    public var event: String?
    public var dismissalDate: Int64?
    public var attributesType: String?
    public var attributes: JSONValue?
    public var inputPushToken: Bool = false
    public var inputPushChannel: String?
    // Widgets, Safari, PushToTalk
    public var contentChanged: Bool = false
    public var urlArgs: [String]?
    public var pttPushType: String?
    /// The dictionary as sent, unknown keys included.
    public var json: JSONValue

    public init() { json = .object([:]) }

    public init(dictionary d: [String: JSONValue]) {
        json = .object(d)
        if let a = d["alert"] { alert = Alert(json: a) }
        badge = d["badge"]?.integerValue.flatMap { Int(exactly: $0) }
        if let s = d["sound"] { sound = Sound(json: s) }
        threadID = d["thread-id"]?.stringValue
        category = d["category"]?.stringValue
        contentAvailable = APS.flag(d["content-available"])
        mutableContent = APS.flag(d["mutable-content"])
        targetContentID = d["target-content-id"]?.stringValue
        interruptionLevel = d["interruption-level"]?.stringValue.flatMap(InterruptionLevel.init(apsName:))
        relevanceScore = d["relevance-score"]?.doubleValue
        filterCriteria = d["filter-criteria"]?.stringValue
        staleDate = d["stale-date"]?.integerValue
        contentState = d["content-state"]
        timestamp = d["timestamp"]?.integerValue
        event = d["event"]?.stringValue
        dismissalDate = d["dismissal-date"]?.integerValue
        attributesType = d["attributes-type"]?.stringValue
        attributes = d["attributes"]
        inputPushToken = APS.flag(d["input-push-token"])
        inputPushChannel = d["input-push-channel"]?.stringValue
        contentChanged = APS.flag(d["content-changed"])
        urlArgs = d["url-args"]?.arrayValue?.compactMap(\.stringValue)
        pttPushType = d["ptt-push-type"]?.stringValue
    }

    /// A flag is set by `1`, `"1"` or `true`.
    static func flag(_ value: JSONValue?) -> Bool {
        switch value {
        case .integer(1), .bool(true), .string("1"): true
        case .double(let d) where d == 1: true
        default: false
        }
    }
}

/// A localizable string given as a key and its arguments.
public struct LocalizableText: Sendable, Hashable {
    public var key: String
    public var arguments: [String]
    public init(key: String, arguments: [String] = []) {
        self.key = key
        self.arguments = arguments
    }

    /// Replaces `%@` and `%n$@` (and `%%`) with the arguments, the way iOS formats a
    /// localized string whose key has no translation.
    public func formatted(format: String? = nil) -> String {
        let format = format ?? key
        var out = ""
        var next = 0
        var chars = Array(format)[...]
        while let c = chars.popFirst() {
            guard c == "%" else { out.append(c); continue }
            if chars.first == "%" { chars.removeFirst(); out.append("%"); continue }
            if chars.first == "@" {
                chars.removeFirst()
                if next < arguments.count { out += arguments[next] }
                next += 1
                continue
            }
            // %n$@
            var digits = ""
            var look = chars
            while let d = look.first, d.isASCII, d.isNumber { digits.append(d); look.removeFirst() }
            if !digits.isEmpty, look.first == "$", look.dropFirst().first == "@", let n = Int(digits), n >= 1 {
                chars = look.dropFirst(2)
                if n - 1 < arguments.count { out += arguments[n - 1] }
                continue
            }
            out.append(c)
        }
        return out
    }
}

/// `aps.alert`: a string (the body) or a dictionary (Apple's Table 2).
public struct Alert: Sendable, Hashable {
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var titleLocalized: LocalizableText?
    public var subtitleLocalized: LocalizableText?
    public var bodyLocalized: LocalizableText?
    public var launchImage: String?
    // Legacy and deprecated keys that libraries still send.
    public var action: String?
    public var actionLocKey: String?
    public var summaryArg: String?
    public var summaryArgCount: Int?
    /// Live Activity alerts may carry their sound inside `alert`.
    public var sound: Sound?

    public init(title: String? = nil, subtitle: String? = nil, body: String? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
    }

    init?(json: JSONValue) {
        switch json {
        case .string(let s):
            body = s
        case .object(let d):
            let title = Alert.text(d["title"], key: d["title-loc-key"], args: d["title-loc-args"])
            self.title = title.plain
            titleLocalized = title.localized
            let subtitle = Alert.text(d["subtitle"], key: d["subtitle-loc-key"], args: d["subtitle-loc-args"])
            self.subtitle = subtitle.plain
            subtitleLocalized = subtitle.localized
            let body = Alert.text(d["body"], key: d["loc-key"], args: d["loc-args"])
            self.body = body.plain
            bodyLocalized = body.localized
            launchImage = d["launch-image"]?.stringValue
            action = d["action"]?.stringValue
            actionLocKey = d["action-loc-key"]?.stringValue
            summaryArg = d["summary-arg"]?.stringValue
            summaryArgCount = d["summary-arg-count"]?.integerValue.flatMap { Int(exactly: $0) }
            sound = d["sound"].flatMap(Sound.init(json:))
        default:
            return nil
        }
    }

    /// A text is a plain string, a `…-loc-key` with `…-loc-args`, or (Live Activities) a
    /// dictionary `{"loc-key": …, "loc-args": […]}` in place of the plain string.
    private static func text(_ plain: JSONValue?, key: JSONValue?, args: JSONValue?) -> (plain: String?, localized: LocalizableText?) {
        var localized: LocalizableText?
        if let key = key?.stringValue {
            localized = LocalizableText(key: key, arguments: args?.arrayValue?.compactMap(argumentText) ?? [])
        }
        switch plain {
        case .string(let s): return (s, localized)
        case .object(let d):
            if localized == nil, let key = d["loc-key"]?.stringValue {
                localized = LocalizableText(key: key, arguments: d["loc-args"]?.arrayValue?.compactMap(argumentText) ?? [])
            }
            return (nil, localized)
        default: return (nil, localized)
        }
    }

    private static func argumentText(_ value: JSONValue) -> String? {
        switch value {
        case .string(let s): s
        case .integer(let i): String(i)
        case .double(let d): String(d)
        case .bool(let b): String(b)
        default: nil
        }
    }
}

/// `aps.sound`: a name, or the critical-alert dictionary (Apple's Table 3).
public struct Sound: Sendable, Hashable {
    public var name: String
    public var critical: Bool
    /// 0…1, critical alerts only.
    public var volume: Double?

    public init(name: String, critical: Bool = false, volume: Double? = nil) {
        self.name = name
        self.critical = critical
        self.volume = volume
    }

    init?(json: JSONValue) {
        switch json {
        case .string(let s):
            self.init(name: s)
        case .object(let d):
            self.init(
                name: d["name"]?.stringValue ?? "default",
                critical: APS.flag(d["critical"]),
                volume: d["volume"]?.doubleValue.map { min(max($0, 0), 1) }
            )
        default:
            return nil
        }
    }

    /// The notification-model sound.
    public var value: SoundValue {
        let isDefault = name == "default" || name.isEmpty
        switch (critical, isDefault) {
        case (false, true): return SoundValue(kind: .default)
        case (false, false): return SoundValue(kind: .named, name: name)
        case (true, true): return SoundValue(kind: .defaultCritical, volume: volume.map(Float.init))
        case (true, false): return SoundValue(kind: .criticalNamed, name: name, volume: volume.map(Float.init))
        }
    }
}

extension APNsPayload {
    /// The notification content a device builds from this payload, as iOS does before any
    /// service extension runs: alert texts (loc keys resolved with `localize`, which returns
    /// the app's format string for a key, or nil to use the key itself), badge, sound,
    /// category, thread, target content id, interruption level, relevance, filter criteria,
    /// and `userInfo` holding the whole payload (the `aps` dictionary included, as on iOS).
    public func notificationContent(localize: (String) -> String? = { _ in nil }) -> NotificationContentValue {
        var content = NotificationContentValue()
        if let alert = aps.alert {
            content.title = alert.titleLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.title ?? ""
            content.subtitle = alert.subtitleLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.subtitle ?? ""
            content.body = alert.bodyLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.body ?? ""
            content.launchImageName = alert.launchImage ?? ""
            content.summaryArgument = alert.summaryArg ?? ""
            content.summaryArgumentCount = alert.summaryArgCount ?? 0
        }
        content.badge = aps.badge
        content.sound = (aps.sound ?? aps.alert?.sound)?.value
        content.categoryIdentifier = aps.category ?? ""
        content.threadIdentifier = aps.threadID ?? ""
        content.targetContentIdentifier = aps.targetContentID
        content.interruptionLevel = aps.interruptionLevel ?? .active
        content.relevanceScore = aps.relevanceScore ?? 0
        content.filterCriteria = aps.filterCriteria
        if case .dictionary(let info)? = json.propertyListValue { content.userInfo = info }
        return content
    }

    /// Whether iOS would hand this push to a notification service extension:
    /// `mutable-content` set and an alert present.
    public var wantsServiceExtension: Bool { aps.mutableContent && aps.alert != nil }

    /// A silent background update: `content-available` without alert, badge or sound.
    public var isBackgroundUpdate: Bool { aps.contentAvailable && aps.alert == nil && aps.badge == nil && aps.sound == nil }
}
