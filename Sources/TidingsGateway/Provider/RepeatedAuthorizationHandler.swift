import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

/// In front of `NIOHTTP2Handler` on provider connections: a provider token the client sends
/// again, Huffman-coded byte for byte as before, reaches NIOHTTP2 as a plain literal.
///
/// HTTP/2 clients do not put `authorization` in the HPACK dynamic table (nghttp2, so curl and
/// h2load, and Python's `h2`, so httpx and aioapns, send it "never indexed"): every request
/// carries the ≈ 200-byte JWT again, Huffman-coded, and NIOHPACK decoded it again, 4 bits a
/// step, ≈ 6 % of the gateway's CPU per accepted push. The token changes at most every 20
/// minutes (`TooManyProviderTokenUpdates`), so its Huffman bytes repeat. This handler walks each
/// complete HEADERS frame's block (no Huffman decoding: HPACK representations say their own
/// length) and, where the `authorization` value has exactly the Huffman bytes whose decoded
/// text it has learned, writes that text as a plain (non-Huffman) string instead. The
/// representation keeps its kind (never indexed, without or with indexing), so NIOHPACK
/// decodes the same fields and its dynamic table changes exactly as before; only the frame's
/// length changes.
///
/// Learning: the decoded text comes from NIOHPACK itself. The first Huffman-coded
/// `authorization` in the initial HEADERS of a new stream becomes the candidate;
/// `ProviderConnectionHandler` hands over every new stream's decoded fields
/// (`learn(from:streamID:)`), and the candidate stream's value is learned. A stream's initial
/// HEADERS block is the only block a new stream ID appears with, so the pair is exact. A
/// different token becomes the next candidate.
///
/// Two kinds of frame never reach NIOHTTP2 (outside a header block, where NIOHTTP2 must see and
/// refuse them):
/// - frames of a type HTTP/2 does not define (RFC 9113 § 4.1: ignored and discarded): they are
///   dropped as they come, even in pieces, so that no unauthenticated client can make
///   NIOHTTP2's decoder accumulate them (an unknown-type flood grew it by 27–43 MB per
///   connection); what this handler holds is at most one frame header or one HEADERS or
///   RST_STREAM frame (`heldBytes` ≤ 9 + `maximumFrameSize`);
/// - `RST_STREAM` for a stream that is already closed (answered, refused or reset:
///   `ProviderStreamRegistry.isClosedStream`): RFC 9113 § 5.1 makes it a no-op, but NIOHTTP2
///   counts every reset against its rapid-reset limit (200 in 30 s, then ENHANCE_YOUR_CALM), and
///   clients such as APNSwift reset each stream after its response. Resets of open streams
///   (the rapid-reset attack, CVE-2023-44487) still reach NIOHTTP2 and count.
///
/// What it does not understand it passes on untouched, for NIOHTTP2 to accept or refuse:
/// padded or continued blocks and blocks naming `authorization` another way are not rewritten,
/// and after anything malformed (a frame longer than `maximumFrameSize`, a block whose
/// representations do not add up) the rest of the connection goes through as it comes.
final class RepeatedAuthorizationHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// `SETTINGS_MAX_FRAME_SIZE` as NIOHTTP2 enforces it: a longer frame is passed on (NIOHTTP2
    /// answers it) and never held here, nor is a rewritten frame allowed to grow past it.
    let maximumFrameSize: Int

    /// The client connection preface (RFC 9113 § 3.4) still to pass before the first frame.
    private var prefaceRemaining = 24
    /// The start of a HEADERS frame (or of a frame header) that has not fully arrived. Other
    /// frames are never held: what has come of them is passed on, and the rest skipped when
    /// it comes (`remainderToSkip`), so a DATA frame's bytes are not copied here.
    private var carry: ByteBuffer?
    private var remainderToSkip = 0
    /// Something was not understood: everything from here on passes through.
    private var passThrough = false
    /// Inside a header block continued by CONTINUATION frames.
    private var continuing = false
    /// The highest stream ID seen on a HEADERS frame: a larger one opens a stream.
    private var highestStreamID: UInt32 = 0

    /// The learned token: its Huffman bytes and the text NIOHPACK decoded them to.
    private var huffman: [UInt8] = []
    private var plain: [UInt8] = []
    /// Huffman bytes seen on a new stream, waiting for their decoded text.
    private var candidate: (streamID: UInt32, huffman: [UInt8])?

    /// The remainder to skip belongs to a dropped frame (else it is passed on).
    private var discardingRemainder = false

    /// How many header blocks had their token rewritten (for tests).
    private(set) var rewrittenBlocks = 0
    /// Frames dropped: resets of closed streams, frames of unknown types (for tests).
    private(set) var droppedResets = 0
    private(set) var droppedUnknownFrames = 0
    /// Bytes held here until more come (at most a frame header, or one HEADERS or RST_STREAM frame).
    var heldBytes: Int { carry?.readableBytes ?? 0 }

    /// The provider handler, asked which streams are closed. Strong (see
    /// `OutboundCoalescingHandler.streams`), cleared in `handlerRemoved`.
    var streams: (any ProviderStreamRegistry)?

    func handlerRemoved(context: ChannelHandlerContext) { streams = nil }

    init(maximumFrameSize: Int = Gateway.providerMaximumFrameSize) {
        self.maximumFrameSize = maximumFrameSize
    }

    // MARK: Learning

    /// Called with every stream's initial header fields as NIOHPACK decoded them: if the
    /// stream's block held the candidate, its decoded text is learned. Only when the block held
    /// exactly one `authorization` field, so that both sides speak of the same field.
    func learn(from fields: HPACKHeaders, streamID: HTTP2StreamID) {
        guard let c = candidate, Int(c.streamID) == Int(streamID) else { return }
        var value: String?
        var count = 0
        for field in fields where field.name == "authorization" {
            count += 1
            value = field.value
        }
        candidate = nil
        guard count == 1, let value else { return }
        huffman = c.huffman
        plain = Array(value.utf8)
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var input = unwrapInboundIn(data)
        if passThrough { return context.fireChannelRead(data) }
        if var held = carry {  // the start of a HEADERS frame (small): the read completes it
            carry = nil
            held.writeBuffer(&input)
            input = held
        }
        if prefaceRemaining > 0 {
            let n = min(prefaceRemaining, input.readableBytes)
            prefaceRemaining -= n
            if let preface = input.readSlice(length: n) { context.fireChannelRead(wrapInboundOut(preface)) }
            if prefaceRemaining > 0 { return }
        }
        let end = input.writerIndex
        var frameStart = input.readerIndex
        // The rest of a frame passed on (or dropped) in an earlier read.
        let skipped = min(remainderToSkip, end - frameStart)
        remainderToSkip -= skipped
        frameStart += skipped
        var output: ByteBuffer?
        var emitted = input.readerIndex  // input[emitted..<frameStart] is still to be passed on
        if discardingRemainder {
            emitted = frameStart
            if remainderToSkip == 0 { discardingRemainder = false }
        }
        /// Leaves input[from..<to] out: what precedes it goes on first, in order.
        func drop(from: Int, to: Int) {
            if from > emitted {
                var before = input.getSlice(at: emitted, length: from - emitted)!
                if output != nil { output!.writeBuffer(&before) } else { context.fireChannelRead(wrapInboundOut(before)) }
            }
            emitted = to
        }
        while end - frameStart >= 9 {
            let length = Int(input.getInteger(at: frameStart, as: UInt32.self)! >> 8)
            guard length <= maximumFrameSize else { passThrough = true; break }
            let frameEnd = frameStart + 9 + length
            let type = input.getInteger(at: frameStart + 3, as: UInt8.self)!
            if type != 0x1 {
                if type == 0x9 {
                    // CONTINUATION: ends a continued block, or (outside one) NIOHTTP2 refuses it.
                    guard continuing else { passThrough = true; break }
                    if input.getInteger(at: frameStart + 4, as: UInt8.self)! & 0x4 != 0 { continuing = false }
                } else if type == 0x3, length == 4, !continuing, let streams {
                    // RST_STREAM: held until complete (13 bytes); dropped if its stream is closed.
                    guard frameEnd <= end else { break }
                    let streamID = input.getInteger(at: frameStart + 5, as: UInt32.self)! & 0x7FFF_FFFF
                    if streamID != 0, streams.isClosedStream(HTTP2StreamID(Int(streamID))) {
                        drop(from: frameStart, to: frameEnd)
                        droppedResets += 1
                        frameStart = frameEnd
                        continue
                    }
                } else if !continuing, Self.isUnknownType(type) {
                    // Dropped as it comes; the rest of it too, when it comes.
                    drop(from: frameStart, to: min(frameEnd, end))
                    droppedUnknownFrames += 1
                    if frameEnd > end {
                        remainderToSkip = frameEnd - end
                        discardingRemainder = true
                        frameStart = end
                        break
                    }
                    frameStart = frameEnd
                    continue
                }
                // Not rewritten: passed on as it comes, even when only its start is here.
                if frameEnd > end { remainderToSkip = frameEnd - end; frameStart = end; break }
                frameStart = frameEnd
                continue
            }
            guard frameEnd <= end else { break }  // HEADERS: held until complete
            let flags = input.getInteger(at: frameStart + 4, as: UInt8.self)!
            let streamID = input.getInteger(at: frameStart + 5, as: UInt32.self)! & 0x7FFF_FFFF
            if continuing { passThrough = true; break }  // HEADERS inside a block: NIOHTTP2 refuses it
            if flags & 0x4 == 0 { continuing = true }
            let opensStream = streamID > highestStreamID
            if opensStream { highestStreamID = streamID }
            let blockStart = frameStart + 9 + (flags & 0x20 != 0 ? 5 : 0)
            if !continuing, flags & 0x8 == 0, blockStart <= frameEnd {  // complete, not padded
                switch tokenValue(in: input, block: blockStart..<frameEnd, streamID: streamID, opensStream: opensStream) {
                case .unchanged:
                    break
                case .malformed:
                    passThrough = true
                case .learned(let value):
                    // The value's representation (H bit, length, Huffman bytes) becomes the
                    // plain one; the frame's 24-bit length follows.
                    let plainLength = HPACKInteger.encodedLength(plain.count, prefix: 7) + plain.count
                    let newLength = length - value.count + plainLength
                    guard newLength <= maximumFrameSize else { break }
                    if output == nil { output = context.channel.allocator.buffer(capacity: end - emitted + 512) }
                    var before = input.getSlice(at: emitted, length: frameStart - emitted)!
                    output!.writeBuffer(&before)
                    output!.writeInteger(UInt8(truncatingIfNeeded: newLength >> 16))
                    output!.writeInteger(UInt16(truncatingIfNeeded: newLength))
                    var head = input.getSlice(at: frameStart + 3, length: value.lowerBound - frameStart - 3)!
                    output!.writeBuffer(&head)
                    HPACKInteger.write(plain.count, prefix: 7, flags: 0, to: &output!)
                    output!.writeBytes(plain)
                    var after = input.getSlice(at: value.upperBound, length: frameEnd - value.upperBound)!
                    output!.writeBuffer(&after)
                    emitted = frameEnd
                    rewrittenBlocks += 1
                }
            }
            if passThrough { break }
            frameStart = frameEnd
        }
        if passThrough { frameStart = end }
        if frameStart < end { carry = input.getSlice(at: frameStart, length: end - frameStart) }
        if var out = output {
            if frameStart > emitted {
                var rest = input.getSlice(at: emitted, length: frameStart - emitted)!
                out.writeBuffer(&rest)
            }
            context.fireChannelRead(wrapInboundOut(out))
        } else if frameStart > emitted {
            context.fireChannelRead(wrapInboundOut(input.getSlice(at: emitted, length: frameStart - emitted)!))
        }
    }

    /// A frame type RFC 9113 does not define and NIOHTTP2 does not read (it reads ALTSVC, 0xA,
    /// and ORIGIN, 0xC).
    private static func isUnknownType(_ type: UInt8) -> Bool { type > 0x9 && type != 0xA && type != 0xC }

    func channelInactive(context: ChannelHandlerContext) {
        // A frame cut short by the close: NIOHTTP2 sees what came, as without this handler.
        if let held = carry {
            carry = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
        context.fireChannelInactive()
    }

    // MARK: The header block

    private enum TokenValue {
        case unchanged
        /// The learned token's Huffman-coded value: its representation's bytes in the buffer.
        case learned(Range<Int>)
        case malformed
    }

    /// Walks one header block for its `authorization` value: the learned token's Huffman bytes
    /// are found, or a new stream's become the candidate.
    private func tokenValue(in buffer: ByteBuffer, block: Range<Int>, streamID: UInt32, opensStream: Bool) -> TokenValue {
        buffer.withUnsafeReadableBytes { raw -> TokenValue in
            let offset = block.lowerBound - buffer.readerIndex
            let bytes = UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + offset, count: block.count)
            var index = 0
            var tokenValue: Range<Int>?  // the Huffman-coded authorization value's representation
            var tokens = 0
            while index < bytes.count {
                let first = bytes[index]
                let nameIndex: Int
                if first & 0x80 != 0 {  // indexed field
                    guard HPACKInteger.skip(bytes, &index, prefix: 7) != nil else { return .malformed }
                    continue
                } else if first & 0xC0 == 0x40 {  // literal with incremental indexing
                    guard let n = HPACKInteger.skip(bytes, &index, prefix: 6) else { return .malformed }
                    nameIndex = n
                } else if first & 0xE0 == 0x20 {  // dynamic table size update
                    guard HPACKInteger.skip(bytes, &index, prefix: 5) != nil else { return .malformed }
                    continue
                } else {  // literal without indexing / never indexed
                    guard let n = HPACKInteger.skip(bytes, &index, prefix: 4) else { return .malformed }
                    nameIndex = n
                }
                if nameIndex == 0 {  // a literal name: a token named this way is left alone
                    guard let n = HPACKInteger.skip(bytes, &index, prefix: 7), n <= bytes.count - index else { return .malformed }
                    index += n
                }
                guard index < bytes.count else { return .malformed }
                let isHuffman = bytes[index] & 0x80 != 0
                let valueStart = index
                guard let n = HPACKInteger.skip(bytes, &index, prefix: 7), n <= bytes.count - index else { return .malformed }
                index += n
                if nameIndex == 23 {  // `authorization` in the static table (RFC 7541 appendix A)
                    tokens += 1
                    if isHuffman { tokenValue = valueStart..<index }
                }
            }
            guard tokens == 1, let tokenValue else { return .unchanged }
            var stringStart = tokenValue.lowerBound
            _ = HPACKInteger.skip(bytes, &stringStart, prefix: 7)
            let encoded = UnsafeBufferPointer(rebasing: bytes[stringStart..<tokenValue.upperBound])
            if !plain.isEmpty, encoded.count == huffman.count,
               huffman.withUnsafeBufferPointer({ memcmp($0.baseAddress!, encoded.baseAddress!, encoded.count) == 0 }) {
                return .learned((block.lowerBound + tokenValue.lowerBound)..<(block.lowerBound + tokenValue.upperBound))
            }
            if opensStream { candidate = (streamID, Array(encoded)) }
            return .unchanged
        }
    }
}

