import NIOCore
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

    public init(maximumFrameLength: Int = AppFraming.maximumFrameLength, helloTimeout: Duration = .seconds(10), maximumConnections: Int = 128) {
        self.maximumFrameLength = maximumFrameLength
        self.helloTimeout = helloTimeout
        self.maximumConnections = maximumConnections
    }

    /// `helloTimeout` on the event loop's clock, clamped to what it can count (±2⁶³ ns).
    var helloTimeAmount: TimeAmount {
        let (seconds, attoseconds) = helloTimeout.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .nanoseconds(seconds < 0 ? 0 : .max) }
        let (total, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        guard !overflow2 else { return .nanoseconds(seconds < 0 ? 0 : .max) }
        return .nanoseconds(max(total, 0))
    }
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

/// Splits the byte stream into frames (`AppFraming.next`) without buffering more than one
/// frame's worth: a length prefix over the limit is an error at once; so is a connection
/// whose first frame has not arrived within `firstFrameTimeout`.
final class AppFrameDecoder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let limit: Int
    private let firstFrameTimeout: TimeAmount?
    private var cumulation: ByteBuffer?
    private var firstFrameTimer: Scheduled<Void>?
    private var sawFrame = false
    private var failed = false

    init(limit: Int, firstFrameTimeout: TimeAmount?) {
        self.limit = limit
        self.firstFrameTimeout = firstFrameTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startTimer(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startTimer(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        firstFrameTimer?.cancel()
    }

    func channelInactive(context: ChannelHandlerContext) {
        firstFrameTimer?.cancel()
        cumulation = nil
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
        while var buffer = cumulation, !failed {
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
        // Keep only the unread bytes: at most one incomplete frame and its header.
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
