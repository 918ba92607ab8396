import Logging
import NIOCore
import NIOSSL
import NIOTLS
import Synchronization

/// One listener's bounds on connections it has not yet served: a total cap and a per-source
/// cap on open connections (checked at accept), and the accounting and logging of the
/// connections it refuses or times out (each counted in the metrics; logged at most once per
/// `connectionRefusalLogInterval`, with how many since).
final class ListenerGuard: Sendable {
    /// Why a connection was closed at accept.
    enum Refusal: Error, Hashable {
        case total, perAddress

        var metricLabel: String {
            switch self {
            case .total: "total_cap"
            case .perAddress: "per_address_cap"
            }
        }
    }

    private struct State {
        var open = 0
        var openByAddress: [String: Int] = [:]
        var unloggedEvents = 0
        var lastLogged: NIODeadline?
    }

    /// `provider`, `device` or `admin`: the metrics' `listener` label.
    let listener: String
    let maximumConnections: Int
    let maximumConnectionsPerAddress: Int
    private let logInterval: TimeAmount
    private let metrics: GatewayMetrics
    private let logger: Logger
    private let state = Mutex(State())

    init(listener: String, maximumConnections: Int = .max, maximumConnectionsPerAddress: Int = .max,
         logInterval: TimeAmount, metrics: GatewayMetrics, logger: Logger) {
        self.listener = listener
        self.maximumConnections = maximumConnections
        self.maximumConnectionsPerAddress = maximumConnectionsPerAddress
        self.logInterval = logInterval
        self.metrics = metrics
        self.logger = logger
    }

    /// Open connections now (admitted and not yet closed).
    var openConnections: Int { state.withLock { $0.open } }

    /// Counts `channel` (just accepted) against the caps, or returns the cap it would pass
    /// (the caller closes it). An admitted channel is counted until it closes.
    func admit(_ channel: any Channel) -> Refusal? {
        let address = channel.remoteAddress?.ipAddress ?? "unknown"
        let refusal: Refusal? = state.withLock { s in
            let fromAddress = s.openByAddress[address, default: 0]
            if s.open >= maximumConnections { return .total }
            if fromAddress >= maximumConnectionsPerAddress { return .perAddress }
            s.open += 1
            s.openByAddress[address] = fromAddress + 1
            return nil
        }
        guard let refusal else {
            channel.closeFuture.whenComplete { [self] _ in release(address) }
            return nil
        }
        metrics.recordRefusedConnection(listener: listener, reason: refusal.metricLabel)
        note("connection refused: \(refusal == .total ? "total" : "per-address") connection cap reached",
             ["listener": "\(listener)", "address": "\(address)", "open": "\(openConnections)"])
        return refusal
    }

    private func release(_ address: String) {
        state.withLock { s in
            s.open -= 1
            let left = s.openByAddress[address, default: 1] - 1
            s.openByAddress[address] = left > 0 ? left : nil
        }
    }

    /// A connection closed before it was served, for `reason` (`tls_handshake_timeout`,
    /// `preface_timeout`, `request_timeout`, `request_too_large`).
    func closedEarly(_ reason: String, _ channel: any Channel) {
        metrics.recordClosedConnection(listener: listener, reason: reason)
        note("connection closed: \(reason)",
             ["listener": "\(listener)", "address": "\(channel.remoteAddress?.ipAddress ?? "unknown")"])
    }

    /// Logs at most once per `logInterval`, with the number of such events since the last line.
    private func note(_ message: String, _ metadata: Logger.Metadata) {
        let count: Int? = state.withLock { s in
            s.unloggedEvents += 1
            let now = NIODeadline.now()
            if let last = s.lastLogged, now - last < logInterval { return nil }
            s.lastLogged = now
            defer { s.unloggedEvents = 0 }
            return s.unloggedEvents
        }
        guard let count else { return }
        var metadata = metadata
        metadata["events_since_last_log"] = "\(count)"
        logger.warning("\(message)", metadata: metadata)
    }
}

