import Crypto
import Foundation
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import NIOSSL
import Synchronization
import TidingsCore

/// How to reach a gateway's device channel and who this device is.
public struct DeviceClientConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// The device key: keep it (e.g. `pemRepresentation`) to be the same device next time.
    public var deviceKey: P256.Signing.PrivateKey
    /// Certificates to trust (PEM files); empty: the system's roots.
    public var trustRootPaths: [String] = []
    /// The name to check the certificate against; `nil` for an IP address host.
    public var serverHostname: String?
    /// How long the TLS handshake and key proof may take.
    public var connectTimeout: TimeAmount = .seconds(10)
    /// The local address to connect from (load tests spread connections over several
    /// 127.x addresses); `nil`: the system's choice.
    public var localAddress: String?
    /// Keep-alive: a `ping` this often once welcomed (the gateway closes a connection that says
    /// nothing for its `deviceIdleTimeout`, 180 s by default). A ping still unanswered, with
    /// nothing else heard, when the next is due closes the connection (`Timeout`): a gateway
    /// gone without a word is noticed within two intervals. `nil`: no pings.
    public var pingInterval: TimeAmount? = .seconds(60)
    /// The longest message accepted from the gateway; a longer one closes the connection
    /// instead of being buffered (a push is at most a few tens of kB).
    public var maximumFrameLength: Int = 1 << 20
    /// Pushes received and not yet taken by the consumer (`pushes`), at most, and their payload
    /// bytes: at either the connection stops reading (TCP then pushes back on the gateway) until
    /// the consumer takes. One read is appended whole, so it may pass the bound by one read.
    public var maximumBufferedPushes: Int = DeviceClientConfiguration.defaultMaximumBufferedPushes
    public var maximumBufferedPayloadBytes: Int = DeviceClientConfiguration.defaultMaximumBufferedPayloadBytes
    public static let defaultMaximumBufferedPushes = 4_096
    public static let defaultMaximumBufferedPayloadBytes = 8 << 20

    public init(host: String, port: Int, deviceKey: P256.Signing.PrivateKey, trustRootPaths: [String] = []) {
        self.host = host
        self.port = port
        self.deviceKey = deviceKey
        self.trustRootPaths = trustRootPaths
        self.serverHostname = host.first.map { $0.isNumber || host.contains(":") } == true ? nil : host
    }
}

/// A later stage of a delivered push that the device reports (delivery inspection).
public struct DeviceDeliveryEvent: RawRepresentable, Sendable, Hashable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let presented = DeviceDeliveryEvent(rawValue: "presented")
    public static let answered = DeviceDeliveryEvent(rawValue: "answered")
}

/// A failure reported by the gateway or the connection.
public struct DeviceClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An APNs-style reason string (`BadTopic`, `BadDeviceKey`, `ConnectionClosed`, …).
    public var reason: String
    public var message: String
    public init(reason: String, message: String) {
        self.reason = reason
        self.message = message
    }
    public var description: String { "\(reason): \(message)" }
    public static let closed = DeviceClientError(reason: "ConnectionClosed", message: "the device channel is closed")
}

/// A connection from a device to a Tidings gateway's device channel (docs/device-protocol.md).
///
/// ```swift
/// let connection = try await DeviceConnection.connect(configuration)
/// let token = try await connection.requestToken(topic: "com.example.app", environment: .development)
/// for try await push in connection.pushes {
///     // … make it durable on the device, then:
///     connection.acknowledge(push)
/// }
/// ```
/// Pushes arrive in order, at least once: a push not acknowledged before the connection
/// ends comes again on the next connection, so dedupe by `apnsID` + `sequence`.
public final class DeviceConnection: Sendable {
    /// The gateway's id for this device (hex SHA-256 of its public key).
    public let deviceID: String
    /// Every push for this device, in order. The sequence ends when the connection closes
    /// (throwing if it failed) or the consuming task is cancelled. One consumer.
    public let pushes: DevicePushes

