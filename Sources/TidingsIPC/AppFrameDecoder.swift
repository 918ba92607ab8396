import NIOCore
import Synchronization
import TidingsCore

/// What a peer of the app socket may make the daemon hold (docs/security.md, "App socket
/// and app identity (daemon)").
public struct AppSocketLimits: Sendable, Hashable {
    /// The largest frame body; a longer length prefix is refused before any of its body is
    /// buffered (a failure with id 0, then the connection closes). Default 16 MiB.
    public var maximumFrameLength: Int
    /// A connection that has not sent its first frame (`hello` or `adminHello`) within this
    /// is answered with a failure (id 0) and closed. Default 10 s.
    public var helloTimeout: Duration
    /// Connections open at once (apps, the CLI, service extensions); one more is answered
    /// with a failure (id 0) and closed at once. Default 128.
    public var maximumConnections: Int
    /// Requests of one connection decoded and not yet taken by the daemon (which handles a
    /// connection's requests one at a time, in order). At this many, the daemon stops
    /// reading the connection until it takes one. Default 256.
    public var maximumQueuedRequests: Int
    /// Bytes of those requests (frame bodies): a frame that would take them past this waits
    /// (the daemon stops reading) unless no other is queued. Default 16 MiB, one frame.
    public var maximumQueuedBytes: Int

    public init(maximumFrameLength: Int = AppFraming.maximumFrameLength, helloTimeout: Duration = .seconds(10), maximumConnections: Int = 128,
                maximumQueuedRequests: Int = 256, maximumQueuedBytes: Int = AppFraming.maximumFrameLength) {
        self.maximumFrameLength = maximumFrameLength
        self.helloTimeout = helloTimeout
        self.maximumConnections = maximumConnections
        self.maximumQueuedRequests = maximumQueuedRequests
        self.maximumQueuedBytes = maximumQueuedBytes
    }

    /// `helloTimeout` on the event loop's clock, clamped to what it can count (±2⁶³ ns).
    var helloTimeAmount: TimeAmount { .nanoseconds(max(helloTimeout.saturatingCount(perSecond: 1_000_000_000), 0)) }
}

/// Why the daemon refused a connection before or instead of reading a request.
public enum AppSocketRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    case frame(AppFraming.FrameError)
    case noHello(TimeAmount)
    case tooManyConnections(Int)

    public var description: String {
        switch self {
        case .frame(let error): "\(error); the connection is closed"
        case .noHello(let timeout): "no hello within \(timeout.nanoseconds / 1_000_000) ms of connecting; the connection is closed"
        case .tooManyConnections(let limit): "the notification daemon has \(limit) connections open, the most it accepts; try again later"
        }
    }

    /// The failure the daemon sends (reply id 0: no request has that id) before closing.
    public var failure: NotificationError {
        NotificationError(.invalidRequest, description)
    }
}

/// The requests of one connection that the decoder passed on and the daemon has not taken
/// yet (`AppSocketLimits.maximumQueuedRequests`, `maximumQueuedBytes`). Shared by the
/// decoder (on the event loop) and the connection's request sequence (in the handler's task).
final class RequestGate: Sendable {
    private struct State {
        var count = 0
        var bytes = 0
        /// The decoder holds a frame it may not pass on: it waits for `took`.
        var stalled = false
    }
    let maximumCount: Int
    let maximumBytes: Int
    private let state = Mutex(State())

    init(maximumCount: Int, maximumBytes: Int) {
        self.maximumCount = maximumCount
        self.maximumBytes = maximumBytes
    }

    /// Counts a frame of `bytes` in if there is room (fewer than `maximumCount` queued, and
    /// within `maximumBytes` or alone); otherwise remembers that the decoder waits.
    /// `force` counts it in regardless (the connection closed: no more can follow).
    func admit(_ bytes: Int, force: Bool = false) -> Bool {
        state.withLock { state in
            guard force || (state.count < maximumCount && (state.count == 0 || state.bytes + bytes <= maximumBytes)) else {
                state.stalled = true
                return false
            }
            state.count += 1
            state.bytes += bytes
            return true
        }
    }

    /// The daemon took a request of `bytes`. True when the decoder was waiting and may go
    /// on now (it is told once).
    func took(_ bytes: Int) -> Bool {
        state.withLock { state in
            state.count -= 1
            state.bytes -= bytes
            guard state.stalled, state.count < maximumCount else { return false }
            state.stalled = false
            return true
        }
    }

    var queued: (count: Int, bytes: Int, stalled: Bool) {
        state.withLock { ($0.count, $0.bytes, $0.stalled) }
    }
}

