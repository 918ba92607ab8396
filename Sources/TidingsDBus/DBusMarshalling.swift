/// What a message from the bus may hold (docs/security.md, "D-Bus client"). The specification
/// caps a message at 128 MiB and an array at 64 MiB; the client's own defaults are far
/// smaller, since nothing a notification server sends comes close.
public struct DBusLimits: Sendable, Hashable {
    /// The specification's caps, which no configuration may raise.
    public static let specificationMaximumMessageLength = 134_217_728
    public static let specificationMaximumArrayLength = 67_108_864
    public static let specificationMaximumDepth = 64

    /// A whole message: fixed header, header fields, padding and body.
    public var maximumMessageLength: Int
    /// One array's bytes.
    public var maximumArrayLength: Int
    /// Containers (arrays, structures, dictionary entries, variants) inside one another.
    public var maximumDepth: Int

    public init(maximumMessageLength: Int = 1 << 20, maximumArrayLength: Int = 1 << 20, maximumDepth: Int = 64) {
        self.maximumMessageLength = min(max(maximumMessageLength, 16), Self.specificationMaximumMessageLength)
        self.maximumArrayLength = min(max(maximumArrayLength, 0), Self.specificationMaximumArrayLength)
        self.maximumDepth = min(max(maximumDepth, 1), Self.specificationMaximumDepth)
    }

    /// The specification's own caps.
    public static let specification = DBusLimits(maximumMessageLength: specificationMaximumMessageLength,
                                                 maximumArrayLength: specificationMaximumArrayLength,
                                                 maximumDepth: specificationMaximumDepth)
}