    private let channel: any Channel
    private let shared: DeviceConnectionShared

    init(deviceID: String, channel: any Channel, shared: DeviceConnectionShared, pushes: DevicePushes) {
        self.deviceID = deviceID
        self.channel = channel
        self.shared = shared
        self.pushes = pushes
    }

    /// Connects, proves possession of the device key, and returns once the gateway welcomed
    /// the device. Stored pushes start arriving on `pushes` right away.
    public static func connect(
        _ configuration: DeviceClientConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "tidings.device")
    ) async throws -> DeviceConnection {
        let sslContext = try TLSContexts.shared.context(trustRootPaths: configuration.trustRootPaths)
        let pushBuffer = DevicePushBuffer(maximumPushes: configuration.maximumBufferedPushes,
                                          maximumPayloadBytes: configuration.maximumBufferedPayloadBytes)
        let shared = DeviceConnectionShared(pushes: pushBuffer)
        let key = configuration.deviceKey
        let hostname = configuration.serverHostname
        let (pingInterval, maximumFrameLength) = (configuration.pingInterval, configuration.maximumFrameLength)
        let welcomed = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
            shared.setWelcome(continuation)
            var bootstrap = ClientBootstrap(group: eventLoopGroup)
            if let local = configuration.localAddress, let address = try? SocketAddress(ipAddress: local, port: 0) {
                bootstrap = bootstrap.bind(to: address)
            }
            let connect = bootstrap
                .connectTimeout(configuration.connectTimeout)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: hostname))
                        try sync.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes),
                                                                 maximumBufferSize: maximumFrameLength + 4))
                        try sync.addHandler(DeviceClientHandler(shared: shared, key: key, logger: logger, pingInterval: pingInterval))
                    }
                }
                .connect(host: configuration.host, port: configuration.port)
            connect.whenSuccess { channel in
                shared.setChannel(channel)
                channel.eventLoop.scheduleTask(in: configuration.connectTimeout) {
                    if shared.failWelcome(DeviceClientError(reason: "Timeout", message: "no welcome from the gateway")) {
                        channel.close(promise: nil)
                    }
                }
            }
            connect.whenFailure { error in _ = shared.failWelcome(error) }
        }
        guard let channel = shared.channel else { throw DeviceClientError.closed }
        return DeviceConnection(deviceID: welcomed, channel: channel, shared: shared, pushes: DevicePushes(buffer: pushBuffer))
    }

    /// Asks for the device token of an app topic (the bundle ID) in an environment. The same
    /// token comes back until the app is removed.
    public func requestToken(topic: String, environment: APNsEnvironment) async throws -> DeviceToken {
        let reply = try await request { id in .requestToken(requestID: id, topic: topic, environment: environment) }
        guard case .token(_, let hex) = reply else { throw DeviceClientError(reason: "ProtocolError", message: "unexpected \(reply)") }
        return try DeviceToken(hex: hex)
    }

    /// Tells the gateway the app was removed: its tokens die, and providers get
    /// `410 Unregistered` from now on.
    public func removeApp(topic: String) async throws {
        _ = try await request { id in .removeApp(requestID: id, topic: topic) }
    }

    /// Confirms a push is safely received; the gateway will not send it again. Acknowledgements
    /// made while the connection's event loop is busy go out together, as one `acks` message
    /// when the gateway accepts it (its `welcome` says so), else as `ack` messages in one write.
    public func acknowledge(_ push: DevicePush) { acknowledge(sequence: push.sequence) }

    public func acknowledge(sequence: Int64) {
        send(.ack(sequence: sequence))
    }

    /// Acknowledges pushes together (a burst made durable in one transaction): queued with
    /// one lock, sent in `acks` messages of at most 1,024 sequences.
    public func acknowledge(_ pushes: some Sequence<DevicePush>) {
        shared.enqueue(contentsOf: pushes.map { .ack(sequence: $0.sequence) }, on: channel)
    }

    /// Reports a later stage of a push (shown to the person, answered), without waiting.
    /// `sequence`: the push's, as its `push` message carried it (the gateway then finds the
    /// push by it; without, by searching the device's pushes for the apns-id). `occurredAt`:
    /// when it happened (milliseconds since 1970, this device's clock), which the gateway
    /// records; without, it records when the report arrived.
    public func report(_ event: DeviceDeliveryEvent, apnsID: String, sequence: Int64? = nil, occurredAt: Int64? = nil) {
        send(.event(apnsID: apnsID, event: event.rawValue, sequence: sequence, occurredAt: occurredAt))
    }

    /// Whether the gateway confirms delivery events (its `welcome` said `"events":true`).
    public var gatewayConfirmsEvents: Bool { shared.recordsEvents }

    /// Reports a later stage of a push and waits until the gateway has made it durable
    /// (`eventRecorded`); true then. A gateway that does not confirm events (older) gets it as
    /// `report` sends it: false, once sent. Throws when the connection ends first or the
    /// gateway could not record it: report it again (recording twice is harmless).
    @discardableResult
    public func record(_ event: DeviceDeliveryEvent, apnsID: String, sequence: Int64? = nil, occurredAt: Int64? = nil) async throws -> Bool {
        guard shared.recordsEvents else {
            report(event, apnsID: apnsID, sequence: sequence, occurredAt: occurredAt)
            return false
        }
        let reply = try await request { id in .event(apnsID: apnsID, event: event.rawValue, requestID: id, sequence: sequence, occurredAt: occurredAt) }
        guard case .eventRecorded = reply else { throw DeviceClientError(reason: "ProtocolError", message: "unexpected \(reply)") }
        return true
    }

    /// At most this many events in one `events` message: each is at most ≈ 140 bytes on the
    /// wire (a UUID, a stage, a sequence, a time), so a message stays far under the gateway's 64 KiB frame.
    public static let maximumEventsPerMessage = 256

    /// Reports several later stages at once and waits until the gateway has made them all
    /// durable (one `eventRecorded`); true then. To a gateway whose welcome did not say
    /// `"eventBatches":true` each goes as its own `record`, all at once (all confirmed: true; an
    /// older gateway that confirms none: false). At most `maximumEventsPerMessage` (more:
    /// `precondition`). Throws as `record` does, when any of them failed.
    @discardableResult
    public func record(_ events: [DeviceEventItem]) async throws -> Bool {
        precondition(events.count <= Self.maximumEventsPerMessage, "at most \(Self.maximumEventsPerMessage) events in one message")
        guard !events.isEmpty else { return true }
        guard shared.batchedEvents else {
            return try await withThrowingTaskGroup(of: Bool.self) { group in
                for e in events {
                    group.addTask {
                        try await self.record(DeviceDeliveryEvent(rawValue: e.event), apnsID: e.apnsID, sequence: e.sequence, occurredAt: e.occurredAt)
                    }
                }
                var confirmed = true
                for try await one in group { confirmed = confirmed && one }
                return confirmed
            }
        }
        let reply = try await request { id in .events(requestID: id, events: events) }
        guard case .eventRecorded = reply else { throw DeviceClientError(reason: "ProtocolError", message: "unexpected \(reply)") }
        return true
    }

    /// Closes the connection; `pushes` finishes.
    public func close() async {
        try? await channel.close()
    }

    /// Completes when the connection has closed.
    public func waitUntilClosed() async {
        try? await channel.closeFuture.get()
    }

    /// Queues a message; what is queued goes out in order, in one write per event-loop turn.
    private func send(_ message: DeviceMessage) {
        shared.enqueue(message, on: channel)
    }

    private func request(_ make: (Int64) -> DeviceMessage) async throws -> DeviceMessage {
        let id = shared.nextRequestID()
        let message = make(id)
        return try await withCheckedThrowingContinuation { continuation in
            guard shared.addPending(id, continuation) else {
                continuation.resume(throwing: DeviceClientError.closed)
                return
            }
            send(message)
        }
    }
}

