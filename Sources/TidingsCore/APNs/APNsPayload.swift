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

    /// The device's parse of a payload: the whole document as the `userInfo` iOS hands the
    /// app, what `notificationContent` puts there (JSON null left out), parsed once into that
    /// dictionary: no `JSONValue` tree to convert (`APS(payloadMember:)` reads its `aps`).
    /// Accepts and refuses exactly what `init(json:)` does, with the same errors.
    static func userInfo(json bytes: [UInt8]) throws(APNsPayloadError) -> [String: PropertyListValue] {
        var parser = JSONTreeParser<PropertyListValue>(bytes: bytes)
        let value: PropertyListValue?
        do { value = try parser.parseDocument() } catch { throw APNsPayloadError.invalidJSON(error) }
        guard case .dictionary(let userInfo)? = value else { throw APNsPayloadError.notAnObject }
        return userInfo
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
        self.init()
        read(members: d)
        json = .object(d)
    }

    /// The `aps` member of a payload parsed as `userInfo` (no keys unless it is a dictionary).
    init(payloadMember value: PropertyListValue?) {
        self.init()
        if case .dictionary(let members)? = value { read(members: members) }
    }

    /// Sets the typed fields from the `aps` keys: the one place that says what each key means.
    /// Any key with the wrong type is ignored, as on iOS. (`json`, the dictionary as sent, is
    /// the caller's: `init(dictionary:)` sets it; the device's path keeps the payload as
    /// `userInfo` instead.) A method on a new `APS`, not an initializer the others delegate
    /// to: each delegation copied the whole struct.
    private mutating func read<Value: APSFieldValue>(members: [String: Value]) {
        for (key, value) in members {
            // The keys of almost every push first.
            switch key {
            case "alert": alert = Alert(json: value)
            case "badge": badge = value.scalar?.integerValue.flatMap { Int(exactly: $0) }
            case "sound": sound = Sound(json: value)
            case "mutable-content": mutableContent = APS.flag(value)
            case "content-available": contentAvailable = APS.flag(value)
            case "thread-id": threadID = value.scalar?.stringValue
            case "category": category = value.scalar?.stringValue
            case "target-content-id": targetContentID = value.scalar?.stringValue
            case "interruption-level": interruptionLevel = value.scalar?.stringValue.flatMap(InterruptionLevel.init(apsName:))
            case "relevance-score": relevanceScore = value.scalar?.doubleValue
            case "filter-criteria": filterCriteria = value.scalar?.stringValue
            case "stale-date": staleDate = value.scalar?.integerValue
            case "content-state": contentState = value.jsonValue
            case "timestamp": timestamp = value.scalar?.integerValue
            case "event": event = value.scalar?.stringValue
            case "dismissal-date": dismissalDate = value.scalar?.integerValue
            case "attributes-type": attributesType = value.scalar?.stringValue
            case "attributes": attributes = value.jsonValue
            case "input-push-token": inputPushToken = APS.flag(value)
            case "input-push-channel": inputPushChannel = value.scalar?.stringValue
            case "content-changed": contentChanged = APS.flag(value)
            case "url-args": urlArgs = value.elements?.compactMap { $0.scalar?.stringValue }
            case "ptt-push-type": pttPushType = value.scalar?.stringValue
            default: break
            }
        }
    }

    /// A flag is set by `1`, `"1"` or `true`.
    static func flag<Value: APSFieldValue>(_ value: Value?) -> Bool {
        switch value?.scalar {
        case .integer(1), .bool(true), .string("1"): true
        case .double(let d) where d == 1: true
        default: false
        }
    }
}

/// A parsed JSON value as the `aps` rules read it: a `JSONValue`, or the property list the
/// device parses a payload into (the same values with JSON null left out, which every rule
/// takes as absent anyway).
protocol APSFieldValue {
    /// A string, number or boolean (or null) as a `JSONValue`, whose accessors hold the rules
    /// for each (`integerValue` takes `2.0` as 2, `doubleValue` any number); nil for an array
    /// or object.
    var scalar: JSONValue? { get }
    var elements: [Self]? { get }
    var members: [String: Self]? { get }
    /// The value as JSON, for the keys kept whole (Live Activity state and attributes).
    var jsonValue: JSONValue? { get }
}

extension JSONValue: APSFieldValue {
    var scalar: JSONValue? {
        switch self {
        case .array, .object: nil
        default: self
        }
    }
    var elements: [JSONValue]? { arrayValue }
    var members: [String: JSONValue]? { objectValue }
    var jsonValue: JSONValue? { self }
}

