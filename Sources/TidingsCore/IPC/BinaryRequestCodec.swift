import Foundation

/// A compact binary encoding of `NotificationRequestValue`: the hot path of the app socket
/// (`add`) and the form the daemon stores pending and delivered requests in. The daemon
/// stores an `add`'s bytes as they arrived, so decoding is strict: one byte sequence means
/// one value, and anything JSON could not carry (invalid UTF-8, a non-finite number, an
/// unknown tag, trailing bytes) is refused. Layout in docs/app-ipc.md, "Binary frames".
///
/// Calendar and location triggers, which apps add at human rates, are carried as the JSON
/// of their `TriggerValue` inside the binary form.
public enum BinaryRequestCodec {
    /// The first byte of an encoded request. JSON documents start with `{`, so a stored
    /// column can hold either form.
    public static let marker: UInt8 = 0xA1

    public struct DecodingError: Error, Sendable, Hashable, CustomStringConvertible {
        public var reason: String
        public init(reason: String) { self.reason = reason }
        public var description: String { "malformed binary request: \(reason)" }
    }

    public struct EncodingError: Error, Sendable, Hashable, CustomStringConvertible {
        public var reason: String
        public init(reason: String) { self.reason = reason }
        public var description: String { "cannot encode the request: \(reason)" }
    }

    /// Whether `bytes` hold the binary form (else JSON).
    public static func isBinary(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.first == marker
    }

    public static func encode(_ request: NotificationRequestValue) throws(EncodingError) -> [UInt8] {
        var writer = BinaryWriter()
        // A remote push's request (its payload as userInfo) is mostly over 128 bytes.
        writer.bytes.reserveCapacity(256)
        try encode(request, into: &writer)
        return writer.bytes
    }

    public static func encode(_ request: NotificationRequestValue, into writer: inout BinaryWriter) throws(EncodingError) {
        writer.byte(marker)
        writer.string(request.identifier)
        try writeTrigger(request.trigger, &writer)
        try writeContent(request.content, &writer)
    }

    /// Whether the request in `bytes` may hold attachments: false only for the binary form
    /// whose content's field mask has none — read that far, nothing of the content built
    /// (a delivered list trimmed by hundreds decodes only the requests that name files).
    /// JSON, or bytes that do not read: true (decode them to know).
    public static func mayHaveAttachments(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var reader = BinaryReader(bytes)
        do throws(DecodingError) {
            guard try reader.byte() == marker else { return true }
            _ = try reader.raw(Int(try reader.length()))  // the identifier
            _ = try readTrigger(&reader)
            return try reader.varint() & UInt64(Field.attachments) != 0
        } catch {
            return true
        }
    }

    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(DecodingError) -> NotificationRequestValue {
        var reader = BinaryReader(bytes)
        let value = try decode(from: &reader)
        guard reader.isAtEnd else { throw DecodingError(reason: "trailing bytes") }
        return value
    }

    public static func decode(_ data: Data) throws(DecodingError) -> NotificationRequestValue {
        do {
            return try data.withUnsafeBytes { try decode($0) }
        } catch let error as DecodingError {
            throw error
        } catch {
            throw DecodingError(reason: "\(error)")
        }
    }

    public static func decode(from reader: inout BinaryReader) throws(DecodingError) -> NotificationRequestValue {
        guard try reader.byte() == marker else { throw DecodingError(reason: "not a binary request") }
        let identifier = try reader.string()
        let trigger = try readTrigger(&reader)
        let content = try readContent(&reader)
        return NotificationRequestValue(identifier: identifier, content: content, trigger: trigger)
    }

    // MARK: Trigger

    private static func writeTrigger(_ trigger: TriggerValue?, _ w: inout BinaryWriter) throws(EncodingError) {
        switch trigger {
        case nil:
            w.byte(0)
        case .timeInterval(let seconds, let repeats)?:
            w.byte(1)
            try w.double(seconds)
            w.byte(repeats ? 1 : 0)
        case .push?:
            w.byte(2)
        case let other?:
            w.byte(3)
            let json: Data
            do {
                json = try JSONEncoder().encode(other)
            } catch {
                throw EncodingError(reason: "\(error)")
            }
            w.varint(UInt64(json.count))
            w.bytes.append(contentsOf: json)
        }
    }