/// State shared between the connection object and its channel handler.
final class DeviceConnectionShared: Sendable {
    private struct State {
        var welcome: CheckedContinuation<String, any Error>?
        var channel: (any Channel)?
        var pending: [Int64: CheckedContinuation<DeviceMessage, any Error>] = [:]
        var nextID: Int64 = 1
        var closed = false
        /// Messages waiting for the event loop, in order; `flushScheduled` while a task to
        /// write them is queued.
        var outbound: [DeviceMessage] = []
        var flushScheduled = false
        /// The gateway accepts `acks` (its `welcome` said so).
        var batchedAcks = false
        /// The gateway answers events that carry a request id (`eventRecorded`).
        var recordsEvents = false
        /// The gateway accepts `events` (several in one message).
        var batchedEvents = false
    }

    /// At most this many sequences in one `acks` message.
    static let maximumAcksPerMessage = 1024

    private let state = Mutex(State())
    let pushBuffer: DevicePushBuffer

    init(pushes: DevicePushBuffer) { self.pushBuffer = pushes }

    var channel: (any Channel)? { state.withLock { $0.channel } }

    func setWelcome(_ c: CheckedContinuation<String, any Error>) { state.withLock { $0.welcome = c } }
    func setChannel(_ channel: any Channel) { state.withLock { $0.channel = channel } }

