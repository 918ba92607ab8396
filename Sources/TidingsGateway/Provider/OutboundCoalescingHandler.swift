import NIOCore
import NIOHTTP2
import TidingsCore

/// Between `NIOHTTP2Handler` and TLS on provider connections: the bytes written between two
/// flushes go down as one buffer.
///
/// NIOHTTP2 writes every frame as its own buffer, and NIOSSL seals every buffer it is given
/// as its own TLS record: a commit batch of 60 responses was 60 `SSL_write`s, 60 records
/// (22 bytes of overhead each on a ≈ 45-byte HEADERS frame) and 60 decryptions on the
/// client. Copied into one buffer here they are one `SSL_write` and, up to 16 KiB, one record.
/// Copying also hands NIOHTTP2's frame buffer back at once, so its `clear()` before the next
/// frame finds the storage unshared instead of allocating a new one.
///
/// Buffers of `passThroughSize` bytes or more (large DATA payloads) are not copied: what is
/// pending goes first, then the buffer itself, in order. Promises complete when the combined
/// write does.
///
/// It also gives every GOAWAY frame that leaves the connection the `last_stream_id` of the
/// highest stream the gateway took (`ProviderStreamRegistry`): NIOHTTP2 writes its own GOAWAY on
/// a connection error with 2^31−1 ("maybe all of them"), and with 0 when its flood heuristics
/// fire ("none"), both untrue once streams were answered, and a client that trusts either
/// would lose or resend pushes that were stored. The frames are walked by their 9-byte headers
/// (NIOHTTP2 writes each frame as one buffer, a DATA frame's payload as a second one).
///
/// In the development environment it also adds `apns-unique-id` (a lower-case UUID of its own,
/// as Apple sends there) to every `:status 200` HEADERS frame: appended to the header block as
/// a literal field without indexing (HPACK's `0x00`, name and value as plain octets, RFC 7541
/// § 6.2.2), written into this handler's buffer while the frame is copied. Through NIOHPACK the
/// field cost ≈ 1 µs per push (its encoder Huffman-codes every value, and `NIOHTTP2Handler` does
/// not let us turn that off, plus a `String` per value); here it is 53 bytes written with the
/// copy. A literal without indexing leaves both HPACK dynamic tables alone, so NIOHPACK's encoder
/// state stays the peer's decoder state. The values come from `UniqueIDGenerator`, one per
/// connection (no lock, no system call per value).
final class OutboundCoalescingHandler: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    static let passThroughSize = 4096
    /// The buffer is kept between flushes (no allocation per batch) unless a burst grew it
    /// beyond this.
    static let retainedCapacity = 64 * 1024

    private var buffer: ByteBuffer?
    private var promise: EventLoopPromise<Void>?
    /// The provider handler, asked for the last stream taken when a GOAWAY goes out. Strong, and
    /// cleared in `handlerRemoved` (a weak reference gave the provider handler a side table, and
    /// every retain and release of it took the runtime's slow path).
    var streams: (any ProviderStreamRegistry)?
    /// Bytes of the current frame still to come in later writes (a DATA frame's payload).
    private var frameRemainder = 0
    /// Set in the development environment: every 200 gets `apns-unique-id` from it.
    private var uniqueIDs: UniqueIDGenerator?

    /// `addsUniqueID`: the development environment (Apple answers a 200 there with `apns-unique-id`).
    init(addsUniqueID: Bool = false) {
        uniqueIDs = addsUniqueID ? UniqueIDGenerator() : nil
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .byteBuffer(var bytes):
            let firstFrame = frameRemainder
            let addsUniqueIDs = walkFrames(&bytes)
            guard bytes.readableBytes < Self.passThroughSize || addsUniqueIDs else {
                emitPending(context: context)
                context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: promise)
                return
            }
            if buffer == nil || buffer!.capacity > Self.retainedCapacity {
                buffer = context.channel.allocator.buffer(capacity: 2048)
            } else if buffer!.readableBytes == 0 {
                // Emitted at the last flush, and TLS has encrypted it since: the storage is
                // unshared again and is reused (were it still shared, this would allocate).
                buffer!.clear()
            }
            if addsUniqueIDs { copyAddingUniqueIDs(bytes, firstFrame: firstFrame) } else { buffer!.writeBuffer(&bytes) }
            add(promise)
        case .fileRegion(let region):
            frameRemainder -= min(frameRemainder, region.readableBytes)
            emitPending(context: context)
            context.write(wrapOutboundOut(.fileRegion(region)), promise: promise)
        }
    }

    func flush(context: ChannelHandlerContext) {
        emitPending(context: context)
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Unflushed writes reach the channel, which fails them on close as it would have.
        emitPending(context: context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        streams = nil
        if let pending = promise {
            promise = nil
            pending.fail(ChannelError.ioOnClosedChannel)
        }
        buffer = nil
    }

    /// Walks the frames that start in `bytes`; a complete GOAWAY gets the last stream taken.
    /// Whether a complete frame among them is a 200 that gets `apns-unique-id` (development).
    private func walkFrames(_ bytes: inout ByteBuffer) -> Bool {
        let count = bytes.readableBytes
        if frameRemainder >= count {
            frameRemainder -= count
            return false
        }
        var addsUniqueIDs = false
        var offset = frameRemainder
        frameRemainder = 0
        let base = bytes.readerIndex
        while count - offset >= 9 {
            let length = Int(bytes.getInteger(at: base + offset, as: UInt32.self)! >> 8)
            let end = offset + 9 + length
            if bytes.getInteger(at: base + offset + 3, as: UInt8.self)! == 0x7, length >= 8, end <= count, let streams {
                let lastStreamID = UInt32(Int(streams.lastProcessedStreamID))
                let at = base + offset + 9
                if bytes.getInteger(at: at, as: UInt32.self)! != lastStreamID { bytes.setInteger(lastStreamID, at: at) }
            } else if uniqueIDs != nil, end <= count, Self.isOKHeaders(bytes, at: base + offset, length: length) {
                addsUniqueIDs = true
            }
            if end > count {
                frameRemainder = end - count
                return addsUniqueIDs
            }
            offset = end
        }
        return addsUniqueIDs
    }

    /// The HPACK field appended to a 200: literal without indexing, new name (`0x00`), the
    /// name's and the value's lengths without the Huffman bit, the 36-byte value last.
    static let uniqueIDFieldPrefix: [UInt8] = [0x00, 14] + Array("apns-unique-id".utf8) + [36]
    static let uniqueIDFieldSize = uniqueIDFieldPrefix.count + 36
    /// The smallest SETTINGS_MAX_FRAME_SIZE a peer can set: a grown frame stays within it.
    static let minimumMaximumFrameSize = 16_384

    /// A complete HEADERS frame (END_HEADERS, no padding or priority fields, NIOHTTP2 writes
    /// none) whose header block starts with `:status 200` from HPACK's static table (`0x88`,
    /// how NIOHPACK encodes it), after any dynamic table size updates.
    static func isOKHeaders(_ bytes: ByteBuffer, at frame: Int, length: Int) -> Bool {
        guard bytes.getInteger(at: frame + 3, as: UInt8.self)! == 0x1,
              bytes.getInteger(at: frame + 4, as: UInt8.self)! & 0x2c == 0x04,
              length + uniqueIDFieldSize <= minimumMaximumFrameSize else { return false }
        var at = frame + 9
        let end = at + length
        while at < end {
            let byte = bytes.getInteger(at: at, as: UInt8.self)!
            if byte == 0x88 { return true }
            guard byte & 0xe0 == 0x20 else { return false }  // 001xxxxx: a dynamic table size update
            at += 1
            if byte & 0x1f == 0x1f {  // the size goes on in 7-bit groups
                while at < end, bytes.getInteger(at: at, as: UInt8.self)! & 0x80 != 0 { at += 1 }
                at += 1
            }
        }
        return false
    }

    /// Copies `bytes` into the buffer, every complete 200 HEADERS frame (`isOKHeaders`) with
    /// `apns-unique-id` appended to its header block and its length grown to match.
    private func copyAddingUniqueIDs(_ bytes: ByteBuffer, firstFrame: Int) {
        let base = bytes.readerIndex
        let count = bytes.readableBytes
        var copied = 0
        var offset = firstFrame
        while count - offset >= 9 {
            let lengthAndType = bytes.getInteger(at: base + offset, as: UInt32.self)!
            let length = Int(lengthAndType >> 8)
            let end = offset + 9 + length
            guard end <= count else { break }
            if Self.isOKHeaders(bytes, at: base + offset, length: length) {
                copy(bytes, from: copied, to: offset)
                buffer!.writeInteger(lengthAndType + UInt32(Self.uniqueIDFieldSize) << 8)
                copy(bytes, from: offset + 4, to: end)
                let high = uniqueIDs!.next(), low = uniqueIDs!.next()
                buffer!.writeWithUnsafeMutableBytes(minimumWritableBytes: Self.uniqueIDFieldSize) { out in
                    let prefix = Self.uniqueIDFieldPrefix.count
                    Self.uniqueIDFieldPrefix.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: prefix) }
                    APNsID.formatUUID(high: high, low: low, into: UnsafeMutableRawBufferPointer(rebasing: out[prefix...]))
                    return Self.uniqueIDFieldSize
                }
                copied = end
            }
            offset = end
        }
        copy(bytes, from: copied, to: count)
    }

    /// Bytes `from..<to` of `bytes`' readable bytes, appended to the buffer.
    private func copy(_ bytes: ByteBuffer, from: Int, to: Int) {
        guard to > from else { return }
        bytes.withUnsafeReadableBytes { buffer!.writeBytes(UnsafeRawBufferPointer(rebasing: $0[from..<to])) }
    }

    private func add(_ next: EventLoopPromise<Void>?) {
        guard let next else { return }
        if let promise { promise.futureResult.cascade(to: next) } else { promise = next }
    }

    private func emitPending(context: ChannelHandlerContext) {
        guard let readable = buffer?.readableBytes, readable > 0 else { return }
        let pendingPromise = promise
        promise = nil
        context.write(wrapOutboundOut(.byteBuffer(buffer!)), promise: pendingPromise)
        // Only the indices move (no write to the storage TLS still holds until the flush).
        buffer!.moveReaderIndex(forwardBy: readable)
    }
}

