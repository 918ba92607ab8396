import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import NIOSSL
import NIOTLS
import Testing
import TidingsCore
@testable import TidingsGateway

/// The provider and device listeners before HTTP/2 or the device protocol begins: the TLS
/// handshake and HTTP/2 preface deadlines, the total and per-address connection caps
/// (docs/security.md, "Provider listener"). Deadlines are tiny configured intervals; a
/// connection that must stay open is checked after several of them passed.
@Suite("Listener limits", .serialized)
struct ListenerLimitsTests {
    /// The client's HTTP/2 connection preface and an empty SETTINGS frame.
    static let prefaceAndSettings: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]

    // MARK: Deadlines

    @Test func aConnectionThatNeverStartsTLSIsClosedAtTheHandshakeDeadline() async throws {
        let h = try await GatewayHarness.start { c in
            c.tlsHandshakeTimeout = .milliseconds(200)
            c.providerPrefaceTimeout = .seconds(60)
        }
        let silent = try await RawClient.connect(port: h.providerPort)
        #expect(await silent.closed(within: .seconds(5)), "closed at the TLS handshake deadline")
        #expect(h.metricsText.contains(#"tidings_gateway_connections_closed_early_total{listener="provider",reason="tls_handshake_timeout"} 1"#))
        await h.stop()
    }

    @Test func aTLSConnectionThatNeverSendsThePrefaceIsClosedAtThePrefaceDeadline() async throws {
        let h = try await GatewayHarness.start { c in
            c.tlsHandshakeTimeout = .seconds(60)
            c.providerPrefaceTimeout = .seconds(1)
        }
        let handshaken = try await RawClient.connect(port: h.providerPort, tls: true)
        #expect(await handshaken.closed(within: .seconds(5)), "closed at the preface deadline, though its TLS handshake completed")
        #expect(h.metricsText.contains(#"tidings_gateway_connections_closed_early_total{listener="provider",reason="preface_timeout"} 1"#))
        await h.stop()
    }

    @Test func aCleartextConnectionWithHalfAPrefaceIsClosedAtThePrefaceDeadline() async throws {
        let h = try await GatewayHarness.start { c in
            c.providerTransport = .cleartext
            c.providerPrefaceTimeout = .milliseconds(300)
        }
        // The preface and the SETTINGS frame's header, not its last byte... of a 6-byte payload.
        // Sent with the connect: sent from the test's task after `connect` returned, it raced
        // the 300 ms deadline (a stalled cooperative pool resumed the task after the server
        // had closed the connection, and the send failed).
        var bytes = Self.prefaceAndSettings
        bytes[26] = 6
        let partial = try await RawClient.connect(port: h.providerPort, sending: bytes + [0, 3, 0, 0])
        #expect(await partial.closed(within: .seconds(5)))
        await h.stop()
    }

    @Test(arguments: [true, false])
    func clientsThatStartInTimeAreServedLongAfterTheDeadlines(tls: Bool) async throws {
        let h = try await GatewayHarness.start { c in
            c.providerTransport = tls ? .tls : .cleartext
            c.tlsHandshakeTimeout = .seconds(1)
            c.providerPrefaceTimeout = .seconds(1)
        }
        let token = try await h.deviceToken()
        let c = try await h.connect(tls: tls)
        try await Task.sleep(for: .milliseconds(1500))
        let r = try await c.send(h.request(token: token, authorization: try h.bearer()))
        #expect(r.status == 200)
        #expect(!h.metricsText.contains("tidings_gateway_connections_closed_early_total{listener=\"provider\""))
        await c.close()
        await h.stop()
    }

    @Test func aDeviceConnectionThatNeverStartsTLSIsClosedAtTheHandshakeDeadline() async throws {
        let h = try await GatewayHarness.start { c in
            c.tlsHandshakeTimeout = .seconds(1)
            c.deviceHandshakeTimeout = .seconds(60)
        }
        let silent = try await RawClient.connect(port: h.devicePort)
        #expect(await silent.closed(within: .seconds(5)))
        #expect(h.metricsText.contains(#"tidings_gateway_connections_closed_early_total{listener="device",reason="tls_handshake_timeout"} 1"#))
        // A device that shakes hands in time is served after the deadline passed.
        let device = try await h.device()
        try await Task.sleep(for: .milliseconds(1500))
        _ = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        await device.close()
        await h.stop()
    }

    /// The handler alone, on embedded time: the preface and SETTINGS in pieces (one split
    /// inside the frame's length) complete it and it leaves the pipeline; one byte short, the
    /// connection closes at the deadline.
    @Test func thePrefaceDeadlineCountsThePrefaceAndTheFirstFrame() throws {
        let listener = ListenerGuard(listener: "provider", logInterval: .seconds(10), metrics: GatewayMetrics(), logger: .init(label: "test"))
        var settings = Self.prefaceAndSettings
        settings[26] = 6  // a 6-byte payload: one setting
        settings += [0, 3, 0, 0, 0, 100]

        for short in [false, true] {
            let loop = EmbeddedEventLoop()
            let channel = EmbeddedChannel(loop: loop)
            let handler = ConnectionStartDeadlineHandler(listener: listener, tlsHandshakeTimeout: nil, prefaceTimeout: .seconds(5))
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            let bytes = short ? Array(settings.dropLast()) : settings
            for piece in [bytes[0..<25], bytes[25..<30], bytes[30...]] {
                try channel.writeInbound(ByteBuffer(bytes: piece))
            }
            loop.advanceTime(by: .seconds(4))
            #expect(channel.isActive)
            loop.advanceTime(by: .seconds(2))
            #expect(channel.isActive == !short, "short: closed at the deadline; complete: left open")
            if !short {
                #expect((try? channel.pipeline.syncOperations.handler(type: ConnectionStartDeadlineHandler.self)) == nil,
                        "the handler leaves the pipeline once the first frame is in")
            }
            // The bytes pass through unchanged.
            var passed: [UInt8] = []
            while var b = try channel.readInbound(as: ByteBuffer.self) { passed += b.readBytes(length: b.readableBytes)! }
            #expect(passed == bytes)
            _ = try? channel.finish()
        }
    }

    // MARK: Caps

    /// Refusals are counted each time but logged at most once per interval, with how many
    /// there were since the last line; closing an admitted connection makes room again.
    @Test func refusalsAreLoggedAtMostOncePerInterval() throws {
        let lines = NIOLockedValueBox<[Logger.Metadata]>([])
        let logger = Logger(label: "test") { _ in CollectingLogHandler(lines: lines) }
        let metrics = GatewayMetrics()
        let listener = ListenerGuard(listener: "provider", maximumConnections: 1, logInterval: .seconds(3600), metrics: metrics, logger: logger)
        func channel() throws -> EmbeddedChannel {
            let c = EmbeddedChannel()
            c.remoteAddress = try SocketAddress(ipAddress: "127.0.0.9", port: 1)
            return c
        }
        let admitted = try channel()
        #expect(listener.admit(admitted) == nil)
        for _ in 0..<5 { #expect(listener.admit(try channel()) == .total) }
        #expect(lines.withLockedValue { $0.count } == 1, "one line for five refusals within the interval")
        #expect(lines.withLockedValue { $0.first?["events_since_last_log"] } == "1")
        #expect(String(decoding: metrics.exposition(), as: UTF8.self)
            .contains(#"tidings_gateway_connections_refused_total{listener="provider",reason="total_cap"} 5"#))
        _ = try admitted.finish()
        #expect(listener.openConnections == 0)
        #expect(listener.admit(try channel()) == nil)
    }

    @Test func pastTheTotalCapAConnectionIsClosedAtOnceAndOpenOnesAreServed() async throws {
        let h = try await GatewayHarness.start { c in
            c.providerTransport = .cleartext
            c.maximumProviderConnections = 3
            c.maximumProviderConnectionsPerAddress = 100
        }
        let token = try await h.deviceToken()
        let good = try await h.connect(tls: false)
        var junk = [try await RawClient.connect(port: h.providerPort), try await RawClient.connect(port: h.providerPort)]
        // At the cap: all three stay open.
        try await Task.sleep(for: .milliseconds(300))
        #expect(junk.allSatisfy { $0.isOpen })
        // Past it: closed at once.
        let refused = try await RawClient.connect(port: h.providerPort)
        #expect(await refused.closed(within: .seconds(2)))
        #expect(h.metricsText.contains(#"tidings_gateway_connections_refused_total{listener="provider",reason="total_cap"} 1"#))
        // The connection that was open is still served.
        #expect(try await good.send(h.request(token: token, authorization: try h.bearer())).status == 200)
        // A closed connection makes room for a new one (once the gateway has seen the close).
        await junk.removeLast().close()
        var admitted: RawClient?
        for _ in 0..<20 where admitted == nil {
            let next = try await RawClient.connect(port: h.providerPort)
            try await Task.sleep(for: .milliseconds(250))
            if next.isOpen { admitted = next }
        }
        #expect(admitted != nil)
        await admitted?.close()
        for j in junk { await j.close() }
        await good.close()
        await h.stop()
    }

    @Test func pastThePerAddressCapOnlyThatAddressIsRefused() async throws {
        let h = try await GatewayHarness.start { c in
            c.maximumProviderConnections = 100
            c.maximumProviderConnectionsPerAddress = 2
        }
        let token = try await h.deviceToken()
        // Idle junk from 127.0.0.2: two stay open (at the cap), the third is closed at once.
        let junk = [try await RawClient.connect(port: h.providerPort, from: "127.0.0.2"),
                    try await RawClient.connect(port: h.providerPort, from: "127.0.0.2")]
        let refused = try await RawClient.connect(port: h.providerPort, from: "127.0.0.2")
        #expect(await refused.closed(within: .seconds(2)))
        #expect(junk.allSatisfy { $0.isOpen })
        #expect(h.metricsText.contains(#"tidings_gateway_connections_refused_total{listener="provider",reason="per_address_cap"} 1"#))
        // A provider on another address connects and pushes.
        let good = try await h.connect()
        #expect(try await good.send(h.request(token: token, authorization: try h.bearer())).status == 200)
        await good.close()
        for j in junk { await j.close() }
        await h.stop()
    }
}

extension GatewayHarness {
    /// The gateway's Prometheus text.
    var metricsText: String { String(decoding: gateway.core.metrics.exposition(), as: UTF8.self) }

    /// A token for the harness's app from a device that then goes offline.
    func deviceToken() async throws -> String {
        let device = try await device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        await device.close()
        return token
    }
}

/// A bare TCP (optionally TLS) client: sends bytes, collects what comes back, tells whether
/// the server closed it.
final class RawClient: Sendable {
    let channel: any Channel
    private let received: NIOLockedValueBox<[UInt8]>

    private init(channel: any Channel, received: NIOLockedValueBox<[UInt8]>) {
        self.channel = channel
        self.received = received
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let sink: @Sendable ([UInt8]) -> Void
        let handshake: EventLoopPromise<Void>?
        init(sink: @escaping @Sendable ([UInt8]) -> Void, handshake: EventLoopPromise<Void>?) {
            self.sink = sink
            self.handshake = handshake
        }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            sink(buffer.readBytes(length: buffer.readableBytes) ?? [])
        }
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let event = event as? TLSUserEvent, case .handshakeCompleted = event { handshake?.succeed(()) }
            context.fireUserInboundEventTriggered(event)
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            handshake?.fail(error)
            context.close(promise: nil)
        }
        func channelInactive(context: ChannelHandlerContext) {
            handshake?.fail(ChannelError.ioOnClosedChannel)
            context.fireChannelInactive()
        }
    }

    /// Connects from `from` (a loopback address) to 127.0.0.1:`port`; with `tls`, waits for
    /// the TLS handshake (ALPN h2, the certificate not checked) and sends nothing more.
    /// `sending` goes out on the event loop as soon as the connection is up, not after the
    /// test's task resumes: a server deadline counted from accept cannot pass before it.
    static func connect(port: Int, from: String? = nil, tls: Bool = false, sending first: [UInt8]? = nil) async throws -> RawClient {
        let received = NIOLockedValueBox<[UInt8]>([])
        let group = MultiThreadedEventLoopGroup.singleton
        let handshake: EventLoopPromise<Void>? = tls ? group.next().makePromise() : nil
        var bootstrap = ClientBootstrap(group: group)
        if let from { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: from, port: 0)) }
        let sslContext: NIOSSLContext? = try tls ? {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            configuration.applicationProtocols = ["h2"]
            return try NIOSSLContext(configuration: configuration)
        }() : nil
        let channel = try await bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                if let sslContext { try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: nil)) }
                try channel.pipeline.syncOperations.addHandler(Collector(sink: { bytes in received.withLockedValue { $0 += bytes } }, handshake: handshake))
            }
        }.connect(host: "127.0.0.1", port: port).flatMap { channel in
            guard let first else { return channel.eventLoop.makeSucceededFuture(channel) }
            return channel.writeAndFlush(ByteBuffer(bytes: first)).map { channel }
        }.get()
        if let handshake { try await handshake.futureResult.get() }
        return RawClient(channel: channel, received: received)
    }

    var isOpen: Bool { channel.isActive }
    var bytes: [UInt8] { received.withLockedValue { $0 } }
    var text: String { String(decoding: bytes, as: UTF8.self) }

    func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
    }

    func send(_ text: String) async throws { try await send(Array(text.utf8)) }

    /// Whether the server closed the connection within `limit`.
    func closed(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if !channel.isActive { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return !channel.isActive
    }

    /// Waits until `text` contains `string` (or `limit` passes).
    func wait(for string: String, within limit: Duration = .seconds(5)) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if text.contains(string) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return text.contains(string)
    }

    func close() async { try? await channel.close() }
}

/// Keeps the metadata of every line logged.
struct CollectingLogHandler: LogHandler {
    let lines: NIOLockedValueBox<[Logger.Metadata]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        lines.withLockedValue { $0.append(metadata.merging(event.metadata ?? [:]) { $1 }) }
    }
}