    var recordsEvents: Bool { state.withLock { $0.recordsEvents } }
    var batchedEvents: Bool { state.withLock { $0.batchedEvents } }

    func welcome(_ deviceID: String, batchedAcks: Bool, recordsEvents: Bool, batchedEvents: Bool) {
        state.withLock { s in
            s.batchedAcks = batchedAcks
            s.recordsEvents = recordsEvents
            s.batchedEvents = batchedEvents && recordsEvents
            defer { s.welcome = nil }
            return s.welcome
        }?.resume(returning: deviceID)
    }

    func enqueue(_ message: DeviceMessage, on channel: any Channel) {
        enqueue(contentsOf: CollectionOfOne(message), on: channel)
    }

    func enqueue(contentsOf messages: some Collection<DeviceMessage>, on channel: any Channel) {
        guard !messages.isEmpty else { return }
        let schedule = state.withLock { s in
            s.outbound.append(contentsOf: messages)
            if s.flushScheduled { return false }
            s.flushScheduled = true
            return true
        }
        if schedule { channel.eventLoop.execute { self.writeQueued(to: channel) } }
    }

    /// On the event loop: everything queued, in order, as one buffer and one flush; runs of
    /// acknowledgements become `acks` messages when the gateway accepts them.
    private func writeQueued(to channel: any Channel) {
        let (messages, batchedAcks) = state.withLock { s in
            s.flushScheduled = false
            var taken: [DeviceMessage] = []
            swap(&taken, &s.outbound)
            return (taken, s.batchedAcks)
        }
        var frames: [UInt8] = []
        var acks: [Int64] = []
        func appendAcks() {
            if acks.count == 1 { DeviceMessage.ack(sequence: acks[0]).appendFrame(to: &frames) }
            if acks.count > 1 { DeviceMessage.acks(sequences: acks).appendFrame(to: &frames) }
            acks.removeAll(keepingCapacity: true)
        }
        for message in messages {
            if batchedAcks, case .ack(let sequence) = message {
                acks.append(sequence)
                if acks.count == Self.maximumAcksPerMessage { appendAcks() }
                continue
            }
            appendAcks()
            message.appendFrame(to: &frames)
        }
        appendAcks()
        guard !frames.isEmpty else { return }
        channel.writeAndFlush(channel.allocator.buffer(bytes: frames), promise: nil)
    }

    /// Fails the pending connect; true when it was still pending.
    func failWelcome(_ error: any Error) -> Bool {
        guard let c = state.withLock({ s in defer { s.welcome = nil }; return s.welcome }) else { return false }
        c.resume(throwing: error)
        return true
    }

