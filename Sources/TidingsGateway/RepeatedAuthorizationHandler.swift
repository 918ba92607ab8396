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
    /// The start of a frame that has not fully arrived.
    private var carry: ByteBuffer?
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

    /// How many header blocks had their token rewritten (for tests).
    private(set) var rewrittenBlocks = 0

    init(maximumFrameSize: Int = 16384) {
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
        if var held = carry {
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
        var output: ByteBuffer?
        var emitted = input.readerIndex  // input[emitted..<frameStart] is still to be passed on
        var frameStart = input.readerIndex
        let end = input.writerIndex
        while end - frameStart >= 9 {
            let length = Int(input.getInteger(at: frameStart, as: UInt32.self)! >> 8)
            guard length <= maximumFrameSize else { passThrough = true; break }
            let frameEnd = frameStart + 9 + length
            guard frameEnd <= end else { break }
            let type = input.getInteger(at: frameStart + 3, as: UInt8.self)!
            let flags = input.getInteger(at: frameStart + 4, as: UInt8.self)!
            let streamID = input.getInteger(at: frameStart + 5, as: UInt32.self)! & 0x7FFF_FFFF
            if continuing {
                if type == 0x9, flags & 0x4 != 0 { continuing = false }
            } else if type == 0x1 {
                if flags & 0x4 == 0 { continuing = true }
                let opensStream = streamID > highestStreamID
                if opensStream { highestStreamID = streamID }
                let blockStart = frameStart + 9 + (flags & 0x20 != 0 ? 5 : 0)
                if !continuing, flags & 0x8 == 0, blockStart <= frameEnd {  // complete, not padded
                    switch rewrite(input, block: blockStart..<frameEnd, streamID: streamID, opensStream: opensStream) {
                    case .unchanged:
                        break
                    case .malformed:
                        passThrough = true
                    case .rewritten(let block):
                        let newLength = blockStart - frameStart - 9 + block.count
                        if newLength <= maximumFrameSize {
                            if output == nil { output = context.channel.allocator.buffer(capacity: end - input.readerIndex + 512) }
                            var kept = input.getSlice(at: emitted, length: blockStart - emitted)!
                            let headerAt = output!.writerIndex + (frameStart - emitted)
                            output!.writeBuffer(&kept)
                            // The frame's 24-bit length.
                            output!.setInteger(UInt8(truncatingIfNeeded: newLength >> 16), at: headerAt)
                            output!.setInteger(UInt16(truncatingIfNeeded: newLength), at: headerAt + 1)
                            output!.writeBytes(block)
                            emitted = frameEnd
                            rewrittenBlocks += 1
                        }
                    }
                }
            } else if type == 0x9 {
                passThrough = true  // CONTINUATION outside a block: NIOHTTP2 refuses it
            }
            if passThrough { break }
            frameStart = frameEnd
        }
        if passThrough { frameStart = end }
        if frameStart < end { carry = input.getSlice(at: frameStart, length: end - frameStart) }
        if var out = output {
            var rest = input.getSlice(at: emitted, length: frameStart - emitted)!
            out.writeBuffer(&rest)
            context.fireChannelRead(wrapInboundOut(out))
        } else if frameStart > input.readerIndex {
            context.fireChannelRead(wrapInboundOut(input.getSlice(at: input.readerIndex, length: frameStart - input.readerIndex)!))
        }
        if passThrough, let held = carry {
            carry = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // A frame cut short by the close: NIOHTTP2 sees what came, as without this handler.
        if let held = carry {
            carry = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
        context.fireChannelInactive()
    }

    // MARK: The header block

    private enum Rewrite {
        case unchanged
        case rewritten([UInt8])
        case malformed
    }

    /// Walks one header block: the token's Huffman bytes become its plain text where learned,
    /// or the candidate where not.
    private func rewrite(_ buffer: ByteBuffer, block: Range<Int>, streamID: UInt32, opensStream: Bool) -> Rewrite {
        buffer.withUnsafeReadableBytes { raw -> Rewrite in
            let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let bytes = UnsafeBufferPointer(start: base + (block.lowerBound - buffer.readerIndex), count: block.count)
            var index = 0
            var tokenValue: Range<Int>?  // the Huffman-coded authorization value
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
                    guard index < bytes.count, let n = HPACKInteger.skip(bytes, &index, prefix: 7),
                          n <= bytes.count - index else { return .malformed }
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
            let length = HPACKInteger.skip(bytes, tokenValue.lowerBound, prefix: 7)
            let encoded = UnsafeBufferPointer(rebasing: bytes[(tokenValue.upperBound - length)..<tokenValue.upperBound])
            if !plain.isEmpty, encoded.count == huffman.count,
               huffman.withUnsafeBufferPointer({ memcmp($0.baseAddress!, encoded.baseAddress!, encoded.count) == 0 }) {
                var block: [UInt8] = []
                block.reserveCapacity(bytes.count + plain.count)
                block.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[..<tokenValue.lowerBound]))
                HPACKInteger.append(plain.count, prefix: 7, flags: 0, to: &block)
                block.append(contentsOf: plain)
                block.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[tokenValue.upperBound...]))
                return .rewritten(block)
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

    /// The integer at `index`, already known to be well formed.
    static func skip(_ bytes: UnsafeBufferPointer<UInt8>, _ index: Int, prefix: Int) -> Int {
        var i = index
        return skip(bytes, &i, prefix: prefix)!
    }

    static func append(_ value: Int, prefix: Int, flags: UInt8, to out: inout [UInt8]) {
        let mask = (1 << prefix) - 1
        if value < mask {
            out.append(flags | UInt8(value))
            return
        }
        out.append(flags | UInt8(mask))
        var rest = value - mask
        while rest >= 0x80 {
            out.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }
}
