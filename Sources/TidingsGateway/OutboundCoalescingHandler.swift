import NIOCore
import NIOHTTP2

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

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .byteBuffer(var bytes):
            fixGoAways(&bytes)
            guard bytes.readableBytes < Self.passThroughSize else {
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
            buffer!.writeBuffer(&bytes)
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
    private func fixGoAways(_ bytes: inout ByteBuffer) {
        let count = bytes.readableBytes
        if frameRemainder >= count {
            frameRemainder -= count
            return
        }
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
            }
            if end > count {
                frameRemainder = end - count
                return
            }
            offset = end
        }
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