    func nextRequestID() -> Int64 { state.withLock { s in defer { s.nextID += 1 }; return s.nextID } }

    func addPending(_ id: Int64, _ c: CheckedContinuation<DeviceMessage, any Error>) -> Bool {
        state.withLock { s in
            if s.closed { return false }
            s.pending[id] = c
            return true
        }
    }

    func answer(_ id: Int64, with result: Result<DeviceMessage, any Error>) {
        state.withLock { $0.pending.removeValue(forKey: id) }?.resume(with: result)
    }

    func closed(_ error: (any Error)?) {
        let (welcome, pending) = state.withLock { s in
            s.closed = true
            defer { s.welcome = nil; s.pending.removeAll() }
            return (s.welcome, Array(s.pending.values))
        }
        welcome?.resume(throwing: error ?? DeviceClientError.closed)
        for p in pending { p.resume(throwing: error ?? DeviceClientError.closed) }
        pushBuffer.finish(error)
    }
}

final class DeviceClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let shared: DeviceConnectionShared
    private let key: P256.Signing.PrivateKey
    private let logger: Logger
    private var failure: (any Error)?
    /// Pushes decoded in this read burst: handed to the consumer together at
    /// `channelReadComplete` (one lock and at most one wake-up per burst, not per push).
    private var received: [DevicePush] = []
    private let pingInterval: TimeAmount?
    private var keepAlive: RepeatedTask?
    /// Something arrived since the last ping went out; `pinged`: a ping is out.
    private var heard = false
    private var pinged = false
    private var nextPingID: Int64 = 1
    /// A read held back because the push buffer is full; made when the consumer takes.
    private var readHeld = false

    init(shared: DeviceConnectionShared, key: P256.Signing.PrivateKey, logger: Logger, pingInterval: TimeAmount?) {
        self.shared = shared
        self.key = key
        self.logger = logger
        self.pingInterval = pingInterval
    }

    /// After the welcome (the gateway accepts nothing but `hello` before): a ping every
    /// interval; one unanswered, with nothing else heard, by the next closes the connection.
    private func startKeepAlive(context: ChannelHandlerContext) {
        guard let interval = pingInterval, interval.nanoseconds > 0, keepAlive == nil else { return }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        keepAlive = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            handler.value.keepAliveTick(context: bound.value)
        }
    }

    private func keepAliveTick(context: ChannelHandlerContext) {
        // While reads are held back (the consumer is behind), an unread pong is not the gateway's silence.
        if pinged, !heard, !readHeld {
            failure = DeviceClientError(reason: "Timeout", message: "the gateway did not answer a ping")
            logger.warning("the gateway did not answer a ping; closing the device channel")
            context.close(promise: nil)
            return
        }
        heard = false
        pinged = true
        write(.ping(nextPingID), context: context)
        nextPingID &+= 1
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        heard = true
        let buffer = unwrapInboundIn(data)
        let message: DeviceMessage
        do { message = try DeviceMessage(decoding: buffer.readableBytesView) } catch {
            failure = DeviceClientError(reason: "ProtocolError", message: error.message)
            context.close(promise: nil)
            return
        }
        switch message {
        case .challenge(let nonce):
            do {
                let signature = try DeviceChallenge.sign(nonce: nonce, with: key)
                let hello = DeviceMessage.hello(publicKey: Array(key.publicKey.x963Representation), signature: signature)
                write(hello, context: context)
            } catch {
                failure = error
                context.close(promise: nil)
            }
        case .welcome(let deviceID, let batchedAcks, let recordsEvents, let batchedEvents):
            shared.welcome(deviceID, batchedAcks: batchedAcks, recordsEvents: recordsEvents, batchedEvents: batchedEvents)
            startKeepAlive(context: context)
        case .push(let push):
            received.append(push)
        case .token(let id, _), .appRemoved(let id), .eventRecorded(let id):
            shared.answer(id, with: .success(message))
        case .error(let id?, let reason, let text):
            shared.answer(id, with: .failure(DeviceClientError(reason: reason, message: text)))
        case .error(nil, let reason, let text):
            failure = DeviceClientError(reason: reason, message: text)
            logger.warning("gateway closed the device channel", metadata: ["reason": "\(reason)", "message": "\(text)"])
        case .ping(let n):
            write(.pong(n), context: context)
        default:
            break
        }
    }

    /// One framed message (the pipeline has no length prepender).
    private func write(_ message: DeviceMessage, context: ChannelHandlerContext) {
        var frame: [UInt8] = []
        message.appendFrame(to: &frame)
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: frame)), promise: nil)
    }

    /// Reads only while the push buffer has room; a full buffer holds the read until the
    /// consumer takes (backpressure: the socket is not read, TCP's window closes).
    func read(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let mayRead = shared.pushBuffer.mayRead {
            eventLoop.execute { handler.value.resumeReading(context: bound.value) }
        }
        if mayRead { context.read() } else { readHeld = true }
    }

    private func resumeReading(context: ChannelHandlerContext) {
        guard readHeld else { return }
        readHeld = false
        read(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        deliverReceived()
        context.fireChannelReadComplete()
    }

    private func deliverReceived() {
        guard !received.isEmpty else { return }
        // The burst is handed over, not shared: the consumer owns its array alone (reversing
        // it in place copies no push), and the next burst gets a buffer of its own.
        var burst: [DevicePush] = []
        burst.reserveCapacity(received.count)
        swap(&burst, &received)
        shared.pushBuffer.append(burst)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Pushes decoded before the connection ended still reach the consumer, then the end.
        keepAlive?.cancel()
        keepAlive = nil
        deliverReceived()
        shared.closed(failure)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = error }
        context.close(promise: nil)
    }
}

