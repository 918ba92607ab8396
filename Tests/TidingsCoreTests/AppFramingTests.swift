import Foundation
import Testing
import TidingsCore

/// The app socket's frame splitter and request decoder on plain bytes (what the daemon's
/// channel handler and `FuzzAppFrame` call).
@Suite("App socket framing")
struct AppFramingTests {
    func next(_ bytes: [UInt8], limit: Int = AppFraming.maximumFrameLength) throws -> AppFraming.Next {
        try bytes.withUnsafeBytes { try AppFraming.next(in: $0, limit: limit) }
    }

    static func header(_ length: UInt32) -> [UInt8] {
        withUnsafeBytes(of: length.bigEndian) { Array($0) }
    }

    @Test("a length at the limit waits for its body; one over, up to 2³² − 1, is refused from the header alone")
    func lengthLimit() throws {
        let limit = AppFraming.maximumFrameLength
        #expect(try next([0, 0]) == .incomplete(needed: 4))
        #expect(try next(Self.header(UInt32(limit))) == .incomplete(needed: limit + 4))
        #expect(try next(Self.header(3) + [1, 2, 3, 4]) == .frame(bodyLength: 3))
        for length in [UInt32(limit) + 1, 20 << 20, 1 << 31, .max] {
            #expect(throws: AppFraming.FrameError.tooLong(length: length, limit: limit)) { try next(Self.header(length)) }
        }
        #expect(try next(Self.header(64) + Array(repeating: 0, count: 64), limit: 64) == .frame(bodyLength: 64))
        #expect(throws: AppFraming.FrameError.self) { try next(Self.header(65), limit: 64) }
        // A negative limit refuses everything rather than trapping.
        #expect(throws: AppFraming.FrameError.self) { try next(Self.header(0), limit: -1) }
    }

    @Test("a binary add decodes to its request with the bytes as received; truncated or short frames are errors")
    func binaryAdd() throws {
        var content = NotificationContentValue()
        content.title = "t"
        content.userInfo = ["k": .array([.integer(1), .bool(true)])]
        let request = NotificationRequestValue(identifier: "id", content: content, trigger: .timeInterval(seconds: 60, repeats: false))
        let encoded = try BinaryRequestCodec.encode(request)
        let frame = [AppFraming.BinaryKind.add] + withUnsafeBytes(of: UInt64(42).littleEndian) { Array($0) } + encoded
        let received = try frame.withUnsafeBytes { try AppFraming.decodeRequest($0) }
        #expect(received.id == 42)
        #expect(received.request == .add(request))
        #expect(received.encodedRequest == Data(encoded))
        for cut in [1, 5, 9, frame.count - 1] {
            #expect(throws: (any Error).self) { try Array(frame.prefix(cut)).withUnsafeBytes { try AppFraming.decodeRequest($0) } }
        }
    }

    @Test("counts claiming the whole frame, nested 60 deep, end in a decoding error (each level reserves at most 256 elements, not the claim)")
    func claimedCountsAreNotReserved() throws {
        // userInfo: one key whose value is 60 nested arrays, each claiming as many elements
        // as there are bytes left, and then the frame ends.
        var bytes: [UInt8] = [BinaryRequestCodec.marker, 0, 0]
        bytes += [0x40] // content mask: userInfo
        bytes += [1, 1, UInt8(ascii: "k")]
        let padding = 1 << 20
        for _ in 0..<60 { bytes += [7] + varint(UInt64(padding)) }
        bytes += Array(repeating: 9, count: padding) // an unknown tag after the nesting
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try bytes.withUnsafeBytes { try BinaryRequestCodec.decode($0) } }
    }

    func varint(_ value: UInt64) -> [UInt8] {
        var writer = BinaryWriter()
        writer.varint(value)
        return writer.bytes
    }
}