    private static func readTrigger(_ r: inout BinaryReader) throws(DecodingError) -> TriggerValue? {
        switch try r.byte() {
        case 0: return nil
        case 1:
            let seconds = try r.double()
            return .timeInterval(seconds: seconds, repeats: try r.bool())
        case 2: return .push
        case 3:
            let json = try r.raw(Int(try r.length()))
            let trigger: TriggerValue
            do {
                trigger = try JSONDecoder().decode(TriggerValue.self, from: Data(json))
            } catch {
                throw DecodingError(reason: "trigger: \(error)")
            }
            // Only the triggers without a binary form travel as JSON: one form per value.
            switch trigger {
            case .calendar, .location: return trigger
            case .timeInterval, .push: throw DecodingError(reason: "trigger in the wrong form")
            }
        case let tag: throw DecodingError(reason: "unknown trigger tag \(tag)")
        }
    }

    // MARK: Content

    private enum Field {
        static let title: UInt32 = 1 << 0
        static let subtitle: UInt32 = 1 << 1
        static let body: UInt32 = 1 << 2
        static let badge: UInt32 = 1 << 3
        static let sound: UInt32 = 1 << 4
        static let launchImageName: UInt32 = 1 << 5
        static let userInfo: UInt32 = 1 << 6
        static let attachments: UInt32 = 1 << 7
        static let categoryIdentifier: UInt32 = 1 << 8
        static let threadIdentifier: UInt32 = 1 << 9
        static let targetContentIdentifier: UInt32 = 1 << 10
        static let summaryArgument: UInt32 = 1 << 11
        static let summaryArgumentCount: UInt32 = 1 << 12
        static let interruptionLevel: UInt32 = 1 << 13
        static let relevanceScore: UInt32 = 1 << 14
        static let filterCriteria: UInt32 = 1 << 15
        static let all: UInt32 = (1 << 16) - 1
    }

    private static func writeContent(_ c: NotificationContentValue, _ w: inout BinaryWriter) throws(EncodingError) {
        // Only what differs from the defaults is written, as in the JSON form.
        var mask: UInt32 = 0
        if !c.title.isEmpty { mask |= Field.title }
        if !c.subtitle.isEmpty { mask |= Field.subtitle }
        if !c.body.isEmpty { mask |= Field.body }
        if c.badge != nil { mask |= Field.badge }
        if c.sound != nil { mask |= Field.sound }
        if !c.launchImageName.isEmpty { mask |= Field.launchImageName }
        if !c.userInfo.isEmpty { mask |= Field.userInfo }
        if !c.attachments.isEmpty { mask |= Field.attachments }
        if !c.categoryIdentifier.isEmpty { mask |= Field.categoryIdentifier }
        if !c.threadIdentifier.isEmpty { mask |= Field.threadIdentifier }
        if c.targetContentIdentifier != nil { mask |= Field.targetContentIdentifier }
        if !c.summaryArgument.isEmpty { mask |= Field.summaryArgument }
        if c.summaryArgumentCount != 0 { mask |= Field.summaryArgumentCount }
        if c.interruptionLevel != .active { mask |= Field.interruptionLevel }
        if c.relevanceScore != 0 { mask |= Field.relevanceScore }
        if c.filterCriteria != nil { mask |= Field.filterCriteria }
        w.varint(UInt64(mask))
        if mask & Field.title != 0 { w.string(c.title) }
        if mask & Field.subtitle != 0 { w.string(c.subtitle) }
        if mask & Field.body != 0 { w.string(c.body) }
        if let badge = c.badge { w.signed(Int64(badge)) }
        if let sound = c.sound { try writeSound(sound, &w) }
        if mask & Field.launchImageName != 0 { w.string(c.launchImageName) }
        if mask & Field.userInfo != 0 { try writeDictionary(c.userInfo, &w) }
        if mask & Field.attachments != 0 {
            w.varint(UInt64(c.attachments.count))
            for attachment in c.attachments { try writeAttachment(attachment, &w) }
        }
        if mask & Field.categoryIdentifier != 0 { w.string(c.categoryIdentifier) }
        if mask & Field.threadIdentifier != 0 { w.string(c.threadIdentifier) }
        if let target = c.targetContentIdentifier { w.string(target) }
        if mask & Field.summaryArgument != 0 { w.string(c.summaryArgument) }
        if mask & Field.summaryArgumentCount != 0 { w.signed(Int64(c.summaryArgumentCount)) }
        if mask & Field.interruptionLevel != 0 { w.varint(UInt64(c.interruptionLevel.rawValue)) }
        if mask & Field.relevanceScore != 0 { try w.double(c.relevanceScore) }
        if let filter = c.filterCriteria { w.string(filter) }
    }

