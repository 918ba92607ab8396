import Foundation

/// The members of a device message that the protocol names, parsed from the top-level object
/// without keeping the others.
struct DeviceMessageFields {
    enum Key: Int, CaseIterable {
        case type, nonce, publicKey, signature, deviceID, acks, requestID, topic, environment, token
        case sequence, sequences, apnsID, pushType, priority, collapseID, expiresAt, acceptedAt, payload
        case event, id, reason, message, events, eventBatches, occurredAt

        /// The member name, as spelled on the wire.
        var name: String { Key.names[rawValue] }

        /// How many there are (`allCases.count` would build the array of cases each time).
        static let count = names.count

        static let names = ["type", "nonce", "publicKey", "signature", "deviceID", "acks", "requestID", "topic", "environment",
                            "token", "sequence", "sequences", "apnsID", "pushType", "priority", "collapseID", "expiresAt",
                            "acceptedAt", "payload", "event", "id", "reason", "message", "events", "eventBatches", "occurredAt"]
    }

    private var values = [JSONValue?](repeating: nil, count: Key.count)
    /// A `payload` that was a string, as its UTF-8 bytes (then `self[.payload]` is nil): the
    /// push's payload without a `String` in between.
    private(set) var payloadBytes: [UInt8]?

    init() {}

    subscript(key: Key) -> JSONValue? {
        get { values[key.rawValue] }
        set { values[key.rawValue] = newValue }
    }