/// One TLS context per set of trust roots, shared by every connection of the process
/// (a context holds the parsed roots; a load test opens 100,000 connections).
final class TLSContexts: Sendable {
    static let shared = TLSContexts()
    private let contexts = Mutex<[[String]: NIOSSLContext]>([:])

    func context(trustRootPaths: [String]) throws -> NIOSSLContext {
        if let existing = contexts.withLock({ $0[trustRootPaths] }) { return existing }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if !trustRootPaths.isEmpty {
            tls.trustRoots = .certificates(try trustRootPaths.flatMap { try NIOSSLCertificate.fromPEMFile($0) })
        }
        let context = try NIOSSLContext(configuration: tls)
        contexts.withLock { $0[trustRootPaths] = context }
        return context
    }
}

/// The pushes of a connection, in order (`DeviceConnection.pushes`): an `AsyncSequence` like
/// `AsyncThrowingStream`, ending when the connection closes (throwing if it failed) or the
/// consuming task is cancelled. The consumer takes everything buffered at once: a read burst
/// of pushes costs one lock and at most one wake-up, not a stream's lock and generic
/// bookkeeping per push. One consumer.
public struct DevicePushes: AsyncSequence, Sendable {
    public typealias Element = DevicePush
    let buffer: DevicePushBuffer

    public func makeAsyncIterator() -> Iterator { Iterator(buffer: buffer) }

    /// The oldest pushes received and not yet taken, in order, as many as fit: at most
    /// `maximumPushes`, with at most `maximumPayloadBytes` of payload together — the first one
    /// whatever its size when `firstAlways`, else none (an empty array) when it alone does not
    /// fit. Nil when the connection has ended. Waits while nothing is pending. For a consumer
    /// with bounded room of its own; what it leaves stays buffered, and a full buffer stops
    /// the connection reading (`DeviceClientConfiguration.maximumBufferedPushes`).
    public func take(maximumPushes: Int, maximumPayloadBytes: Int, firstAlways: Bool) async throws -> [DevicePush]? {
        try await buffer.take(DevicePushBuffer.Room(pushes: maximumPushes, payloadBytes: maximumPayloadBytes, atLeastOne: firstAlways))
    }