    private static func readContent(_ r: inout BinaryReader) throws(DecodingError) -> NotificationContentValue {
        let raw = try r.varint()
        guard raw & ~UInt64(Field.all) == 0 else { throw DecodingError(reason: "unknown content fields") }
        let mask = UInt32(raw)
        var c = NotificationContentValue()
        if mask & Field.title != 0 { c.title = try r.string() }
        if mask & Field.subtitle != 0 { c.subtitle = try r.string() }
        if mask & Field.body != 0 { c.body = try r.string() }
        if mask & Field.badge != 0 { c.badge = try r.int() }
        if mask & Field.sound != 0 { c.sound = try readSound(&r) }
        if mask & Field.launchImageName != 0 { c.launchImageName = try r.string() }
        if mask & Field.userInfo != 0 { c.userInfo = try readDictionary(&r, depth: 0) }
        if mask & Field.attachments != 0 {
            let count = try r.length()
            var attachments: [AttachmentValue] = []
            attachments.reserveCapacity(reservation(count))
            for _ in 0..<count { attachments.append(try readAttachment(&r)) }
            c.attachments = attachments
        }
        if mask & Field.categoryIdentifier != 0 { c.categoryIdentifier = try r.string() }
        if mask & Field.threadIdentifier != 0 { c.threadIdentifier = try r.string() }
        if mask & Field.targetContentIdentifier != 0 { c.targetContentIdentifier = try r.string() }
        if mask & Field.summaryArgument != 0 { c.summaryArgument = try r.string() }
        if mask & Field.summaryArgumentCount != 0 { c.summaryArgumentCount = try r.int() }
        if mask & Field.interruptionLevel != 0 {
            let level = try r.varint()
            guard level <= UInt64(UInt.max) else { throw DecodingError(reason: "interruption level out of range") }
            c.interruptionLevel = InterruptionLevel(rawValue: UInt(level))
        }
        if mask & Field.relevanceScore != 0 { c.relevanceScore = try r.double() }
        if mask & Field.filterCriteria != 0 { c.filterCriteria = try r.string() }
        return c
    }

    // MARK: Sound and attachments

    private static let soundKinds: [SoundValue.Kind] = [.default, .named, .defaultCritical, .criticalNamed, .defaultRingtone, .ringtoneNamed]

    private static func writeSound(_ sound: SoundValue, _ w: inout BinaryWriter) throws(EncodingError) {
        w.byte(UInt8(soundKinds.firstIndex(of: sound.kind)!))
        w.byte((sound.name != nil ? 1 : 0) | (sound.volume != nil ? 2 : 0))
        if let name = sound.name { w.string(name) }
        if let volume = sound.volume {
            guard volume.isFinite else { throw EncodingError(reason: "sound volume \(volume) is not a finite number") }
            w.fixed32(volume.bitPattern)
        }
    }

    private static func readSound(_ r: inout BinaryReader) throws(DecodingError) -> SoundValue {
        let kind = Int(try r.byte())
        guard kind < soundKinds.count else { throw DecodingError(reason: "unknown sound kind") }
        let flags = try r.byte()
        guard flags & ~3 == 0 else { throw DecodingError(reason: "unknown sound fields") }
        var sound = SoundValue(kind: soundKinds[kind])
        if flags & 1 != 0 { sound.name = try r.string() }
        if flags & 2 != 0 {
            let volume = Float(bitPattern: try r.fixed32())
            guard volume.isFinite else { throw DecodingError(reason: "non-finite sound volume") }
            sound.volume = volume
        }
        return sound
    }

