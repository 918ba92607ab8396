/// `apns-push-type`: the 11 values Apple documents, each with its topic suffix.
public struct PushType: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    /// What `apns-topic` must end with for this push type (after the bundle ID).
    public let topicSuffix: String

    private init(_ rawValue: String, suffix: String) {
        self.rawValue = rawValue
        self.topicSuffix = suffix
    }

    /// Only the 11 documented values; anything else is `InvalidPushType`.
    public init?(rawValue: String) {
        guard let known = PushType.all.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = known
    }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        guard let type = PushType(rawValue: raw) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown push type \(raw)"))
        }
        self = type
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    public static let alert = PushType("alert", suffix: "")
    public static let background = PushType("background", suffix: "")
    public static let complication = PushType("complication", suffix: ".complication")
    public static let controls = PushType("controls", suffix: ".push-type.controls")
    public static let fileprovider = PushType("fileprovider", suffix: ".pushkit.fileprovider")
    public static let liveactivity = PushType("liveactivity", suffix: ".push-type.liveactivity")
    public static let location = PushType("location", suffix: ".location-query")
    /// The topic is the UID of an MDM certificate: no suffix rule applies.
    public static let mdm = PushType("mdm", suffix: "")
    public static let pushtotalk = PushType("pushtotalk", suffix: ".voip-ptt")
    public static let voip = PushType("voip", suffix: ".voip")
    public static let widgets = PushType("widgets", suffix: ".push-type.widgets")

    public static let all: [PushType] = [
        .alert, .background, .complication, .controls, .fileprovider, .liveactivity,
        .location, .mdm, .pushtotalk, .voip, .widgets,
    ]

    /// The largest payload Apple accepts: 5120 bytes for VoIP, 4096 for everything else.
    public var maximumPayloadSize: Int { self == .voip ? 5120 : 4096 }

    /// Priorities this push type allows: a background push at 10 is an error.
    public func allows(_ priority: Priority) -> Bool {
        if self == .background { return priority != .immediate }
        return true
    }

    /// The push type a topic suffix implies, for requests without `apns-push-type`
    /// (sideshow/apns2 and old clients default to `alert`).
    public static func inferred(fromTopic topic: String) -> PushType {
        for type in all where !type.topicSuffix.isEmpty && topic.hasSuffix(type.topicSuffix) {
            // `.voip-ptt` ends in neither `.voip`, so order does not matter.
            return type
        }
        return .alert
    }
}

/// `apns-priority`: 10, 5 or 1.
public struct Priority: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: Int
    public init?(rawValue: Int) {
        guard rawValue == 10 || rawValue == 5 || rawValue == 1 else { return nil }
        self.rawValue = rawValue
    }
    private init(_ value: Int) { self.rawValue = value }

    /// Parses the header value; anything but `10`, `5` or `1` is `BadPriority`.
    public init(header: some StringProtocol) throws(APNsError) {
        guard let value = Int(header), let priority = Priority(rawValue: value) else { throw APNsError(.badPriority) }
        self = priority
    }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(Int.self)
        guard let priority = Priority(rawValue: raw) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad priority \(raw)"))
        }
        self = priority
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { String(rawValue) }

    /// 10: send now (Apple's default).
    public static let immediate = Priority(10)
    /// 5: consider the device's power.
    public static let considerPower = Priority(5)
    /// 1: never wake the device.
    public static let doNotAwaken = Priority(1)
}

/// `apns-expiration`: absolute UNIX seconds; `0` = deliver once, never store.
public struct Expiration: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Seconds since 1970. Zero means "immediately".
    public let epochSeconds: Int64

    public init(epochSeconds: Int64) { self.epochSeconds = epochSeconds }

    /// Parses the header: a decimal integer (a leading `-` is allowed and means "already
    /// expired"). Anything else is `BadExpirationDate`.
    public init(header: some StringProtocol) throws(APNsError) {
        guard let value = Int64(header) else { throw APNsError(.badExpirationDate) }
        self.epochSeconds = value
    }

    public static let immediately = Expiration(epochSeconds: 0)

    public var isImmediate: Bool { epochSeconds == 0 }

    public var description: String { String(epochSeconds) }
}

/// `apns-collapse-id`: at most 64 UTF-8 bytes.
public struct CollapseID: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public static let maximumByteCount = 64

    public init?(rawValue: String) {
        guard !rawValue.isEmpty, rawValue.utf8.count <= CollapseID.maximumByteCount else { return nil }
        self.rawValue = rawValue
    }

    /// Parses the header; more than 64 bytes (or empty) is `BadCollapseId`.
    public init(header: some StringProtocol) throws(APNsError) {
        guard let id = CollapseID(rawValue: String(header)) else { throw APNsError(.badCollapseId) }
        self = id
    }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        guard let id = CollapseID(rawValue: raw) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad collapse id"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
}

/// `apns-id`: a canonical UUID (8-4-4-4-12 hex). The exact string is kept, because clients
/// (aioapns) match responses by it byte for byte.
public struct APNsID: Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String

    /// Validates the header: upper or lower case hex in 8-4-4-4-12 groups, else `BadMessageId`.
    public init(header: some StringProtocol) throws(APNsError) {
        guard APNsID.isCanonicalUUID(header.utf8) else { throw APNsError(.badMessageId) }
        self.rawValue = String(header)
    }

    private init(unchecked: String) { self.rawValue = unchecked }

    /// A new lower-case UUID (version 4), as APNs generates when a request has none.
    public static func generate() -> APNsID {
        // 128 bits from a pool refilled from the system generator 4 KiB at a time (one
        // getrandom(2) per draw cost ≈ 10 % of the gateway's CPU under load), written straight
        // into the 36-byte string.
        let (high, low) = RandomBytePool.shared.next128()
        return APNsID(unchecked: String(unsafeUninitializedCapacity: 36) { out in
            formatUUID(high: high, low: low, into: UnsafeMutableRawBufferPointer(out))
            return 36
        })
    }

    /// Writes 128 random bits as a lower-case version-4 UUID (8-4-4-4-12, the version and
    /// variant bits set) into the first 36 bytes of `out`.
    public static func formatUUID(high: UInt64, low: UInt64, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= 36)
        let digits: StaticString = "0123456789abcdef"
        var o = 0
        for i in 0..<16 {
            var byte = UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> (8 * (i & 7)))
            if i == 6 { byte = (byte & 0x0f) | 0x40 }
            if i == 8 { byte = (byte & 0x3f) | 0x80 }
            if i == 4 || i == 6 || i == 8 || i == 10 { out[o] = UInt8(ascii: "-"); o += 1 }
            out[o] = digits.utf8Start[Int(byte >> 4)]
            out[o + 1] = digits.utf8Start[Int(byte & 0x0f)]
            o += 2
        }
    }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        do { try self.init(header: raw) } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad apns-id"))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    static func isCanonicalUUID(_ utf8: some Collection<UInt8>) -> Bool {
        if let result = utf8.withContiguousStorageIfAvailable({ isCanonicalUUID(bytes: $0) }) { return result }
        return Array(utf8).withUnsafeBufferPointer { isCanonicalUUID(bytes: $0) }
    }

    static func isCanonicalUUID(bytes utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            switch index {
            case 8, 13, 18, 23: if byte != UInt8(ascii: "-") { return false }
            default:
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): continue
                default: return false
                }
            }
        }
        return true
    }
}