/// HPACK's prefix integers (RFC 7541 § 5.1).
enum HPACKInteger {
    /// Reads the integer at `index` with a `prefix`-bit prefix and moves `index` past it; nil
    /// when it runs past the end or beyond 2^28 (NIOHPACK's own limit is lower still).
    static func skip(_ bytes: UnsafeBufferPointer<UInt8>, _ index: inout Int, prefix: Int) -> Int? {
        guard index < bytes.count else { return nil }
        let mask = (1 << prefix) - 1
        var value = Int(bytes[index]) & mask
        index += 1
        guard value == mask else { return value }
        var shift = 0
        while true {
            guard index < bytes.count, shift <= 21 else { return nil }
            let b = bytes[index]
            index += 1
            value += Int(b & 0x7F) << shift
            shift += 7
            if b & 0x80 == 0 { return value }
        }
    }

    /// How many bytes `write` takes for `value`.
    static func encodedLength(_ value: Int, prefix: Int) -> Int {
        let mask = (1 << prefix) - 1
        guard value >= mask else { return 1 }
        var length = 2
        var rest = (value - mask) >> 7
        while rest > 0 { length += 1; rest >>= 7 }
        return length
    }

    static func write(_ value: Int, prefix: Int, flags: UInt8, to out: inout ByteBuffer) {
        let mask = (1 << prefix) - 1
        if value < mask {
            out.writeInteger(flags | UInt8(value))
            return
        }
        out.writeInteger(flags | UInt8(mask))
        var rest = value - mask
        while rest >= 0x80 {
            out.writeInteger(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        out.writeInteger(UInt8(rest))
    }
}
