import Foundation
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import NIOSSL
import Synchronization
import TidingsCore

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