/// Splits the byte stream into frames (`AppFraming.next`) without buffering more than one
/// frame's worth: a length prefix over the limit is an error at once; so is a connection
/// whose first frame has not arrived within `firstFrameTimeout`. With a `gate` (the
/// daemon's side), a frame is passed on only while the gate has room; while it has none,
/// the frame (and the rest of the last read) stays here and the socket is not read (`read`
/// is held) until the daemon takes a request (`resume`).
final class AppFrameDecoder: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let limit: Int
    private let firstFrameTimeout: TimeAmount?
    private let gate: RequestGate?
    private var cumulation: ByteBuffer?
    private var firstFrameTimer: Scheduled<Void>?
    private var sawFrame = false
    private var failed = false
    /// Waiting for the gate: a whole frame is held, and reads are not passed on.
    private var stalled = false
    private var readHeld = false
    /// The channel closed: frames still held are passed on whatever the gate says.
    private var closing = false
    private var context: ChannelHandlerContext?

    init(limit: Int, firstFrameTimeout: TimeAmount?, gate: RequestGate? = nil) {
        self.limit = limit
        self.firstFrameTimeout = firstFrameTimeout
        self.gate = gate
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { startTimer(context: context) }
    }

    /// Reads wait while a frame waits for the gate.
    func read(context: ChannelHandlerContext) {
        if stalled {
            readHeld = true
        } else {
            context.read()
        }
    }

    /// The gate has room again (on the event loop): pass on what waited, then read again —
    /// from the pipeline's tail, so that any other handler holding reads (the back-pressure
    /// handler, for a peer that does not read its replies) still can.
    func resume() {
        guard let context, stalled else { return }
        stalled = false
        split(context: context)
        if !stalled, readHeld {
            readHeld = false
            context.channel.read()
        }
    }

    func channelActive(context: ChannelHandlerContext) {
        startTimer(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        firstFrameTimer?.cancel()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        firstFrameTimer?.cancel()
        if stalled {
            // The peer is gone, and NIO read what it had sent up to its end: those frames go
            // on past the gate (no more can come), so nothing sent before closing is lost.
            stalled = false
            closing = true
            split(context: context)
        }
        cumulation = nil
        self.context = nil
        context.fireChannelInactive()
    }

    private func startTimer(context: ChannelHandlerContext) {
        guard let timeout = firstFrameTimeout, !sawFrame, firstFrameTimer == nil else { return }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        firstFrameTimer = context.eventLoop.scheduleTask(in: timeout) {
            handler.value.fail(.noHello(timeout), context: bound.value)
        }
    }

    private func fail(_ refusal: AppSocketRefusal, context: ChannelHandlerContext) {
        guard !failed, !sawFrame || !refusal.isTimeout else { return }
        failed = true
        cumulation = nil
        firstFrameTimer?.cancel()
        context.fireErrorCaught(refusal)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        var incoming = unwrapInboundIn(data)
        if cumulation == nil {
            cumulation = incoming
        } else {
            cumulation!.writeBuffer(&incoming)
        }
        split(context: context)
    }

    /// Passes on the whole frames in `cumulation`, as far as the gate lets them.
    private func split(context: ChannelHandlerContext) {
        while var buffer = cumulation, !failed, !stalled {
            let next: AppFraming.Next
            do {
                next = try buffer.withUnsafeReadableBytes { bytes in try AppFraming.next(in: bytes, limit: limit) }
            } catch let error as AppFraming.FrameError {
                fail(.frame(error), context: context)
                return
            } catch {
                return
            }
            guard case .frame(let length) = next else { break }
            if let gate, !gate.admit(length, force: closing) {
                // Held here, with what follows it, until the daemon takes a request.
                stalled = true
                break
            }
            buffer.moveReaderIndex(forwardBy: AppFraming.headerLength)
            let frame = buffer.readSlice(length: length)!
            cumulation = buffer.readableBytes == 0 ? nil : buffer
            if !sawFrame {
                sawFrame = true
                firstFrameTimer?.cancel()
                firstFrameTimer = nil
            }
            context.fireChannelRead(wrapInboundOut(frame))
        }
        // Keep only the unread bytes: one incomplete frame and its header, or, while the gate
        // is full, the frames of the last read (reads are held until it has room).
        if var rest = cumulation, rest.readerIndex > 0 {
            rest.discardReadBytes()
            cumulation = rest
        }
    }
}

extension AppSocketRefusal {
    var isTimeout: Bool {
        if case .noHello = self { return true }
        return false
    }
}
