import Foundation

/// A parsed JSON value that keeps what `JSONSerialization` blurs on Linux: integers apart
/// from doubles apart from booleans, and strings apart from numbers (`"iat": "123"` vs
/// `"iat": 123`, `"mutable-content": "1"` vs `1`). Objects keep their last value for a
/// repeated key, as most JSON decoders do.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let dict) = self { return dict[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }

    /// An integer, or a double with no fractional part that fits.
    public var integerValue: Int64? {
        switch self {
        case .integer(let i): i
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: Int64(d)
        default: nil
        }
    }

    /// Any number as a double.
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    /// The property-list form used for `userInfo`; `null` has none (Apple's plist encoder
    /// has no null), so object members and array elements that are null are dropped.
    public var propertyListValue: PropertyListValue? {
        switch self {
        case .null: nil
        case .bool(let b): .bool(b)
        case .integer(let i): .integer(i)
        case .double(let d): .double(d)
        case .string(let s): .string(s)
        case .array(let a): .array(a.compactMap(\.propertyListValue))
        case .object(let o): .dictionary(o.compactMapValues(\.propertyListValue))
        }
    }
}

/// Why a JSON text could not be parsed, with the byte offset.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var offset: Int
    public var message: String
    public var description: String { "invalid JSON at byte \(offset): \(message)" }
}

extension JSONValue {
    /// The deepest nesting accepted: deeper documents are rejected instead of recursing
    /// without bound on hostile input.
    public static let maximumDepth = 128

    /// Parses a complete JSON text (RFC 8259), UTF-8, with surrounding whitespace.
    public init(parsing bytes: some Collection<UInt8>) throws(JSONParseError) {
        let array = Array(bytes)
        var parser = JSONParser(bytes: array)
        self = try parser.parseDocument() ?? .null
    }

    /// Serializes compactly, keys sorted (deterministic output for storage and tests).
    public var jsonText: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .integer(let i): out += String(i)
        case .double(let d):
            if d.isFinite { out += d.rounded() == d && abs(d) < 1e15 ? String(format: "%.1f", d) : "\(d)" } else { out += "null" }
        case .string(let s): out += "\"" + APNsError.escape(s) + "\""
        case .array(let a):
            out += "["
            for (i, v) in a.enumerated() { if i > 0 { out += "," }; v.write(to: &out) }
            out += "]"
        case .object(let o):
            out += "{"
            for (i, key) in o.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                out += "\"" + APNsError.escape(key) + "\":"
                o[key]!.write(to: &out)
            }
            out += "}"
        }
    }
}

/// What `JSONTreeParser` builds from each JSON value: a `JSONValue` tree, or the property list
/// iOS hands an app as `userInfo` (the remote path parses a payload straight into it). One
/// parser, so both accept exactly the same texts, with the same limits and errors.
protocol JSONTreeValue {
    /// JSON `null`; nil for a tree that has none: the member or element is then left out, as
    /// `JSONValue.propertyListValue` leaves it out (a repeated key's later `null` removes it).
    static var jsonNull: Self? { get }
    static func jsonBool(_ value: Bool) -> Self
    static func jsonInteger(_ value: Int64) -> Self
    static func jsonDouble(_ value: Double) -> Self
    static func jsonString(_ value: String) -> Self
    static func jsonArray(_ elements: [Self]) -> Self
    static func jsonObject(_ members: [String: Self]) -> Self
}

extension JSONValue: JSONTreeValue {
    static var jsonNull: JSONValue? { .null }
    static func jsonBool(_ value: Bool) -> JSONValue { .bool(value) }
    static func jsonInteger(_ value: Int64) -> JSONValue { .integer(value) }
    static func jsonDouble(_ value: Double) -> JSONValue { .double(value) }
    static func jsonString(_ value: String) -> JSONValue { .string(value) }
    static func jsonArray(_ elements: [JSONValue]) -> JSONValue { .array(elements) }
    static func jsonObject(_ members: [String: JSONValue]) -> JSONValue { .object(members) }
}

/// JSON as `userInfo`: what `JSONValue.propertyListValue` makes of the parsed tree, built
/// without the tree.
extension PropertyListValue: JSONTreeValue {
    static var jsonNull: PropertyListValue? { nil }
    static func jsonBool(_ value: Bool) -> PropertyListValue { .bool(value) }
    static func jsonInteger(_ value: Int64) -> PropertyListValue { .integer(value) }
    static func jsonDouble(_ value: Double) -> PropertyListValue { .double(value) }
    static func jsonString(_ value: String) -> PropertyListValue { .string(value) }
    static func jsonArray(_ elements: [PropertyListValue]) -> PropertyListValue { .array(elements) }
    static func jsonObject(_ members: [String: PropertyListValue]) -> PropertyListValue { .dictionary(members) }
}

