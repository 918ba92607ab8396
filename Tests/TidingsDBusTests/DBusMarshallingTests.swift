import Foundation
import Testing
import TidingsDBus

/// The wire format both ways, by bytes and by round trip; hostile messages under the limits.
@Suite("D-Bus marshalling")
struct DBusMarshallingTests {
    static let every: [DBusValue] = [
        .byte(7), .boolean(true), .int16(-2), .uint16(65535), .int32(-70000), .uint32(4_000_000_000),
        .int64(-1 << 40), .uint64(1 << 63), .double(2.5), .string("grüße <b>"), .objectPath("/org/a_b/C1"), .signature("a{sv}"),
        .array(.int64, []), .array(.byte, [.byte(1), .byte(2)]),
        .dictionary(key: .string, value: .variant, [(.string("urgency"), .variant(.byte(2))), (.string("image-path"), .variant(.string("file:///x.png")))]),
        .structure([.byte(1), .uint64(2), .array(.structure([.int16, .string]), [.structure([DBusValue.int16(3), DBusValue.string("x")])])]),
        .variant(.variant(.array(.string, [.string("a")]))),
    ]

    private func message(_ body: [DBusValue], limits: DBusLimits = DBusLimits()) throws -> DBusMessage {
        let encoded = DBusMessage(kind: .signal, serial: 9, path: "/a", interface: "a.b", member: "C", body: body).encoded()
        return try encoded.withUnsafeBytes { try DBusMessage(decoding: $0, limits: limits) }
    }

    @Test("every type the notifications API uses survives encoding and decoding, in a message")
    func roundTrip() throws {
        let decoded = try message(Self.every)
        #expect(decoded.body == Self.every)
        #expect(decoded.signature == "ybnqiuxtdsogaxaya{sv}(yta(ns))v")
        #expect(decoded.serial == 9 && decoded.member == "C" && decoded.interface == "a.b" && decoded.path == "/a")
    }

    @Test("alignment: padding before 8-byte values, an empty array still pads to its element")
    func alignmentBytes() {
        var encoder = DBusEncoder()
        encoder.encode([.byte(1), .uint64(2)])
        #expect(encoder.bytes == [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0])
        var empty = DBusEncoder()
        empty.encode([.array(.int64, []), .byte(9)])
        #expect(empty.bytes == [0, 0, 0, 0, 0, 0, 0, 0, 9])
        var string = DBusEncoder()
        string.encode([.byte(1), .string("ab"), .signature("u")])
        #expect(string.bytes == [1, 0, 0, 0, 2, 0, 0, 0, 0x61, 0x62, 0, 1, 0x75, 0])
    }

    @Test("a big-endian message decodes (the bus forwards a sender's byte order)")
    func bigEndian() throws {
        // Signal /a a.b.C(u 0x01020304), big-endian, serial 5.
        var fields: [UInt8] = []
        func field(_ code: UInt8, _ sig: String, _ value: [UInt8]) {
            while fields.count % 8 != 0 { fields.append(0) }
            fields += [code, 1] + Array(sig.utf8) + [0] + value
        }
        field(1, "o", [0, 0, 0, 2, 0x2f, 0x61, 0])
        field(2, "s", [0, 0, 0, 3] + Array("a.b".utf8) + [0])
        field(3, "s", [0, 0, 0, 1, 0x43, 0])
        field(8, "g", [1, 0x75, 0])
        var bytes: [UInt8] = [0x42, 4, 0, 1, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, UInt8(fields.count)] + fields
        while bytes.count % 8 != 0 { bytes.append(0) }
        bytes += [1, 2, 3, 4]
        let decoded = try bytes.withUnsafeBytes { try DBusMessage(decoding: $0, limits: DBusLimits()) }
        #expect(decoded.body == [.uint32(0x0102_0304)])
        #expect(decoded.member == "C" && decoded.serial == 5)
    }

    @Test("signatures: the specification's rules")
    func signatures() throws {
        #expect(try DBusSignature.parse("susssasa{sv}i").count == 8)
        for bad in ["a", "(", "()", "a{vs}", "{sv}", "a{sv", "(i", "h", "z", "a{s}", "a{sii}"] {
            #expect(throws: DBusFormatError.self, "\(bad)") { try DBusSignature.parse(bad) }
        }
        #expect(try DBusSignature.parse(String(repeating: "a", count: 32) + "y").count == 1)
        #expect(throws: DBusFormatError.self) { try DBusSignature.parse(String(repeating: "a", count: 33) + "y") }
        #expect(try DBusSignature.parse(String(repeating: "(", count: 32) + "y" + String(repeating: ")", count: 32)).count == 1)
        #expect(throws: DBusFormatError.self) { try DBusSignature.parse(String(repeating: "(", count: 33) + "y" + String(repeating: ")", count: 33)) }
        #expect(try DBusSignature.parse(String(repeating: "y", count: 255)).count == 255)
        #expect(throws: DBusFormatError.self) { try DBusSignature.parse(String(repeating: "y", count: 256)) }
    }