    /// The same pushes as the bursts they came in: each element is everything received since
    /// the consumer last took (one read, or several while it was busy, e.g. committing the
    /// previous burst), in order, never empty. Use either this or the pushes one by one.
    public var bursts: DevicePushBursts { DevicePushBursts(buffer: buffer) }

    public struct Iterator: AsyncIteratorProtocol {
        let buffer: DevicePushBuffer
        /// Taken from the buffer, not yet returned (in reverse: `popLast` is the next).
        private var taken: [DevicePush] = []

        init(buffer: DevicePushBuffer) { self.buffer = buffer }

        public mutating func next() async throws -> DevicePush? {
            if let push = taken.popLast() { return push }
            taken = try await buffer.take()
            taken.reverse()
            return taken.popLast()
        }
    }
}

/// `DevicePushes.bursts`: the connection's pushes, a burst at a time.
public struct DevicePushBursts: AsyncSequence, Sendable {
    public typealias Element = [DevicePush]
    let buffer: DevicePushBuffer

    public func makeAsyncIterator() -> Iterator { Iterator(buffer: buffer) }

    public struct Iterator: AsyncIteratorProtocol {
        let buffer: DevicePushBuffer

        public mutating func next() async throws -> [DevicePush]? {
            let burst = try await buffer.take()
            return burst.isEmpty ? nil : burst
        }
    }
}

/// Between the channel handler (appends a burst) and the consumer (takes all there is, or a
/// prefix within its own room). Bounded: once `maximumPushes` or `maximumPayloadBytes` are
/// pending, the handler stops reading the connection (`mayRead`) until the consumer takes, so
/// a consumer that cannot keep up makes TCP push back on the gateway instead of this buffer
/// growing. What one read brought is appended whole, so the bound can be passed by one read.
final class DevicePushBuffer: Sendable {
    private struct State {
        var pending: [DevicePush] = []
        /// The payload bytes of `pending`.
        var pendingBytes = 0
        /// Set while the handler holds a read because the buffer was full: called (once) when
        /// the consumer takes.
        var resumeReading: (@Sendable () -> Void)?
        var waiter: CheckedContinuation<[DevicePush], any Error>?
        /// The connection ended: nil when it was clean (or the failure was already thrown).
        var finished = false
        var failure: (any Error)?
        var cancelled = false
    }

    private let state = Mutex(State())
    let maximumPushes: Int
    let maximumPayloadBytes: Int

    init(maximumPushes: Int = DeviceClientConfiguration.defaultMaximumBufferedPushes,
         maximumPayloadBytes: Int = DeviceClientConfiguration.defaultMaximumBufferedPayloadBytes) {
        self.maximumPushes = max(1, maximumPushes)
        self.maximumPayloadBytes = max(1, maximumPayloadBytes)
    }

    func append(_ pushes: consuming [DevicePush]) {
        // Moved, never copied: the consumer's array is then its alone.
        var pushes = pushes
        let waiter = state.withLock { s -> CheckedContinuation<[DevicePush], any Error>? in
            if s.finished || s.cancelled { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return waiter
            }
            s.pendingBytes += pushes.reduce(0) { $0 + $1.payload.count }
            if s.pending.isEmpty { swap(&s.pending, &pushes) } else { s.pending.append(contentsOf: pushes) }
            return nil
        }
        waiter?.resume(returning: pushes)
    }

    /// Whether the handler may read more now. False when the buffer is full: then `resume` is
    /// called once the consumer has taken (from whichever thread takes), and not before.
    func mayRead(resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { s in
            if s.finished || s.cancelled || (s.pending.count < maximumPushes && s.pendingBytes < maximumPayloadBytes) { return true }
            s.resumeReading = resume
            return false
        }
    }

    /// Whether a consumer waits (tests).
    var waiting: Bool { state.withLock { $0.waiter != nil } }

    /// How many pushes and payload bytes are pending (tests).
    var pendingCount: (pushes: Int, payloadBytes: Int) { state.withLock { ($0.pending.count, $0.pendingBytes) } }