/// The parser `JSONValue(parsing:)` uses (the device decoder's general path too).
typealias JSONParser = JSONTreeParser<JSONValue>

struct JSONTreeParser<Value: JSONTreeValue> {
    let bytes: [UInt8]
    var index = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// Room made for an object's members before the first is added: the objects of a payload
    /// mostly have one to three, which then fit without the dictionary growing (and rehashing).
    static var objectCapacity: Int { 3 }

    /// A complete JSON text; nil when it is `null` and `Value` has no null.
    mutating func parseDocument() throws(JSONParseError) -> Value? {
        // A UTF-8 byte order mark is tolerated, as Foundation does.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        skipWhitespace()
        let value = try parseElement()
        skipWhitespace()
        guard index == bytes.count else { throw fail("trailing characters") }
        return value
    }

    func fail(_ message: String) -> JSONParseError { JSONParseError(offset: index, message: message) }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// One value; nil for `null` when `Value` has none.
    mutating func parseElement() throws(JSONParseError) -> Value? {
        guard index < bytes.count else { throw fail("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .jsonString(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .jsonBool(true)
        case UInt8(ascii: "f"): try expect("false"); return .jsonBool(false)
        case UInt8(ascii: "n"): try expect("null"); return Value.jsonNull
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    mutating func expect(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end") }
        let lit = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for i in 0..<count where bytes[index + i] != lit[i] { throw fail("invalid literal") }
        index += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > JSONValue.maximumDepth { throw fail("nesting too deep") }
    }

    mutating func parseObject() throws(JSONParseError) -> Value {
        try enter()
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; depth -= 1; return .jsonObject([:]) }
        var dict = [String: Value](minimumCapacity: Self.objectCapacity)
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            // A repeated key keeps its last value (a last `null` without a null value removes it).
            dict[key] = try parseElement()
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; depth -= 1; return .jsonObject(dict) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws(JSONParseError) -> Value {
        try enter()
        index += 1
        var items: [Value] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; depth -= 1; return .jsonArray(items) }
        while true {
            skipWhitespace()
            if let item = try parseElement() { items.append(item) }
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; depth -= 1; return .jsonArray(items) }
            throw fail("expected ',' or ']'")
        }
    }

    /// The `String` of UTF-8 bytes, nil when they are not valid UTF-8. ASCII needs no
    /// validation (and skips the standard library's generic validating initializer, which
    /// was a fifth of the parse); anything else is validated.
    private static func string(_ utf8: UnsafeBufferPointer<UInt8>, isASCII: Bool) -> String? {
        isASCII ? String(decoding: utf8, as: UTF8.self) : String(validating: utf8, as: UTF8.self)
    }

    /// Where the run of string bytes from `start` ends (at a quote, backslash, control byte or
    /// the end of the input), and the bits of its bytes or'ed together (≥ 0x80: not ASCII).
    private func run(from start: Int) -> (end: Int, high: UInt8) {
        bytes.withUnsafeBufferPointer { buffer in
            var i = start
            var high: UInt8 = 0
            while i < buffer.count {
                let byte = buffer[i]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                high |= byte
                i += 1
            }
            return (i, high)
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        let first = run(from: start)
        var high = first.high
        index = first.end
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            index += 1
            let s = bytes.withUnsafeBufferPointer { Self.string(UnsafeBufferPointer(rebasing: $0[start..<first.end]), isASCII: high < 0x80) }
            guard let s else { throw fail("invalid UTF-8") }
            return s
        }
        if index < bytes.count, bytes[index] < 0x20 { throw fail("control character in string") }
        var out = Array(bytes[start..<index])
        // Escapes produce valid UTF-8; only raw bytes of 0x80 and above need validating.
        while index < bytes.count {
            // Runs without escapes are copied whole (a payload sent as a string is mostly such
            // runs between escaped quotes), not appended byte by byte.
            let runStart = index
            let next = run(from: runStart)
            index = next.end
            high |= next.high
            if index > runStart { out.append(contentsOf: bytes[runStart..<index]) }
            guard index < bytes.count else { break }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let s = out.withUnsafeBufferPointer({ Self.string($0, isASCII: high < 0x80) }) else { throw fail("invalid UTF-8") }
                return s
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail("unexpected end") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw fail("unpaired surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid scalar") }
                    UTF8.encode(unicode) { out.append($0) }
                default: throw fail("invalid escape")
                }
            default:
                if byte < 0x20 { throw fail("control character in string") }
                out.append(byte)
                index += 1
            }
        }
        throw fail("unterminated string")
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("unexpected end") }
        guard let value = bytes.withUnsafeBufferPointer({ Self.hex4($0, at: index) }) else { throw fail("invalid \\u escape") }
        index += 4
        return value
    }

    /// The four hex digits of a `\uXXXX` escape at `index`, nil when they are not all there
    /// (shared with the device decoder's string path).
    static func hex4(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for b in bytes[index..<(index + 4)] {
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: return nil
            }
            value = value << 4 | digit
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> Value {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw fail("unexpected end") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[index]) {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        } else {
            throw fail("invalid number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digitsStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digitsStart else { throw fail("invalid number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digitsStart else { throw fail("invalid number") }
        }
        if isInteger {
            // Up to 18 digits cannot overflow: the value straight from the digits.
            let negative = bytes[start] == UInt8(ascii: "-")
            let digitsStart = negative ? start + 1 : start
            if index - digitsStart <= 18 {
                var magnitude: Int64 = 0
                for i in digitsStart..<index { magnitude = magnitude * 10 + Int64(bytes[i] &- UInt8(ascii: "0")) }
                return .jsonInteger(negative ? -magnitude : magnitude)
            }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let value = Int64(text) { return .jsonInteger(value) }
        guard let value = Double(text) else { throw fail("invalid number") }
        return .jsonDouble(value)
    }
}

extension JSONTreeParser where Value == JSONValue {
    /// One value (the device decoder's general path).
    mutating func parseValue() throws(JSONParseError) -> JSONValue { try parseElement() ?? .null }
}

extension JSONValue: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue {
    /// Whether `bytes` is one complete JSON text whose top level is an object, checked
    /// without building any value (the gateway's hot path: it stores the body as received).
    /// Accepts exactly what `init(parsing:)` accepts.
    public static func isObject(_ bytes: some Collection<UInt8>) -> Bool {
        if let result = bytes.withContiguousStorageIfAvailable({ buffer in
            var scanner = JSONScanner(bytes: buffer)
            return scanner.scanObjectDocument()
        }) { return result }
        return Array(bytes).withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(bytes: buffer)
            return scanner.scanObjectDocument()
        }
    }
}