    @Test("containers nested at the depth limit decode; one deeper is refused")
    func depthLimit() throws {
        var value = DBusValue.byte(1)
        for _ in 0 ..< 64 { value = .variant(value) }
        #expect(try message([value]).body == [value], "64 variants: the specification's cap")
        #expect(throws: DBusFormatError.self) { try message([.variant(value)]) }
        #expect(throws: DBusFormatError.self) { try message([value], limits: DBusLimits(maximumDepth: 10)) }
    }

    @Test("message and array length limits: at the limit decodes, past it is refused before the bytes arrive")
    func lengthLimits() throws {
        let body: [DBusValue] = [.array(.byte, Array(repeating: .byte(0), count: 1000))]
        let encoded = DBusMessage(kind: .signal, serial: 1, path: "/a", interface: "a.b", member: "C", body: body).encoded()
        let exact = DBusLimits(maximumMessageLength: encoded.count, maximumArrayLength: 1000)
        #expect(try encoded.withUnsafeBytes { try DBusMessage(decoding: $0, limits: exact) }.body == body)
        #expect(throws: DBusFormatError.self) { try encoded.withUnsafeBytes { try DBusMessage(decoding: $0, limits: DBusLimits(maximumMessageLength: encoded.count - 1, maximumArrayLength: 1000)) } }
        #expect(throws: DBusFormatError.self) { try encoded.withUnsafeBytes { try DBusMessage(decoding: $0, limits: DBusLimits(maximumMessageLength: encoded.count, maximumArrayLength: 999)) } }
        // Only the first 16 bytes: the length is known (and refused) without the rest.
        #expect(throws: DBusFormatError.self) { try encoded.withUnsafeBytes { try DBusMessage.length(of: UnsafeRawBufferPointer(rebasing: $0[0 ..< 16]), limits: DBusLimits(maximumMessageLength: 64)) } }
        #expect(try encoded.withUnsafeBytes { try DBusMessage.length(of: UnsafeRawBufferPointer(rebasing: $0[0 ..< 16]), limits: exact) } == encoded.count)
        #expect(try encoded.withUnsafeBytes { try DBusMessage.length(of: UnsafeRawBufferPointer(rebasing: $0[0 ..< 15]), limits: exact) } == nil)
        // A configured limit never goes past the specification's.
        #expect(DBusLimits(maximumMessageLength: Int.max, maximumArrayLength: Int.max, maximumDepth: 1000) == .specification)
    }