/// Writes values in the wire format, little-endian, with each value aligned relative to
/// `origin` (the body starts on an 8-byte boundary of the message, so 0 there).
public struct DBusEncoder {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func pad(to alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    private mutating func integer<T: FixedWidthInteger>(_ value: T) {
        pad(to: MemoryLayout<T>.size)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func encode(_ values: [DBusValue]) {
        for value in values { encode(value) }
    }

    public mutating func encode(_ value: DBusValue) {
        switch value {
        case .byte(let v): bytes.append(v)
        case .boolean(let v): integer(UInt32(v ? 1 : 0))
        case .int16(let v): integer(v)
        case .uint16(let v): integer(v)
        case .int32(let v): integer(v)
        case .uint32(let v): integer(v)
        case .int64(let v): integer(v)
        case .uint64(let v): integer(v)
        case .double(let v): integer(v.bitPattern)
        case .string(let s), .objectPath(let s):
            let utf8 = Array(s.utf8)
            integer(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
            bytes.append(0)
        case .signature(let s):
            let utf8 = Array(s.utf8)
            bytes.append(UInt8(truncatingIfNeeded: utf8.count))
            bytes.append(contentsOf: utf8)
            bytes.append(0)
        case .array(let element, let values):
            integer(UInt32(0))
            let lengthAt = bytes.count - 4
            pad(to: element.alignment)
            let start = bytes.count
            for v in values { encode(v) }
            let length = UInt32(bytes.count - start).littleEndian
            withUnsafeBytes(of: length) { raw in
                for i in 0 ..< 4 { bytes[lengthAt + i] = raw[i] }
            }
        case .dictEntry(let key, let value):
            pad(to: 8)
            encode(key)
            encode(value)
        case .structure(let fields):
            pad(to: 8)
            for f in fields { encode(f) }
        case .variant(let inner):
            encode(.signature(inner.type.signature))
            encode(inner)
        }
    }
}

/// Reads values in the wire format of either byte order, under `DBusLimits`: every length is
/// checked against what is left before anything is allocated, padding must be zero, strings
/// valid UTF-8 without a NUL inside, booleans 0 or 1, signatures and object paths well formed.
public struct DBusDecoder {
    private let bytes: UnsafeRawBufferPointer
    public private(set) var position: Int
    private let bigEndian: Bool
    private let limits: DBusLimits

    /// `position` counts from the message's start, which alignment is relative to.
    public init(_ bytes: UnsafeRawBufferPointer, position: Int = 0, bigEndian: Bool, limits: DBusLimits) {
        self.bytes = bytes
        self.position = position
        self.bigEndian = bigEndian
        self.limits = limits
    }

    public var isAtEnd: Bool { position == bytes.count }

    mutating func align(_ alignment: Int) throws(DBusFormatError) {
        let padded = (position + alignment - 1) / alignment * alignment
        guard padded <= bytes.count else { throw DBusFormatError("the message ends inside padding") }
        for i in position ..< padded where bytes[i] != 0 {
            throw DBusFormatError("padding that is not zero at byte \(i)")
        }
        position = padded
    }

    private mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(DBusFormatError) -> T {
        try align(MemoryLayout<T>.size)
        let size = MemoryLayout<T>.size
        guard bytes.count - position >= size else { throw DBusFormatError("the message ends inside a number") }
        var value: T = 0
        for i in 0 ..< size {
            value |= T(truncatingIfNeeded: bytes[position + i]) << (8 * (bigEndian ? size - 1 - i : i))
        }
        position += size
        return value
    }

    public mutating func decodeUInt32() throws(DBusFormatError) -> UInt32 { try integer(UInt32.self) }

    private mutating func text(length: Int) throws(DBusFormatError) -> String {
        guard length >= 0, bytes.count - position > length else { throw DBusFormatError("a string runs past the message's end") }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[position ..< position + length])
        guard bytes[position + length] == 0 else { throw DBusFormatError("a string without its terminating NUL") }
        guard !slice.contains(0) else { throw DBusFormatError("a string with a NUL inside") }
        guard let string = String(validating: slice, as: UTF8.self) else { throw DBusFormatError("a string that is not valid UTF-8") }
        position += length + 1
        return string
    }

    public mutating func decode(_ types: [DBusType]) throws(DBusFormatError) -> [DBusValue] {
        var values: [DBusValue] = []
        values.reserveCapacity(types.count)
        for type in types { values.append(try decode(type, depth: 0)) }
        return values
    }

    public mutating func decode(_ type: DBusType, depth: Int) throws(DBusFormatError) -> DBusValue {
        switch type {
        case .byte:
            guard position < bytes.count else { throw DBusFormatError("the message ends inside a byte") }
            position += 1
            return .byte(bytes[position - 1])
        case .boolean:
            switch try integer(UInt32.self) {
            case 0: return .boolean(false)
            case 1: return .boolean(true)
            case let other: throw DBusFormatError("a boolean of \(other), not 0 or 1")
            }
        case .int16: return .int16(try integer(Int16.self))
        case .uint16: return .uint16(try integer(UInt16.self))
        case .int32: return .int32(try integer(Int32.self))
        case .uint32: return .uint32(try integer(UInt32.self))
        case .int64: return .int64(try integer(Int64.self))
        case .uint64: return .uint64(try integer(UInt64.self))
        case .double: return .double(Double(bitPattern: try integer(UInt64.self)))
        case .string:
            let length = try integer(UInt32.self)
            guard length <= UInt32(bytes.count) else { throw DBusFormatError("a string of \(length) bytes runs past the message's end") }
            return .string(try text(length: Int(length)))
        case .objectPath:
            let length = try integer(UInt32.self)
            guard length <= UInt32(bytes.count) else { throw DBusFormatError("an object path runs past the message's end") }
            let path = try text(length: Int(length))
            guard DBusNames.isValidObjectPath(path) else { throw DBusFormatError("an invalid object path") }
            return .objectPath(path)
        case .signature:
            return .signature(try signatureText())
        case .array(let element):
            let length = Int(try integer(UInt32.self))
            guard length <= limits.maximumArrayLength else {
                throw DBusFormatError("an array of \(length) bytes, over the limit of \(limits.maximumArrayLength)")
            }
            guard depth < limits.maximumDepth else { throw DBusFormatError("containers nested over \(limits.maximumDepth) deep") }
            try align(element.alignment)
            guard bytes.count - position >= length else { throw DBusFormatError("an array runs past the message's end") }
            let end = position + length
            var values: [DBusValue] = []
            while position < end {
                values.append(try decode(element, depth: depth + 1))
            }
            guard position == end else { throw DBusFormatError("an array's last element runs past its length") }
            return .array(element, values)
        case .dictEntry(let keyType, let valueType):
            guard depth < limits.maximumDepth else { throw DBusFormatError("containers nested over \(limits.maximumDepth) deep") }
            try align(8)
            let key = try decode(keyType, depth: depth + 1)
            let value = try decode(valueType, depth: depth + 1)
            return .dictEntry(key, value)
        case .structure(let fields):
            guard depth < limits.maximumDepth else { throw DBusFormatError("containers nested over \(limits.maximumDepth) deep") }
            try align(8)
            var values: [DBusValue] = []
            for field in fields { values.append(try decode(field, depth: depth + 1)) }
            return .structure(values)
        case .variant:
            guard depth < limits.maximumDepth else { throw DBusFormatError("containers nested over \(limits.maximumDepth) deep") }
            let signature = try signatureText()
            let inner = try DBusSignature.parseSingle(signature)
            return .variant(try decode(inner, depth: depth + 1))
        }
    }

    private mutating func signatureText() throws(DBusFormatError) -> String {
        guard position < bytes.count else { throw DBusFormatError("the message ends inside a signature") }
        let length = Int(bytes[position])
        position += 1
        let text = try text(length: length)
        _ = try DBusSignature.parse(text)
        return text
    }
}

/// Names on the bus (D-Bus specification, "Valid Names").
public enum DBusNames {
    public static func isValidObjectPath(_ path: String) -> Bool {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        var previousSlash = false
        for b in bytes.dropFirst() {
            if b == UInt8(ascii: "/") {
                if previousSlash { return false }
                previousSlash = true
            } else {
                guard isNameByte(b) else { return false }
                previousSlash = false
            }
        }
        return true
    }

    static func isNameByte(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
            || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "_")
    }

    /// An interface or error name: two or more dot-separated elements of `[A-Za-z_][A-Za-z0-9_]*`, at most 255 bytes.
    public static func isValidInterface(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        let elements = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.first, !(first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) else { return false }
            return element.allSatisfy(isNameByte)
        }
    }

    /// A member (method or signal) name: one element, at most 255 bytes.
    public static func isValidMember(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 255, !(first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) else { return false }
        return bytes.allSatisfy(isNameByte)
    }

    /// A bus name: unique (`:1.42`) or well-known (`org.freedesktop.Notifications`), at most 255 bytes.
    public static func isValidBusName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        let unique = bytes.first == UInt8(ascii: ":")
        let elements = (unique ? bytes.dropFirst() : bytes[...]).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        return elements.allSatisfy { element in
            guard let first = element.first else { return false }
            if !unique, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") { return false }
            return element.allSatisfy { isNameByte($0) || $0 == UInt8(ascii: "-") }
        }
    }
}
