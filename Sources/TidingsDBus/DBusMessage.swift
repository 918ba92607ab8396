/// A D-Bus message (D-Bus specification, "Message Format"): a method call, its return or
/// error, or a signal; header fields and a body of values.
public struct DBusMessage: Sendable, Hashable {
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let methodCall = Kind(rawValue: 1)
        public static let methodReturn = Kind(rawValue: 2)
        public static let error = Kind(rawValue: 3)
        public static let signal = Kind(rawValue: 4)
        public var description: String {
            switch self {
            case .methodCall: "method call"
            case .methodReturn: "method return"
            case .error: "error"
            case .signal: "signal"
            default: "message type \(rawValue)"
            }
        }
    }

    public struct Flags: OptionSet, Sendable, Hashable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let noReplyExpected = Flags(rawValue: 1)
        public static let noAutoStart = Flags(rawValue: 2)
        public static let allowInteractiveAuthorization = Flags(rawValue: 4)
    }

    public var kind: Kind
    public var flags: Flags = []
    public var serial: UInt32 = 0
    public var path: String?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var replySerial: UInt32?
    public var destination: String?
    public var sender: String?
    public var body: [DBusValue] = []

    public init(kind: Kind, flags: Flags = [], serial: UInt32 = 0, path: String? = nil, interface: String? = nil, member: String? = nil,
                errorName: String? = nil, replySerial: UInt32? = nil, destination: String? = nil, sender: String? = nil, body: [DBusValue] = []) {
        self.kind = kind
        self.flags = flags
        self.serial = serial
        self.path = path
        self.interface = interface
        self.member = member
        self.errorName = errorName
        self.replySerial = replySerial
        self.destination = destination
        self.sender = sender
        self.body = body
    }

    public static func methodCall(destination: String?, path: String, interface: String?, member: String, body: [DBusValue] = [], flags: Flags = []) -> DBusMessage {
        DBusMessage(kind: .methodCall, flags: flags, path: path, interface: interface, member: member, destination: destination, body: body)
    }

    public static func signal(path: String, interface: String, member: String, destination: String? = nil, body: [DBusValue] = []) -> DBusMessage {
        DBusMessage(kind: .signal, flags: .noReplyExpected, path: path, interface: interface, member: member, destination: destination, body: body)
    }

    public var signature: String { DBusSignature.of(body) }

    /// The error's message text (an error's first argument, when it is a string).
    public var errorText: String? { kind == .error ? body.first?.stringValue : nil }

    enum Field: UInt8 {
        case path = 1, interface, member, errorName, replySerial, destination, sender, signature, unixFDs
    }

    /// The message in the wire format, little-endian. Its serial must be set.
    public func encoded() -> [UInt8] {
        var body = DBusEncoder()
        body.encode(self.body)
        var fields: [DBusValue] = []
        func field(_ code: Field, _ value: DBusValue?) {
            if let value { fields.append(.structure([.byte(code.rawValue), .variant(value)])) }
        }
        field(.path, path.map { .objectPath($0) })
        field(.interface, interface.map { .string($0) })
        field(.member, member.map { .string($0) })
        field(.errorName, errorName.map { .string($0) })
        field(.replySerial, replySerial.map { .uint32($0) })
        field(.destination, destination.map { .string($0) })
        field(.sender, sender.map { .string($0) })
        if !self.body.isEmpty { field(.signature, .signature(signature)) }
        var header = DBusEncoder()
        header.encode([.byte(UInt8(ascii: "l")), .byte(kind.rawValue), .byte(flags.rawValue), .byte(1),
                       .uint32(UInt32(body.bytes.count)), .uint32(serial),
                       .array(.structure([.byte, .variant]), fields)])
        header.pad(to: 8)
        return header.bytes + body.bytes
    }

    /// The fixed part before the header fields: endianness, type, flags, version, body
    /// length, serial, and the header fields' array length.
    public static let fixedHeaderLength = 16

    /// What the fixed header says: the byte order, the body's length, and the whole message's.
    struct FixedHeader {
        var bigEndian: Bool
        var bodyLength: Int
        /// The whole message: the header (fields padded to 8) and the body.
        var length: Int

        /// Read from the first 16 bytes of `bytes` (nil before they are there); throws when they
        /// are malformed or announce more than `limits` allow.
        init?(_ bytes: UnsafeRawBufferPointer, limits: DBusLimits) throws(DBusFormatError) {
            guard bytes.count >= fixedHeaderLength else { return nil }
            switch bytes[0] {
            case UInt8(ascii: "l"): bigEndian = false
            case UInt8(ascii: "B"): bigEndian = true
            default: throw DBusFormatError("an unknown byte order mark 0x\(String(bytes[0], radix: 16))")
            }
            guard bytes[3] == 1 else { throw DBusFormatError("protocol version \(bytes[3]), not 1") }
            var decoder = DBusDecoder(UnsafeRawBufferPointer(rebasing: bytes[0 ..< fixedHeaderLength]), position: 4, bigEndian: bigEndian, limits: limits)
            bodyLength = Int(try decoder.decodeUInt32())
            _ = try decoder.decodeUInt32()
            let fieldsLength = Int(try decoder.decodeUInt32())
            let headerLength = (fixedHeaderLength + fieldsLength + 7) / 8 * 8
            // Each part is a UInt32, so the sum cannot overflow Int.
            length = headerLength + bodyLength
            guard length <= limits.maximumMessageLength else {
                throw DBusFormatError("a message of \(length) bytes, over the limit of \(limits.maximumMessageLength)")
            }
        }
    }

    /// How many bytes the message that starts `bytes` takes, once its first 16 bytes are
    /// there (nil before); throws when they are malformed or announce more than `limits` allow.
    public static func length(of bytes: UnsafeRawBufferPointer, limits: DBusLimits) throws(DBusFormatError) -> Int? {
        try FixedHeader(bytes, limits: limits)?.length
    }

    /// Parses one whole message (exactly `length(of:)` bytes).
    public init(decoding bytes: UnsafeRawBufferPointer, limits: DBusLimits) throws(DBusFormatError) {
        guard let header = try FixedHeader(bytes, limits: limits) else { throw DBusFormatError("a message shorter than its fixed header") }
        try self.init(decoding: bytes, header: header, limits: limits)
    }

    /// Parses one whole message whose fixed header is read already (the connection reads it
    /// to know when the message is all there): its lengths are not worked out again.
    init(decoding bytes: UnsafeRawBufferPointer, header: FixedHeader, limits: DBusLimits) throws(DBusFormatError) {
        guard header.length == bytes.count else { throw DBusFormatError("a message of \(bytes.count) bytes whose header says \(header.length)") }
        guard let kind = Optional(Kind(rawValue: bytes[1])), (1 ... 4).contains(kind.rawValue) else {
            throw DBusFormatError("an unknown message type \(bytes[1])")
        }
        // The serial, after the body length the fixed header has read.
        var decoder = DBusDecoder(bytes, position: 8, bigEndian: header.bigEndian, limits: limits)
        let serial = try decoder.decodeUInt32()
        guard serial != 0 else { throw DBusFormatError("a message with serial 0") }
        self.init(kind: kind, flags: Flags(rawValue: bytes[2]), serial: serial)
        let fields = try decoder.decode(.array(.structure([.byte, .variant])), depth: 0)
        var signature = ""
        for field in fields.arrayValue ?? [] {
            guard case .structure(let parts) = field, parts.count == 2, case .byte(let code) = parts[0], case .variant(let value) = parts[1] else { continue }
            func string() throws(DBusFormatError) -> String {
                guard case .string(let s) = value else { throw DBusFormatError("header field \(code) of type \(value.type.signature), not s") }
                return s
            }
            switch Field(rawValue: code) {
            case .path?:
                guard case .objectPath(let p) = value else { throw DBusFormatError("a PATH header field that is not an object path") }
                path = p
            case .interface?:
                let name = try string()
                guard DBusNames.isValidInterface(name) else { throw DBusFormatError("an invalid interface name") }
                interface = name
            case .member?:
                let name = try string()
                guard DBusNames.isValidMember(name) else { throw DBusFormatError("an invalid member name") }
                member = name
            case .errorName?:
                let name = try string()
                guard DBusNames.isValidInterface(name) else { throw DBusFormatError("an invalid error name") }
                errorName = name
            case .replySerial?:
                guard case .uint32(let s) = value, s != 0 else { throw DBusFormatError("a REPLY_SERIAL header field that is not a non-zero u") }
                replySerial = s
            case .destination?:
                let name = try string()
                guard DBusNames.isValidBusName(name) else { throw DBusFormatError("an invalid destination") }
                destination = name
            case .sender?:
                let name = try string()
                guard DBusNames.isValidBusName(name) else { throw DBusFormatError("an invalid sender") }
                sender = name
            case .signature?:
                guard case .signature(let s) = value else { throw DBusFormatError("a SIGNATURE header field that is not a signature") }
                signature = s
            case .unixFDs?:
                guard case .uint32(let n) = value, n == 0 else { throw DBusFormatError("a message carrying Unix file descriptors") }
            case nil:
                break // unknown fields are ignored, as the specification says
            }
        }
        switch kind {
        case .methodCall:
            guard path != nil, member != nil else { throw DBusFormatError("a method call without PATH or MEMBER") }
        case .signal:
            guard path != nil, interface != nil, member != nil else { throw DBusFormatError("a signal without PATH, INTERFACE or MEMBER") }
        case .error:
            guard errorName != nil, replySerial != nil else { throw DBusFormatError("an error without ERROR_NAME or REPLY_SERIAL") }
        default:
            guard replySerial != nil else { throw DBusFormatError("a method return without REPLY_SERIAL") }
        }
        try decoder.align(8)
        guard bytes.count - decoder.position == header.bodyLength else { throw DBusFormatError("a body whose length does not match the header") }
        body = try decoder.decode(try DBusSignature.parse(signature))
        guard decoder.isAtEnd else { throw DBusFormatError("bytes left after the body its signature describes") }
    }
}
