import Foundation

/// A property-list value: what `userInfo` may hold, in a form that crosses process
/// boundaries and lands in storage unchanged.
public enum PropertyListValue: Sendable, Hashable {
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    case date(Date)
    case data(Data)
    case array([PropertyListValue])
    case dictionary([String: PropertyListValue])
}

extension PropertyListValue {
    /// Converts a Foundation property-list object (`String`, `NSNumber`, `Bool`, `Int`…,
    /// `Date`, `Data`, arrays and string-keyed dictionaries of them). Returns nil for
    /// anything else, like Apple's encoder refusing a non-plist object.
    public init?(any value: Any) {
        switch value {
        case let v as PropertyListValue: self = v
        case let v as String: self = .string(v)
        case let v as Bool where type(of: value) == Bool.self: self = .bool(v)
        case let v as Int: self = .integer(Int64(v))
        case let v as Int8: self = .integer(Int64(v))
        case let v as Int16: self = .integer(Int64(v))
        case let v as Int32: self = .integer(Int64(v))
        case let v as Int64: self = .integer(v)
        case let v as UInt: self = .integer(Int64(clamping: v))
        case let v as UInt8: self = .integer(Int64(v))
        case let v as UInt16: self = .integer(Int64(v))
        case let v as UInt32: self = .integer(Int64(v))
        case let v as UInt64: self = .integer(Int64(clamping: v))
        case let v as Double: self = .double(v)
        case let v as Float: self = .double(Double(v))
        case let v as NSNumber: self = PropertyListValue(number: v)
        case let v as Date: self = .date(v)
        case let v as Data: self = .data(v)
        case let v as URL: self = .string(v.absoluteString)
        case let v as [Any]:
            var items: [PropertyListValue] = []
            items.reserveCapacity(v.count)
            for item in v {
                guard let converted = PropertyListValue(any: item) else { return nil }
                items.append(converted)
            }
            self = .array(items)
        case let v as [AnyHashable: Any]:
            var dict: [String: PropertyListValue] = [:]
            for (key, item) in v {
                guard let key = key.base as? String, let converted = PropertyListValue(any: item) else { return nil }
                dict[key] = converted
            }
            self = .dictionary(dict)
        case let v as NSNull:
            _ = v
            return nil
        default:
            return nil
        }
    }

    private init(number: NSNumber) {
        // CFBoolean-backed numbers report objCType "c" on Darwin; on Linux Bool bridges as Bool.
        let type = String(cString: number.objCType)
        switch type {
        case "f", "d": self = .double(number.doubleValue)
        case "B":
            self = .bool(number.boolValue)
        case "c" where number.int8Value == 0 || number.int8Value == 1:
            // Darwin's BOOL is a char; a char-typed NSNumber of 0 or 1 is a Bool.
            self = .bool(number.boolValue)
        default: self = .integer(number.int64Value)
        }
    }

    /// The Foundation object for this value, as `userInfo` hands it to an app.
    public var anyValue: Any {
        switch self {
        case .string(let v): v
        case .integer(let v): Int(truncatingIfNeeded: v)
        case .double(let v): v
        case .bool(let v): v
        case .date(let v): v
        case .data(let v): v
        case .array(let v): v.map(\.anyValue)
        case .dictionary(let v): v.mapValues(\.anyValue) as [String: Any]
        }
    }

    /// Builds from parsed JSON (`JSONSerialization` output).
    public init?(json value: Any) {
        if value is NSNull { return nil }
        self.init(any: value)
    }
}

extension PropertyListValue: Codable {
    private enum Kind: String, Codable { case s, i, d, b, t, x, a, o }
    private enum CodingKeys: String, CodingKey { case k, v }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(Kind.self, forKey: .k) {
        case .s: self = .string(try container.decode(String.self, forKey: .v))
        case .i: self = .integer(try container.decode(Int64.self, forKey: .v))
        case .d: self = .double(try container.decode(Double.self, forKey: .v))
        case .b: self = .bool(try container.decode(Bool.self, forKey: .v))
        case .t: self = .date(Date(timeIntervalSinceReferenceDate: try container.decode(Double.self, forKey: .v)))
        case .x: self = .data(try container.decode(Data.self, forKey: .v))
        case .a: self = .array(try container.decode([PropertyListValue].self, forKey: .v))
        case .o: self = .dictionary(try container.decode([String: PropertyListValue].self, forKey: .v))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .string(let v): try container.encode(Kind.s, forKey: .k); try container.encode(v, forKey: .v)
        case .integer(let v): try container.encode(Kind.i, forKey: .k); try container.encode(v, forKey: .v)
        case .double(let v): try container.encode(Kind.d, forKey: .k); try container.encode(v, forKey: .v)
        case .bool(let v): try container.encode(Kind.b, forKey: .k); try container.encode(v, forKey: .v)
        case .date(let v): try container.encode(Kind.t, forKey: .k); try container.encode(v.timeIntervalSinceReferenceDate, forKey: .v)
        case .data(let v): try container.encode(Kind.x, forKey: .k); try container.encode(v, forKey: .v)
        case .array(let v): try container.encode(Kind.a, forKey: .k); try container.encode(v, forKey: .v)
        case .dictionary(let v): try container.encode(Kind.o, forKey: .k); try container.encode(v, forKey: .v)
        }
    }
}