    /// Parses a JSON text whose top level is an object, as `JSONValue(parsing:)` does (same
    /// grammar, depth limit, and last value for a repeated key); nil when it would throw or
    /// the top level is not an object.
    init?(parsing bytes: UnsafeBufferPointer<UInt8>) {
        var parser = Input(bytes: bytes)
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { parser.index = 3 }
        parser.skipWhitespace()
        guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "{") else {
            // Not an object: whatever it is, the message is rejected (after the same checks).
            return nil
        }
        do {
            if JSONValue.maximumDepth < 1 { return nil }  // as `JSONParser.enter()` for the object
            parser.index += 1
            parser.skipWhitespace()
            if parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "}") {
                parser.index += 1
            } else {
                members: while true {
                    parser.skipWhitespace()
                    guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "\"") else { return nil }
                    let key = try Self.parseKey(&parser)
                    parser.skipWhitespace()
                    guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: ":") else { return nil }
                    parser.index += 1
                    parser.skipWhitespace()
                    if key == Key.payload.rawValue, parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "\"") {
                        guard let payload = Self.parseStringBytes(&parser) else { return nil }
                        payloadBytes = payload
                        values[Key.payload.rawValue] = nil
                    } else {
                        let value = try Self.parseValue(&parser)
                        if let key {
                            values[key] = value
                            if key == Key.payload.rawValue { payloadBytes = nil }
                        }
                    }
                    parser.skipWhitespace()
                    guard parser.index < bytes.count else { return nil }
                    if bytes[parser.index] == UInt8(ascii: ",") { parser.index += 1; continue members }
                    if bytes[parser.index] == UInt8(ascii: "}") { parser.index += 1; break members }
                    return nil
                }
            }
            parser.skipWhitespace()
            guard parser.index == bytes.count else { return nil }
        } catch {
            return nil
        }
    }

    /// A member's value: strings and integers (all a push has) without the general parser's
    /// intermediate `String`s; anything else through it.
    private static func parseValue(_ parser: inout Input) throws(JSONParseError) -> JSONValue {
        let bytes = parser.bytes
        guard parser.index < bytes.count else { return try parser.general { (p: inout JSONParser) throws(JSONParseError) in try p.parseValue() } }
        let first = bytes[parser.index]
        if first == UInt8(ascii: "\"") {
            // A plain ASCII string (no escapes): a `String` straight from its bytes.
            if let plain = plainString(&parser) { return .string(String(decoding: plain, as: UTF8.self)) }
            return try parser.general { (p: inout JSONParser) throws(JSONParseError) in try p.parseValue() }
        }
        if first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) {
            // An integer of at most 18 digits (no overflow), not followed by a fraction or an
            // exponent: what `JSONParser.parseNumber` makes `.integer` of, without its `String`.
            var i = parser.index
            let negative = first == UInt8(ascii: "-")
            if negative { i += 1 }
            let digitsStart = i
            var magnitude: Int64 = 0
            while i < bytes.count, i - digitsStart < 19, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
                magnitude = magnitude &* 10 &+ Int64(bytes[i] &- UInt8(ascii: "0"))
                i += 1
            }
            let digits = i - digitsStart
            let plain = digits >= 1 && digits <= 18 && (digits == 1 || bytes[digitsStart] != UInt8(ascii: "0"))
                && (i == bytes.count || (bytes[i] != UInt8(ascii: ".") && bytes[i] != UInt8(ascii: "e") && bytes[i] != UInt8(ascii: "E")
                    && !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i])))
            if plain {
                parser.index = i
                return .integer(negative ? -magnitude : magnitude)
            }
        }
        return try parser.general { (p: inout JSONParser) throws(JSONParseError) in try p.parseValue() }
    }

    /// A JSON string's contents as UTF-8 bytes, rejected (nil) exactly where
    /// `JSONParser.parseString` throws: a control byte, a bad escape or surrogate, invalid UTF-8,
    /// no closing quote. The parser stands on the opening quote; after, past the closing one.
    fileprivate static func parseStringBytes(_ parser: inout Input) -> [UInt8]? {
        let input = parser.bytes
        return plainStringBytes.withUnsafeBufferPointer { plain -> [UInt8]? in
            let start = parser.index + 1
            // One pass, into room for the rest of the message: the contents are never longer
            // unescaped (`\uXXXX` is 6 bytes for at most 3, a surrogate pair 12 for 4).
            let end = input.count
            var closed = false
            var valid = true
            var nonASCII: UInt8 = 0
            var i = start
            let out = [UInt8](unsafeUninitializedCapacity: end - start) { out, count in
                var j = 0
                func hex4() -> UInt32? {
                    guard let value = JSONParser.hex4(input, at: i) else { return nil }
                    i += 4
                    return value
                }
                decoding: while i < end {
                    // A run of bytes copied as they are: one table test per byte.
                    var b = input[i]
                    while plain[Int(b)] != 0 {
                        nonASCII |= b
                        out[j] = b
                        i += 1
                        j += 1
                        guard i < end else { break decoding }
                        b = input[i]
                    }
                    if b != UInt8(ascii: "\\") {
                        if b == UInt8(ascii: "\"") { closed = true } else { valid = false }  // a control byte
                        break decoding
                    }
                    guard i + 1 < end else { valid = false; break decoding }
                    let escape = input[i + 1]
                    i += 2
                    let unescaped: UInt8
                    switch escape {
                    case UInt8(ascii: "\""): unescaped = 0x22
                    case UInt8(ascii: "\\"): unescaped = 0x5C
                    case UInt8(ascii: "/"): unescaped = 0x2F
                    case UInt8(ascii: "b"): unescaped = 0x08
                    case UInt8(ascii: "f"): unescaped = 0x0C
                    case UInt8(ascii: "n"): unescaped = 0x0A
                    case UInt8(ascii: "r"): unescaped = 0x0D
                    case UInt8(ascii: "t"): unescaped = 0x09
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { valid = false; break decoding }
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard i + 1 < end, input[i] == UInt8(ascii: "\\"), input[i + 1] == UInt8(ascii: "u") else { valid = false; break decoding }
                            i += 2
                            guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { valid = false; break decoding }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(scalar) {
                            valid = false
                            break decoding
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { valid = false; break decoding }
                        for unit in UTF8.encode(unicode)! {
                            out[j] = unit
                            j += 1
                        }
                        continue decoding
                    default:
                        valid = false
                        break decoding
                    }
                    out[j] = unescaped
                    j += 1
                }
                count = j
            }
            guard valid, closed else { return nil }
            // Raw non-ASCII bytes must be valid UTF-8 (escapes only ever produce valid text).
            if nonASCII >= 0x80, out.withUnsafeBufferPointer({ String(validating: $0, as: UTF8.self) }) == nil { return nil }
            parser.index = i + 1
            return out
        }
    }

    /// 1 for a byte that stands for itself inside a JSON string (not `"`, `\\`, or a control byte).
    private static let plainStringBytes: [UInt8] = (0..<256).map { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 ? 0 : 1 }

    /// The index of the member name `name` (its UTF-8 bytes) in `Key.names`, nil for any other:
    /// one switch on the length, then at most five byte comparisons (no array of names touched,
    /// so no reference counting per member).
    static func keyIndex(_ name: UnsafeBufferPointer<UInt8>) -> Int? {
        func equals(_ candidate: StaticString) -> Bool {
            candidate.utf8CodeUnitCount == name.count && memcmp(candidate.utf8Start, name.baseAddress!, name.count) == 0
        }
        let key: Key?
        switch name.count {
        case 2: key = equals("id") ? .id : nil
        case 4: key = equals("type") ? .type : equals("acks") ? .acks : nil
        case 5: key = equals("nonce") ? .nonce : equals("topic") ? .topic : equals("token") ? .token : equals("event") ? .event : nil
        case 6: key = equals("apnsID") ? .apnsID : equals("reason") ? .reason : equals("events") ? .events : nil
        case 7: key = equals("payload") ? .payload : equals("message") ? .message : nil
        case 8:
            key = equals("sequence") ? .sequence : equals("pushType") ? .pushType : equals("priority") ? .priority
                : equals("deviceID") ? .deviceID : nil
        case 9:
            key = equals("expiresAt") ? .expiresAt : equals("requestID") ? .requestID : equals("sequences") ? .sequences
                : equals("publicKey") ? .publicKey : equals("signature") ? .signature : nil
        case 10: key = equals("acceptedAt") ? .acceptedAt : equals("collapseID") ? .collapseID : equals("occurredAt") ? .occurredAt : nil
        case 11: key = equals("environment") ? .environment : nil
        case 12: key = equals("eventBatches") ? .eventBatches : nil
        default: key = nil
        }
        return key?.rawValue
    }

    /// The string starting at the parser's quote when it is plain ASCII (no escapes, no
    /// control bytes): its bytes, and the parser moved past its closing quote. Nil (the parser
    /// unmoved) for anything else, which the general parser then reads.
    private static func plainString(_ parser: inout Input) -> UnsafeBufferPointer<UInt8>? {
        let bytes = parser.bytes
        let start = parser.index + 1
        var end = start
        while end < bytes.count {
            let b = bytes[end]
            if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { break }
            end += 1
        }
        guard end < bytes.count, bytes[end] == UInt8(ascii: "\"") else { return nil }
        parser.index = end + 1
        return UnsafeBufferPointer(rebasing: bytes[start..<end])
    }

    /// The index of a member name the protocol knows, nil for any other. A plain ASCII name
    /// is matched on its bytes; one with escapes or non-ASCII is decoded first.
    private static func parseKey(_ parser: inout Input) throws(JSONParseError) -> Int? {
        if let plain = plainString(&parser) { return keyIndex(plain) }
        let name = try parser.general { (p: inout JSONParser) throws(JSONParseError) in try p.parseString() }
        return Key.names.firstIndex(of: name)
    }
}

/// The bytes `DeviceMessageFields` parses, where they lie, and its place in them. What its own
/// paths do not handle goes to `JSONParser`, over one copy made on first need.
private struct Input {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    private var copy: [UInt8]?

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// `body` on a `JSONParser` standing where this input does, inside the top-level object
    /// (depth 1); this input then stands where it stopped.
    mutating func general<T>(_ body: (inout JSONParser) throws(JSONParseError) -> T) throws(JSONParseError) -> T {
        if copy == nil { copy = Array(bytes) }
        var parser = JSONParser(bytes: copy!)
        parser.index = index
        parser.depth = 1
        let result = try body(&parser)
        index = parser.index
        return result
    }
}