    /// No more pushes; what is pending is still taken first, then `error` is thrown once.
    func finish(_ error: (any Error)?) {
        let waiter = state.withLock { s -> CheckedContinuation<[DevicePush], any Error>? in
            if s.finished { return nil }
            s.finished = true
            // A waiter means nothing is pending: it gets the end now, else `take` does later.
            guard let waiter = s.waiter else {
                s.failure = error
                return nil
            }
            s.waiter = nil
            return waiter
        }
        guard let waiter else { return }
        if let error { waiter.resume(throwing: error) } else { waiter.resume(returning: []) }
    }

    /// Everything pending; empty when the sequence has ended. Waits while there is nothing.
    func take() async throws -> [DevicePush] {
        try await take(Room(pushes: .max, payloadBytes: .max, atLeastOne: true)) ?? []
    }

    /// What a consumer has room for: at most `pushes` pushes of at most `payloadBytes` payload
    /// bytes together; `atLeastOne`: the first push even if its payload alone is larger.
    struct Room: Sendable {
        var pushes: Int
        var payloadBytes: Int
        var atLeastOne: Bool
    }

    /// The oldest pending pushes that fit in `room`, in order: empty when the first does not
    /// fit (and `atLeastOne` is false); nil when the sequence has ended (or the consumer was
    /// cancelled). Waits while nothing is pending.
    func take(_ room: Room) async throws -> [DevicePush]? {
        if let ready = state.withLock({ Self.ready(&$0, room) }) { return try ready.get() }
        return try await withTaskCancellationHandler {
            let taken = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[DevicePush], any Error>) in
                let ready = state.withLock { s -> Result<[DevicePush]?, any Error>? in
                    if let ready = Self.ready(&s, room) { return ready }
                    s.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready.map { $0 ?? [] }) }
            }
            // Empty: the end. Else handed over by `append` directly: what does not fit goes back, in front.
            if taken.isEmpty { return nil }
            let fit = Self.fitting(taken, room)
            if fit < taken.count { putBack(taken[fit...]) }
            return Array(taken[..<fit])
        } onCancel: {
            let waiter = state.withLock { s in
                s.cancelled = true
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(returning: [])
        }
    }

    /// How many of `pushes`, from the first, fit in `room`.
    private static func fitting(_ pushes: some Collection<DevicePush>, _ room: Room) -> Int {
        var count = 0, bytes = 0
        for push in pushes {
            guard count < room.pushes else { break }
            bytes += push.payload.count
            if bytes > room.payloadBytes, !(count == 0 && room.atLeastOne) { break }
            count += 1
        }
        return count
    }

    /// Pushes handed to a waiting consumer that did not fit its room: pending again, first.
    private func putBack(_ pushes: ArraySlice<DevicePush>) {
        state.withLock { s in
            if s.cancelled { return }
            s.pending.insert(contentsOf: pushes, at: 0)
            s.pendingBytes += pushes.reduce(0) { $0 + $1.payload.count }
        }
    }

    /// What `take` returns without waiting, if anything. Taking makes room: a held read resumes.
    private static func ready(_ s: inout State, _ room: Room) -> Result<[DevicePush]?, any Error>? {
        if s.cancelled { return .success(nil) }
        if !s.pending.isEmpty {
            let fit = fitting(s.pending, room)
            var taken: [DevicePush] = []
            if fit == s.pending.count {
                swap(&taken, &s.pending)
                s.pendingBytes = 0
            } else {
                taken = Array(s.pending[..<fit])
                s.pending.removeFirst(fit)
                s.pendingBytes -= taken.reduce(0) { $0 + $1.payload.count }
            }
            if fit > 0, let resume = s.resumeReading {
                s.resumeReading = nil
                resume()
            }
            return .success(taken)
        }
        if s.finished {
            if let failure = s.failure {
                s.failure = nil
                return .failure(failure)
            }
            return .success(nil)
        }
        return nil
    }
}