    private static func writeAttachment(_ a: AttachmentValue, _ w: inout BinaryWriter) throws(EncodingError) {
        w.string(a.identifier)
        w.string(a.path)
        w.string(a.type)
        let o = a.options
        var flags: UInt8 = 0
        if o.typeHint != nil { flags |= 1 }
        if o.thumbnailHidden != nil { flags |= 2 }
        if o.thumbnailClippingRect != nil { flags |= 4 }
        if o.thumbnailTime != nil { flags |= 8 }
        w.byte(flags)
        if let hint = o.typeHint { w.string(hint) }
        if let hidden = o.thumbnailHidden { w.byte(hidden ? 1 : 0) }
        if let rect = o.thumbnailClippingRect {
            w.varint(UInt64(rect.count))
            for value in rect { try w.double(value) }
        }
        if let time = o.thumbnailTime { try w.double(time) }
    }

    private static func readAttachment(_ r: inout BinaryReader) throws(DecodingError) -> AttachmentValue {
        var a = AttachmentValue(identifier: try r.string(), path: try r.string(), type: try r.string())
        let flags = try r.byte()
        guard flags & ~15 == 0 else { throw DecodingError(reason: "unknown attachment options") }
        if flags & 1 != 0 { a.options.typeHint = try r.string() }
        if flags & 2 != 0 { a.options.thumbnailHidden = try r.bool() }
        if flags & 4 != 0 {
            let count = try r.length()
            var rect: [Double] = []
            for _ in 0..<count { rect.append(try r.double()) }
            a.options.thumbnailClippingRect = rect
        }
        if flags & 8 != 0 { a.options.thumbnailTime = try r.double() }
        return a
    }

    /// Room to reserve for `count` elements read from the wire. A count is only bounded by
    /// the bytes left, and nested arrays each claim that much: reserving it all would let a
    /// 16 MiB frame ask for gigabytes before the first element is read. Beyond this, the
    /// collection grows with the elements that actually decode.
    static let maximumReservation = 256

    static func reservation(_ count: UInt64) -> Int {
        Int(min(count, UInt64(maximumReservation)))
    }

    // MARK: Property lists

    private static let maximumDepth = 64

    private static func writeDictionary(_ dictionary: [String: PropertyListValue], _ w: inout BinaryWriter) throws(EncodingError) {
        w.varint(UInt64(dictionary.count))
        for (key, value) in dictionary {
            w.string(key)
            try writeValue(value, &w)
        }
    }

    private static func writeValue(_ value: PropertyListValue, _ w: inout BinaryWriter) throws(EncodingError) {
        switch value {
        case .string(let v): w.byte(0); w.string(v)
        case .integer(let v): w.byte(1); w.signed(v)
        case .double(let v): w.byte(2); try w.double(v)
        case .bool(let v): w.byte(v ? 4 : 3)
        case .date(let v): w.byte(5); try w.double(v.timeIntervalSinceReferenceDate)
        case .data(let v):
            w.byte(6)
            w.varint(UInt64(v.count))
            w.bytes.append(contentsOf: v)
        case .array(let items):
            w.byte(7)
            w.varint(UInt64(items.count))
            for item in items { try writeValue(item, &w) }
        case .dictionary(let dictionary):
            w.byte(8)
            try writeDictionary(dictionary, &w)
        }
    }

    private static func readDictionary(_ r: inout BinaryReader, depth: Int) throws(DecodingError) -> [String: PropertyListValue] {
        guard depth < maximumDepth else { throw DecodingError(reason: "userInfo nested too deeply") }
        let count = try r.length()
        var dictionary: [String: PropertyListValue] = [:]
        dictionary.reserveCapacity(reservation(count))
        for _ in 0..<count {
            let key = try r.string()
            let value = try readValue(&r, depth: depth + 1)
            guard dictionary.updateValue(value, forKey: key) == nil else { throw DecodingError(reason: "duplicate userInfo key") }
        }
        return dictionary
    }

    private static func readValue(_ r: inout BinaryReader, depth: Int) throws(DecodingError) -> PropertyListValue {
        guard depth < maximumDepth else { throw DecodingError(reason: "userInfo nested too deeply") }
        switch try r.byte() {
        case 0: return .string(try r.string())
        case 1: return .integer(try r.signed())
        case 2: return .double(try r.double())
        case 3: return .bool(false)
        case 4: return .bool(true)
        case 5: return .date(Date(timeIntervalSinceReferenceDate: try r.double()))
        case 6: return .data(Data(try r.raw(Int(try r.length()))))
        case 7:
            let count = try r.length()
            var items: [PropertyListValue] = []
            items.reserveCapacity(reservation(count))
            for _ in 0..<count { items.append(try readValue(&r, depth: depth + 1)) }
            return .array(items)
        case 8: return .dictionary(try readDictionary(&r, depth: depth + 1))
        case let tag: throw DecodingError(reason: "unknown userInfo tag \(tag)")
        }
    }
}

