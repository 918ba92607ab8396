/// `apns-topic`: a bundle ID, or a bundle ID plus the suffix of its push type.
public struct Topic: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public static let maximumLength = 255

    /// A syntactically valid topic: 1–255 characters of letters, digits, `.`, `-` and `_`.
    public init?(rawValue: String) {
        guard Topic.isValid(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// Parses the header; a malformed value is `BadTopic`.
    public init(header: some StringProtocol) throws(APNsError) {
        guard let topic = Topic(rawValue: String(header)) else { throw APNsError(.badTopic) }
        self = topic
    }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        guard let topic = Topic(rawValue: raw) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "bad topic"))
        }
        self = topic
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    static func isValid(_ s: String) -> Bool {
        let utf8 = s.utf8
        guard !utf8.isEmpty, utf8.count <= maximumLength else { return false }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
                continue
            default: return false
            }
        }
        return true
    }

    /// The app's bundle ID for a push of `pushType`: the topic without the push type's
    /// suffix. Throws `TopicDisallowed` when the topic lacks the suffix the push type needs
    /// (`com.example.app` for a `voip` push).
    public func bundleID(for pushType: PushType) throws(APNsError) -> String {
        let suffix = pushType.topicSuffix
        if suffix.isEmpty { return rawValue }
        guard rawValue.hasSuffix(suffix), rawValue.utf8.count > suffix.utf8.count else { throw APNsError(.topicDisallowed) }
        return String(rawValue.dropLast(suffix.count))
    }
}