/// `apns-unique-id` values for one connection: xoshiro256** (Blackman and Vigna), seeded with
/// 256 bits from the system's cryptographically secure generator when the connection opens;
/// each value takes 128 bits of it (122 after the UUID's version and variant), as a random
/// version-4 UUID does. Owned by one handler on one event loop: no lock, no system call per
/// value (the shared `RandomBytePool` took a lock per value and a `getrandom` per 16).
///
/// Unique per response, not unpredictable: two values collide only as two random 122-bit
/// UUIDs do (other connections start from independent seeds), but a client that reads four
/// of its own connection's values can compute that connection's next ones. That gives it
/// nothing: the gateway neither stores, logs nor accepts `apns-unique-id` (no lookup by it:
/// `tidings status` and the admin endpoint look pushes up by `apns-id`), and the value only
/// ever goes to the connection that sent the push. Were pushes ever looked up by it (Apple's
/// Push Notifications Console does), it would have to come from the secure generator.
struct UniqueIDGenerator {
    private var s0, s1, s2, s3: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        self.init(seed: (system.next(), system.next(), system.next(), system.next()))
    }

    /// A given seed (tests); all zero is the one state xoshiro cannot leave, so it is moved.
    init(seed: (UInt64, UInt64, UInt64, UInt64)) {
        (s0, s1, s2, s3) = seed
        if s0 | s1 | s2 | s3 == 0 { s0 = 1 }
    }

    mutating func next() -> UInt64 {
        let result = rotate(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = rotate(s3, 45)
        return result
    }

    private func rotate(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
}