/// Appends the binary form's primitives: LEB128 varints, zig-zag signed integers,
/// little-endian fixed-width numbers, length-prefixed UTF-8 strings.
public struct BinaryWriter: Sendable {
    public var bytes: [UInt8] = []

    public init() {}

    public mutating func byte(_ value: UInt8) {
        bytes.append(value)
    }

    public mutating func varint(_ value: UInt64) {
        // Most are lengths and counts under 128: one byte.
        if value < 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value))
            return
        }
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    public mutating func signed(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    public mutating func fixed32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func fixed64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// JSON cannot carry NaN or infinities; neither does this form.
    public mutating func double(_ value: Double) throws(BinaryRequestCodec.EncodingError) {
        guard value.isFinite else { throw BinaryRequestCodec.EncodingError(reason: "\(value) is not a finite number") }
        fixed64(value.bitPattern)
    }

    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }
}

/// Reads what `BinaryWriter` wrote, refusing anything out of bounds or malformed.
public struct BinaryReader {
    private let buffer: UnsafeRawBufferPointer
    private var offset = 0

    public init(_ buffer: UnsafeRawBufferPointer) {
        self.buffer = buffer
    }

    public var isAtEnd: Bool { offset == buffer.count }

    private static func fail(_ reason: String) -> BinaryRequestCodec.DecodingError {
        BinaryRequestCodec.DecodingError(reason: reason)
    }

    public mutating func byte() throws(BinaryRequestCodec.DecodingError) -> UInt8 {
        guard offset < buffer.count else { throw Self.fail("truncated") }
        defer { offset += 1 }
        return buffer[offset]
    }

    public mutating func bool() throws(BinaryRequestCodec.DecodingError) -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        default: throw Self.fail("invalid boolean")
        }
    }

    public mutating func varint() throws(BinaryRequestCodec.DecodingError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64, shift < 63 || b <= 1 else { throw Self.fail("varint too long") }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 {
                // The shortest form only: one value, one encoding.
                guard b != 0 || shift == 0 else { throw Self.fail("varint not minimal") }
                return result
            }
            shift += 7
        }
    }

    /// A count or byte length, which cannot exceed what is left to read.
    public mutating func length() throws(BinaryRequestCodec.DecodingError) -> UInt64 {
        let value = try varint()
        guard value <= UInt64(buffer.count - offset) else { throw Self.fail("length beyond the end") }
        return value
    }

    public mutating func signed() throws(BinaryRequestCodec.DecodingError) -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    public mutating func int() throws(BinaryRequestCodec.DecodingError) -> Int {
        let value = try signed()
        guard let int = Int(exactly: value) else { throw Self.fail("integer out of range") }
        return int
    }

    public mutating func fixed32() throws(BinaryRequestCodec.DecodingError) -> UInt32 {
        let raw = try raw(4)
        var value: UInt32 = 0
        withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: raw) }
        return UInt32(littleEndian: value)
    }

    public mutating func fixed64() throws(BinaryRequestCodec.DecodingError) -> UInt64 {
        let raw = try raw(8)
        var value: UInt64 = 0
        withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: raw) }
        return UInt64(littleEndian: value)
    }

    public mutating func double() throws(BinaryRequestCodec.DecodingError) -> Double {
        let value = Double(bitPattern: try fixed64())
        guard value.isFinite else { throw Self.fail("non-finite number") }
        return value
    }

    public mutating func raw(_ count: Int) throws(BinaryRequestCodec.DecodingError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= buffer.count - offset else { throw Self.fail("truncated") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])
    }

    public mutating func string() throws(BinaryRequestCodec.DecodingError) -> String {
        let utf8 = try raw(Int(try length()))
        guard let string = String(validating: utf8, as: UTF8.self) else { throw Self.fail("invalid UTF-8") }
        return string
    }
}