    @Test("hostile bytes: bad booleans, padding, UTF-8, NULs, lengths and headers are errors, never crashes")
    func hostile() throws {
        let good = DBusMessage(kind: .signal, serial: 1, path: "/a", interface: "a.b", member: "C", body: [.boolean(true), .string("hi"), .uint64(1)]).encoded()
        func decode(_ bytes: [UInt8]) throws { _ = try bytes.withUnsafeBytes { try DBusMessage(decoding: $0, limits: DBusLimits()) } }
        try decode(good)
        let bodyStart = good.count - 24
        func mutate(_ offset: Int, _ value: UInt8) -> [UInt8] { var b = good; b[offset] = value; return b }
        #expect(throws: DBusFormatError.self, "boolean 2") { try decode(mutate(bodyStart, 2)) }
        #expect(throws: DBusFormatError.self, "string not NUL-terminated") { try decode(mutate(bodyStart + 10, 0x41)) }
        #expect(throws: DBusFormatError.self, "NUL inside a string") { try decode(mutate(bodyStart + 8, 0)) }
        #expect(throws: DBusFormatError.self, "invalid UTF-8") { try decode(mutate(bodyStart + 8, 0xff)) }
        #expect(throws: DBusFormatError.self, "non-zero padding") { try decode(mutate(bodyStart + 11, 1)) }
        #expect(throws: DBusFormatError.self, "string length past the end") { try decode(mutate(bodyStart + 7, 0x7f)) }
        #expect(throws: DBusFormatError.self, "byte order") { try decode(mutate(0, 0x41)) }
        #expect(throws: DBusFormatError.self, "version") { try decode(mutate(3, 2)) }
        #expect(throws: DBusFormatError.self, "message type 0") { try decode(mutate(1, 0)) }
        #expect(throws: DBusFormatError.self, "serial 0") { var b = good; b[8] = 0; try decode(b) }
        #expect(throws: DBusFormatError.self, "truncated") { try decode(Array(good.dropLast())) }
        #expect(throws: DBusFormatError.self, "a method return without REPLY_SERIAL") {
            try decode(DBusMessage(kind: .methodReturn, serial: 1).encoded())
        }
        // Every truncation and every single-byte change: an error or a message, never a crash.
        for cut in 0 ..< good.count { _ = try? decode(Array(good[0 ..< cut])) }
        for offset in 0 ..< good.count { for value: UInt8 in [0, 1, 0x7f, 0xff] { _ = try? decode(mutate(offset, value)) } }
    }

    @Test("bus addresses: path, abstract, %-escapes, alternatives; unusable ones are errors")
    func addresses() throws {
        #expect(try DBusAddress.parse("unix:path=/run/user/1000/bus") == [DBusAddress(socket: .path("/run/user/1000/bus"))])
        #expect(try DBusAddress.parse("unix:abstract=/tmp/dbus-X,guid=abc") == [DBusAddress(socket: .abstract("/tmp/dbus-X"))])
        #expect(try DBusAddress.parse("tcp:host=x,port=1;unix:path=/a%20b") == [DBusAddress(socket: .path("/a b"))])
        #expect(throws: DBusFormatError.self) { try DBusAddress.parse("tcp:host=x,port=1") }
        #expect(throws: DBusFormatError.self) { try DBusAddress.parse("unix:path=/a%2") }
        #expect(throws: DBusFormatError.self) { try DBusAddress.parse("unix:guid=1") }
        #expect(try DBusAddress.session(environment: [:]) == nil)
        #expect(try DBusAddress.session(environment: ["XDG_RUNTIME_DIR": "/run/user/5"]) == [DBusAddress(socket: .path("/run/user/5/bus"))])
    }

    @Test("SASL EXTERNAL: the uid in hex, BEGIN after OK, anything else or an overlong line fails")
    func authentication() {
        #expect(DBusAuthentication.initialBytes(uid: 1000) == [0] + Array("AUTH EXTERNAL 31303030\r\n".utf8))
        var auth = DBusAuthentication()
        #expect(auth.receive(Array("OK 1234".utf8)).0 == .wait)
        let (action, consumed) = auth.receive(Array("abcd\r\nl".utf8))
        #expect(action == .begin(send: Array("BEGIN\r\n".utf8), guid: "1234abcd"))
        #expect(consumed == 6, "the message bytes after the line are left")
        var rejected = DBusAuthentication()
        guard case .fail = rejected.receive(Array("REJECTED EXTERNAL\r\n".utf8)).0 else { Issue.record("REJECTED must fail"); return }
        var long = DBusAuthentication()
        guard case .fail = long.receive(Array(repeating: UInt8(ascii: "x"), count: DBusAuthentication.maximumLineLength + 1)).0 else { Issue.record("overlong line"); return }
        var atLimit = DBusAuthentication()
        #expect(atLimit.receive(Array(repeating: UInt8(ascii: "x"), count: DBusAuthentication.maximumLineLength)).0 == .wait)
    }
}

/// Messages a real bus sent (captured with `dbus-monitor --binary` around python-dbusmock's
/// notification server: Hello, Notify, NameOwnerChanged, Introspect): the fuzz
/// target's seeds, which the parser must read and re-encode to the same message.
@Suite("D-Bus captured messages")
struct DBusCapturedMessageTests {
    @Test("every captured message parses, and re-encodes to a message that parses the same")
    func captured() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/seeds/FuzzDBusMessage").standardized
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("msg") }.sorted()
        #expect(files.count >= 10)
        var members: Set<String> = []
        for file in files {
            let bytes = try [UInt8](Data(contentsOf: folder.appendingPathComponent(file)))
            let message = try bytes.withUnsafeBytes { try DBusMessage(decoding: $0, limits: DBusLimits()) }
            let again = try message.encoded().withUnsafeBytes { try DBusMessage(decoding: $0, limits: DBusLimits()) }
            #expect(again == message, "\(file)")
            if let member = message.member { members.insert(member) }
        }
        #expect(members.isSuperset(of: ["Hello", "Notify", "NameOwnerChanged", "NameAcquired"]), "\(members)")
    }
}