extension PropertyListValue: APSFieldValue {
    var scalar: JSONValue? {
        switch self {
        case .string(let s): .string(s)
        case .integer(let i): .integer(i)
        case .double(let d): .double(d)
        case .bool(let b): .bool(b)
        case .date, .data, .array, .dictionary: nil
        }
    }
    var elements: [PropertyListValue]? { if case .array(let a) = self { a } else { nil } }
    var members: [String: PropertyListValue]? { if case .dictionary(let d) = self { d } else { nil } }
    /// Dates and data have no JSON form (and never come from JSON).
    var jsonValue: JSONValue? {
        switch self {
        case .array(let a): .array(a.compactMap(\.jsonValue))
        case .dictionary(let d): .object(d.compactMapValues(\.jsonValue))
        default: scalar
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

    init?<Value: APSFieldValue>(json: Value) {
        if let s = json.scalar?.stringValue {
            body = s
            return
        }
        guard let d = json.members else { return nil }
        var title, titleKey, titleArgs, subtitle, subtitleKey, subtitleArgs, body, bodyKey, bodyArgs: Value?
        for (key, value) in d {
            switch key {
            case "title": title = value
            case "body": body = value
            case "subtitle": subtitle = value
            case "loc-key": bodyKey = value
            case "loc-args": bodyArgs = value
            case "title-loc-key": titleKey = value
            case "title-loc-args": titleArgs = value
            case "subtitle-loc-key": subtitleKey = value
            case "subtitle-loc-args": subtitleArgs = value
            case "launch-image": launchImage = value.scalar?.stringValue
            case "action": action = value.scalar?.stringValue
            case "action-loc-key": actionLocKey = value.scalar?.stringValue
            case "summary-arg": summaryArg = value.scalar?.stringValue
            case "summary-arg-count": summaryArgCount = value.scalar?.integerValue.flatMap { Int(exactly: $0) }
            case "sound": sound = Sound(json: value)
            default: break
            }
        }
        let titleText = Alert.text(title, key: titleKey, args: titleArgs)
        self.title = titleText.plain
        titleLocalized = titleText.localized
        let subtitleText = Alert.text(subtitle, key: subtitleKey, args: subtitleArgs)
        self.subtitle = subtitleText.plain
        subtitleLocalized = subtitleText.localized
        let bodyText = Alert.text(body, key: bodyKey, args: bodyArgs)
        self.body = bodyText.plain
        bodyLocalized = bodyText.localized
    }

    /// A text is a plain string, a `…-loc-key` with `…-loc-args`, or (Live Activities) a
    /// dictionary `{"loc-key": …, "loc-args": […]}` in place of the plain string.
    private static func text<Value: APSFieldValue>(_ plain: Value?, key: Value?, args: Value?) -> (plain: String?, localized: LocalizableText?) {
        var localized: LocalizableText?
        if let key = key?.scalar?.stringValue {
            localized = LocalizableText(key: key, arguments: args?.elements?.compactMap { argumentText($0.scalar) } ?? [])
        }
        if let s = plain?.scalar?.stringValue { return (s, localized) }
        if let d = plain?.members, localized == nil, let key = d["loc-key"]?.scalar?.stringValue {
            localized = LocalizableText(key: key, arguments: d["loc-args"]?.elements?.compactMap { argumentText($0.scalar) } ?? [])
        }
        return (nil, localized)
    }

    private static func argumentText(_ value: JSONValue?) -> String? {
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

    init?<Value: APSFieldValue>(json: Value) {
        if let s = json.scalar?.stringValue {
            self.init(name: s)
        } else if let d = json.members {
            self.init(
                name: d["name"]?.scalar?.stringValue ?? "default",
                critical: APS.flag(d["critical"]),
                volume: d["volume"]?.scalar?.doubleValue.map { min(max($0, 0), 1) }
            )
        } else {
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
        var content = aps.notificationContent(localize: localize)
        if case .dictionary(let info)? = json.propertyListValue { content.userInfo = info }
        return content
    }

    /// Whether iOS would hand this push to a notification service extension:
    /// `mutable-content` set and an alert present.
    public var wantsServiceExtension: Bool { aps.wantsServiceExtension }

    /// A silent background update: `content-available` without alert, badge or sound.
    public var isBackgroundUpdate: Bool { aps.isBackgroundUpdate }
}

extension APS {
    /// `APNsPayload.notificationContent` without `userInfo`: what the `aps` keys make of it.
    func notificationContent(localize: (String) -> String?) -> NotificationContentValue {
        var content = NotificationContentValue()
        if let alert {
            content.title = alert.titleLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.title ?? ""
            content.subtitle = alert.subtitleLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.subtitle ?? ""
            content.body = alert.bodyLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.body ?? ""
            content.launchImageName = alert.launchImage ?? ""
            content.summaryArgument = alert.summaryArg ?? ""
            content.summaryArgumentCount = alert.summaryArgCount ?? 0
        }
        content.badge = badge
        content.sound = (sound ?? alert?.sound)?.value
        content.categoryIdentifier = category ?? ""
        content.threadIdentifier = threadID ?? ""
        content.targetContentIdentifier = targetContentID
        content.interruptionLevel = interruptionLevel ?? .active
        content.relevanceScore = relevanceScore ?? 0
        content.filterCriteria = filterCriteria
        return content
    }

    var wantsServiceExtension: Bool { mutableContent && alert != nil }

    var isBackgroundUpdate: Bool { contentAvailable && alert == nil && badge == nil && sound == nil }
}
