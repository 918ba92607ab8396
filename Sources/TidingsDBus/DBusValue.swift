/// A D-Bus type: one complete type of a signature (D-Bus specification, "Type System").
/// Unix file descriptors (`h`) are not among them: this client never negotiates descriptor
/// passing, so a message that declares one is refused.
public indirect enum DBusType: Sendable, Hashable {
    case byte, boolean, int16, uint16, int32, uint32, int64, uint64, double
    case string, objectPath, signature
    case array(DBusType)
    /// Only as the element of an array: `a{kv}`.
    case dictEntry(key: DBusType, value: DBusType)
    case structure([DBusType])
    case variant

    /// The type's signature (`a{sv}`, `(ii)`, …).
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .array(let element): "a" + element.signature
        case .dictEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }

    /// The boundary a value of this type starts on, in bytes from the message's start.
    public var alignment: Int {
        switch self {
        case .byte, .signature, .variant: 1
        case .int16, .uint16: 2
        case .boolean, .int32, .uint32, .string, .objectPath, .array: 4
        case .int64, .uint64, .double, .dictEntry, .structure: 8
        }
    }

    /// Whether it may be a dictionary key (a basic type).
    public var isBasic: Bool {
        switch self {
        case .array, .dictEntry, .structure, .variant: false
        default: true
        }
    }
}

/// A D-Bus value. A dictionary is an array of `dictEntry` values (`a{sv}`); `DBusValue.dictionary`
/// builds one.
public indirect enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// The element type is kept, so an empty array still has its signature.
    case array(DBusType, [DBusValue])
    case dictEntry(DBusValue, DBusValue)
    case structure([DBusValue])
    case variant(DBusValue)

    public var type: DBusType {
        switch self {
        case .byte: .byte
        case .boolean: .boolean
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .string: .string
        case .objectPath: .objectPath
        case .signature: .signature
        case .array(let element, _): .array(element)
        case .dictEntry(let key, let value): .dictEntry(key: key.type, value: value.type)
        case .structure(let fields): .structure(fields.map(\.type))
        case .variant: .variant
        }
    }

    /// `a{kv}` from pairs, in their order.
    public static func dictionary(key: DBusType, value: DBusType, _ entries: [(DBusValue, DBusValue)]) -> DBusValue {
        .array(.dictEntry(key: key, value: value), entries.map { .dictEntry($0.0, $0.1) })
    }

    /// `as` from strings.
    public static func strings(_ values: [String]) -> DBusValue {
        .array(.string, values.map { .string($0) })
    }

    public var stringValue: String? {
        switch self {
        case .string(let s), .objectPath(let s), .signature(let s): s
        case .variant(let inner): inner.stringValue
        default: nil
        }
    }

    public var uint32Value: UInt32? {
        switch self {
        case .uint32(let v): v
        case .variant(let inner): inner.uint32Value
        default: nil
        }
    }

    /// The elements of an array, nil for anything else.
    public var arrayValue: [DBusValue]? {
        if case .array(_, let values) = self { values } else { nil }
    }
}

/// Why a signature, a value or a message is refused.
public struct DBusFormatError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Signatures: parsed into types under the specification's rules (at most 255 bytes, arrays
/// and structures each nested at most 32 deep, dictionary entries only in arrays with a
/// basic key), and checked against the values they describe.
public enum DBusSignature {
    public static let maximumLength = 255
    public static let maximumArrayDepth = 32
    public static let maximumStructDepth = 32

    /// The complete types of a signature, in order.
    public static func parse(_ signature: String) throws(DBusFormatError) -> [DBusType] {
        let bytes = Array(signature.utf8)
        guard bytes.count <= maximumLength else { throw DBusFormatError("a signature of \(bytes.count) bytes, over \(maximumLength)") }
        var position = 0
        var types: [DBusType] = []
        while position < bytes.count {
            types.append(try parseOne(bytes, &position, arrays: 0, structs: 0))
        }
        return types
    }

    /// A signature that holds exactly one complete type (a variant's).
    public static func parseSingle(_ signature: String) throws(DBusFormatError) -> DBusType {
        let types = try parse(signature)
        guard types.count == 1 else { throw DBusFormatError("a variant's signature \"\(signature)\" is not one complete type") }
        return types[0]
    }

    private static func parseOne(_ bytes: [UInt8], _ position: inout Int, arrays: Int, structs: Int) throws(DBusFormatError) -> DBusType {
        guard position < bytes.count else { throw DBusFormatError("a signature ends inside a type") }
        let code = bytes[position]
        position += 1
        switch code {
        case UInt8(ascii: "y"): return .byte
        case UInt8(ascii: "b"): return .boolean
        case UInt8(ascii: "n"): return .int16
        case UInt8(ascii: "q"): return .uint16
        case UInt8(ascii: "i"): return .int32
        case UInt8(ascii: "u"): return .uint32
        case UInt8(ascii: "x"): return .int64
        case UInt8(ascii: "t"): return .uint64
        case UInt8(ascii: "d"): return .double
        case UInt8(ascii: "s"): return .string
        case UInt8(ascii: "o"): return .objectPath
        case UInt8(ascii: "g"): return .signature
        case UInt8(ascii: "v"): return .variant
        case UInt8(ascii: "a"):
            guard arrays < maximumArrayDepth else { throw DBusFormatError("arrays nested over \(maximumArrayDepth) deep") }
            if position < bytes.count, bytes[position] == UInt8(ascii: "{") {
                position += 1
                let key = try parseOne(bytes, &position, arrays: arrays + 1, structs: structs)
                guard key.isBasic else { throw DBusFormatError("a dictionary key of type \(key.signature), not a basic type") }
                let value = try parseOne(bytes, &position, arrays: arrays + 1, structs: structs)
                guard position < bytes.count, bytes[position] == UInt8(ascii: "}") else {
                    throw DBusFormatError("a dictionary entry without its closing brace")
                }
                position += 1
                return .array(.dictEntry(key: key, value: value))
            }
            return .array(try parseOne(bytes, &position, arrays: arrays + 1, structs: structs))
        case UInt8(ascii: "("):
            guard structs < maximumStructDepth else { throw DBusFormatError("structures nested over \(maximumStructDepth) deep") }
            var fields: [DBusType] = []
            while true {
                guard position < bytes.count else { throw DBusFormatError("a structure without its closing parenthesis") }
                if bytes[position] == UInt8(ascii: ")") {
                    position += 1
                    break
                }
                fields.append(try parseOne(bytes, &position, arrays: arrays, structs: structs + 1))
            }
            guard !fields.isEmpty else { throw DBusFormatError("an empty structure") }
            return .structure(fields)
        case UInt8(ascii: "h"):
            throw DBusFormatError("a Unix file descriptor (h): descriptor passing is not negotiated")
        default:
            throw DBusFormatError("an unknown type code 0x\(String(code, radix: 16)) in a signature")
        }
    }

    /// The signature of a sequence of values (a message body).
    public static func of(_ values: [DBusValue]) -> String {
        values.map(\.type.signature).joined()
    }
}