/// A validating JSON scanner over contiguous bytes (no allocation, depth-limited).
struct JSONScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func scanObjectDocument() -> Bool {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return false }
        guard scanValue() else { return false }
        skipWhitespace()
        return index == bytes.count
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func scanValue() -> Bool {
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            depth += 1
            guard depth <= JSONValue.maximumDepth else { return false }
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; depth -= 1; return true }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), scanString() else { return false }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace()
                guard scanValue() else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; depth -= 1; return true }
                return false
            }
        case UInt8(ascii: "["):
            depth += 1
            guard depth <= JSONValue.maximumDepth else { return false }
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; depth -= 1; return true }
            while true {
                skipWhitespace()
                guard scanValue() else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; depth -= 1; return true }
                return false
            }
        case UInt8(ascii: "\""): return scanString()
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return scanNumber()
        default: return false
        }
    }

    mutating func literal(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        let lit = UnsafeBufferPointer(start: text.utf8Start, count: count)
        for i in 0..<count where bytes[index + i] != lit[i] { return false }
        index += count
        return true
    }

    func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    mutating func scanNumber() -> Bool {
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { return false }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if isDigit(bytes[index]) {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        } else {
            return false
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            guard index > start else { return false }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let start = index
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            guard index > start else { return false }
        }
        return true
    }

    func hexValue(_ b: UInt8) -> UInt32? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(b - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(b - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(b - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    mutating func hex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let d = hexValue(bytes[index]) else { return nil }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    /// A string, with escapes and UTF-8 validated as `init(parsing:)` does.
    mutating func scanString() -> Bool {
        index += 1
        while index < bytes.count {
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                return true
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { return false }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    guard let scalar = hex4() else { return false }
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { return false }
                        index += 2
                        guard let low = hex4(), low >= 0xDC00 && low < 0xE000 else { return false }
                    } else if scalar >= 0xDC00 && scalar < 0xE000 {
                        return false
                    }
                default:
                    return false
                }
            case 0x00..<0x20:
                return false
            case 0x20..<0x80:
                index += 1
            default:
                // A UTF-8 sequence: lead byte, continuation bytes, no overlongs or surrogates.
                let length: Int
                var scalar: UInt32
                switch b {
                case 0xC2...0xDF: length = 2; scalar = UInt32(b & 0x1F)
                case 0xE0...0xEF: length = 3; scalar = UInt32(b & 0x0F)
                case 0xF0...0xF4: length = 4; scalar = UInt32(b & 0x07)
                default: return false
                }
                guard index + length <= bytes.count else { return false }
                for i in 1..<length {
                    let c = bytes[index + i]
                    guard c & 0xC0 == 0x80 else { return false }
                    scalar = scalar << 6 | UInt32(c & 0x3F)
                }
                if length == 3 && (scalar < 0x800 || (scalar >= 0xD800 && scalar < 0xE000)) { return false }
                if length == 4 && (scalar < 0x10000 || scalar > 0x10FFFF) { return false }
                index += length
            }
        }
        return false
    }
}