/// The first handler after TLS (or the first of all, without TLS) on a new connection: closes
/// it unless its TLS handshake completes within `tlsHandshakeTimeout` of accept and, when a
/// preface is awaited, the client's HTTP/2 connection preface and first frame (its SETTINGS)
/// arrive within `prefaceTimeout` of accept. Then it removes itself, so an established
/// connection pays nothing for it. Bytes pass through unchanged: NIOHTTP2 checks the
/// preface and the frame; this handler only counts them.
final class ConnectionStartDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", then a 9-byte frame header.
    static let prefaceLength = 24
    static let frameHeaderLength = 9

    private let listener: ListenerGuard
    private let tlsHandshakeTimeout: TimeAmount?
    private let prefaceTimeout: TimeAmount?
    private var handshakeDeadline: Scheduled<Void>?
    private var prefaceDeadline: Scheduled<Void>?
    private var started = false
    private var removed = false
    private var handshakeDone: Bool
    private var prefaceDone: Bool
    /// Bytes of the preface and first frame seen so far.
    private var prefaceBytesSeen = 0
    /// The first frame's payload length, read from its header's first three bytes.
    private var firstFrameLength = 0

    /// `tlsHandshakeTimeout` nil: no TLS below; `prefaceTimeout` nil: no preface awaited.
    init(listener: ListenerGuard, tlsHandshakeTimeout: TimeAmount?, prefaceTimeout: TimeAmount?) {
        self.listener = listener
        self.tlsHandshakeTimeout = tlsHandshakeTimeout
        self.prefaceTimeout = prefaceTimeout
        self.handshakeDone = tlsHandshakeTimeout == nil
        self.prefaceDone = prefaceTimeout == nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        handshakeDeadline?.cancel()
        prefaceDeadline?.cancel()
    }

    private func start(context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        if let tlsHandshakeTimeout, !handshakeDone {
            handshakeDeadline = context.eventLoop.scheduleTask(in: tlsHandshakeTimeout) {
                handler.value.expired("tls_handshake_timeout", context: bound.value)
            }
        }
        if let prefaceTimeout, !prefaceDone {
            prefaceDeadline = context.eventLoop.scheduleTask(in: prefaceTimeout) {
                handler.value.expired("preface_timeout", context: bound.value)
            }
        }
    }

    private func expired(_ reason: String, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        listener.closedEarly(reason, context.channel)
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            handshakeDone = true
            handshakeDeadline?.cancel()
            handshakeDeadline = nil
        }
        context.fireUserInboundEventTriggered(event)
        removeIfDone(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !prefaceDone { count(unwrapInboundIn(data)) }
        context.fireChannelRead(data)
        removeIfDone(context: context)
    }

    /// Counts the preface's bytes and the first frame's, reading its length on the way.
    private func count(_ buffer: ByteBuffer) {
        let lengthStart = Self.prefaceLength, lengthEnd = Self.prefaceLength + 3
        let first = prefaceBytesSeen, end = prefaceBytesSeen + buffer.readableBytes
        if first < lengthEnd, end > lengthStart {
            for position in max(first, lengthStart)..<min(end, lengthEnd) {
                let byte = buffer.getInteger(at: buffer.readerIndex + position - first, as: UInt8.self)!
                firstFrameLength = firstFrameLength << 8 | Int(byte)
            }
        }
        prefaceBytesSeen = end
        if prefaceBytesSeen >= lengthEnd, prefaceBytesSeen >= Self.prefaceLength + Self.frameHeaderLength + firstFrameLength {
            prefaceDone = true
            prefaceDeadline?.cancel()
            prefaceDeadline = nil
        }
    }

    private func removeIfDone(context: ChannelHandlerContext) {
        guard handshakeDone, prefaceDone, !removed else { return }
        removed = true
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
