import Crypto
import Dispatch
import Foundation
import NIOCore
import NIOExtras
import NIOPosix
import NIOSSL
import Synchronization
import Testing
import TidingsCore
import Logging
import NIOEmbedded
@testable import TidingsDevice
import TidingsGateway
import TidingsStorage
import TidingsTestSupport

/// The device channel's limits after the handshake (issue 11 §2, §3, docs/security.md "Device
/// channel"): frame size, idle timeout and keep-alive, acks per message, tokens per device,
/// request and new-identity rates, registry writes off the handshake's path, and delivery
/// events confirmed once durable.
@Suite("Device channel limits", .serialized)
struct DeviceChannelLimitsTests {
    /// A raw device connection: frames in through a length decoder, bytes out as written (so a
    /// test can send a bare length prefix). A watchdog closes it after `watchdog`, so a test
    /// waiting for something the gateway never sends fails instead of hanging.
    final class RawDevice {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
        private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
        let key: P256.Signing.PrivateKey
        private(set) var deviceID = ""
        private(set) var recordsEvents = false

        init(channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, inbound: NIOAsyncChannelInboundStream<ByteBuffer>,
             outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, key: P256.Signing.PrivateKey) {
            self.channel = channel
            self.inbound = inbound.makeAsyncIterator()
            self.outbound = outbound
            self.key = key
        }

        /// The next message; nil when the connection closed.
        func next() async throws -> DeviceMessage? {
            guard let frame = try await inbound.next() else { return nil }
            return try DeviceMessage(decoding: frame.readableBytesView)
        }

        /// The next message that is not a push (pushes are skipped).
        func nextReply() async throws -> DeviceMessage? {
            while let message = try await next() {
                if case .push = message { continue }
                return message
            }
            return nil
        }

        func send(_ message: DeviceMessage) async throws {
            var frame: [UInt8] = []
            message.appendFrame(to: &frame)
            try await outbound.write(ByteBuffer(bytes: frame))
        }

        func sendRaw(_ bytes: [UInt8]) async throws { try await outbound.write(ByteBuffer(bytes: bytes)) }

        /// Challenge, hello, welcome (or whatever the gateway answers instead).
        @discardableResult
        func handshake() async throws -> DeviceMessage? {
            guard case .challenge(let nonce)? = try await next() else { return nil }
            try await send(.hello(publicKey: Array(key.publicKey.x963Representation), signature: try DeviceChallenge.sign(nonce: nonce, with: key)))
            let reply = try await next()
            if case .welcome(let id, _, let events, _)? = reply {
                deviceID = id
                recordsEvents = events
            }
            return reply
        }
    }

    static func withRawDevice<T>(_ h: GatewayHarness, key: P256.Signing.PrivateKey = P256.Signing.PrivateKey(),
                                 localAddress: String? = nil, watchdog: Duration = .seconds(10),
                                 _ body: (RawDevice) async throws -> T) async throws -> T {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(h.certificatePath))
        let context = try NIOSSLContext(configuration: tls)
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        if let localAddress { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: localAddress, port: 0)) }
        let channel = try await bootstrap.connect(host: "127.0.0.1", port: h.devicePort) { channel in
            channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(try NIOSSLClientHandler(context: context, serverHostname: nil))
                try sync.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
                return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
        let raw = channel.channel
        let guardTask = Task {
            try await Task.sleep(for: watchdog)
            try? await raw.close()
        }
        defer { guardTask.cancel() }
        return try await channel.executeThenClose { inbound, outbound in
            try await body(RawDevice(channel: channel, inbound: inbound, outbound: outbound, key: key))
        }
    }

    /// The `error` reason of a message, if it is one.
    static func reason(_ message: DeviceMessage?) -> String? {
        if case .error(_, let reason, _)? = message { return reason }
        return nil
    }

    static func device(_ h: GatewayHarness, key: P256.Signing.PrivateKey = P256.Signing.PrivateKey(), localAddress: String? = nil,
                       ping: TimeAmount? = .seconds(60)) async throws -> DeviceConnection {
        var configuration = DeviceClientConfiguration(host: "127.0.0.1", port: h.devicePort, deviceKey: key, trustRootPaths: [h.certificatePath])
        configuration.localAddress = localAddress
        configuration.pingInterval = ping
        configuration.connectTimeout = .seconds(5)
        return try await DeviceConnection.connect(configuration)
    }

    // MARK: Frames

    /// The issue's partial frame: a 1 MiB length prefix after the handshake was held forever
    /// (then allowed: the limit was 1 MiB). Now refused as soon as the prefix arrives.
    @Test func oversizedLengthPrefixIsRefusedAtOnce() async throws {
        let h = try await GatewayHarness.start()
        let outcome = try await Self.withRawDevice(h) { device -> (DeviceMessage?, DeviceMessage?) in
            guard case .welcome? = try await device.handshake() else { return (nil, nil) }
            try await device.sendRaw([0x00, 0x10, 0x00, 0x00] + Array(repeating: UInt8(ascii: " "), count: 1000))  // 1 MiB announced
            return (try await device.next(), try await device.next())
        }
        #expect(Self.reason(outcome.0) == "ProtocolError", "\(String(describing: outcome.0))")
        #expect(outcome.1 == nil, "the connection closed")
        await h.stop()
    }

    /// At the limit a frame is read; one byte past it the prefix alone closes the connection.
    @Test func frameAtTheLimitIsReadAndOnePastItIsRefused() async throws {
        let limit = 1024
        let h = try await GatewayHarness.start { $0.deviceMaximumFrameLength = limit }
        func padded(_ message: DeviceMessage, to length: Int) -> [UInt8] {
            var json = message.encoded()
            json.insert(contentsOf: Array(repeating: UInt8(ascii: " "), count: length - json.count), at: 1)
            return [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)] + json
        }
        let (atLimit, pastLimit, closed) = try await Self.withRawDevice(h) { device -> (DeviceMessage?, DeviceMessage?, DeviceMessage?) in
            guard case .welcome? = try await device.handshake() else { return (nil, nil, nil) }
            try await device.sendRaw(padded(.ping(7), to: limit))
            let first = try await device.next()
            try await device.sendRaw(Array(padded(.ping(8), to: limit + 1).prefix(4)))
            return (first, try await device.next(), try await device.next())
        }
        #expect(atLimit == .pong(7))
        #expect(Self.reason(pastLimit) == "ProtocolError", "\(String(describing: pastLimit))")
        #expect(closed == nil)
        await h.stop()
    }

    /// Before the handshake only a hello fits: 4 KiB at most.
    @Test func largeFrameBeforeTheHandshakeIsRefused() async throws {
        // A handshake timeout longer than the watchdog: the refusal must come from the prefix.
        let h = try await GatewayHarness.start { $0.deviceHandshakeTimeout = .seconds(60) }
        let (first, second) = try await Self.withRawDevice(h, watchdog: .seconds(5)) { device -> (DeviceMessage?, DeviceMessage?) in
            guard case .challenge? = try await device.next() else { return (nil, nil) }
            try await device.sendRaw([0x00, 0x00, 0x10, 0x01])  // 4,097 bytes announced
            return (try await device.next(), try await device.next())
        }
        #expect(Self.reason(first) == "ProtocolError")
        #expect(second == nil)
        await h.stop()
    }

    /// Extreme integers from the wire: a 4 GiB − 1 length prefix, sequences, request and ping
    /// ids at Int64's ends are refused or answered, never a trap.
    @Test func extremeIntegersAreHandled() async throws {
        let h = try await GatewayHarness.start()
        let replies = try await Self.withRawDevice(h) { device -> [DeviceMessage?] in
            guard case .welcome? = try await device.handshake() else { return [] }
            try await device.send(.ack(sequence: .max))
            try await device.send(.acks(sequences: [.min, -1, 0, .max]))
            try await device.send(.ping(.min))
            var replies = [try await device.next()]
            try await device.send(.requestToken(requestID: .max, topic: "bad topic!", environment: .development))
            replies.append(try await device.next())
            try await device.send(.event(apnsID: "00000000-0000-4000-8000-000000000000", event: "presented", requestID: .min))
            replies.append(try await device.next())
            try await device.sendRaw([0xFF, 0xFF, 0xFF, 0xFF])
            replies.append(try await device.next())
            return replies
        }
        #expect(replies.count == 4)
        guard replies.count == 4 else { await h.stop(); return }
        #expect(replies[0] == .pong(.min))
        if case .error(let id?, "BadTopic", _)? = replies[1] { #expect(id == .max) } else { Issue.record("\(String(describing: replies[1]))") }
        #expect(replies[2] == .eventRecorded(requestID: .min))
        #expect(Self.reason(replies[3]) == "ProtocolError")
        await h.stop()
    }

    // MARK: Keep-alive

    /// A connection that says nothing after its handshake is closed after `deviceIdleTimeout`.
    @Test func silentConnectionIsClosedAfterTheIdleTimeout() async throws {
        let h = try await GatewayHarness.start { $0.deviceIdleTimeout = .milliseconds(200) }
        let (message, after) = try await Self.withRawDevice(h, watchdog: .seconds(5)) { device -> (DeviceMessage?, DeviceMessage?) in
            guard case .welcome? = try await device.handshake() else { return (nil, nil) }
            return (try await device.nextReply(), try await device.next())
        }
        #expect(Self.reason(message) == "IdleTimeout", "\(String(describing: message))")
        #expect(after == nil)
        #expect(h.gateway.connectedDeviceCount == 0)
        await h.stop()
    }

    /// `TidingsDevice` pings every `pingInterval`: with pings well inside the gateway's idle
    /// timeout the connection stays up for many timeouts.
    @Test func pingingDeviceStaysConnected() async throws {
        // The device gives up when a ping is unanswered by the next one (so the interval is not
        // tiny: under a loaded test run a pong can take tens of milliseconds); the gateway's idle
        // check runs once per timeout and closes a connection silent for a whole period.
        let h = try await GatewayHarness.start { $0.deviceIdleTimeout = .milliseconds(1200) }
        let device = try await Self.device(h, ping: .milliseconds(300))
        try await Task.sleep(for: .milliseconds(2600))
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        #expect(token.bytes.count == 32, "still connected after two idle periods")
        #expect(h.gateway.connectedDeviceCount == 1)
        await device.close()
        await h.stop()
    }

    // MARK: acks

    /// At most `deviceMaximumAcksPerMessage` sequences in one `acks`; more closes the connection.
    @Test func acksPerMessageAtAndPastTheLimit() async throws {
        let h = try await GatewayHarness.start { $0.deviceMaximumAcksPerMessage = 10 }
        let (atLimit, pastLimit, closed) = try await Self.withRawDevice(h) { device -> (DeviceMessage?, DeviceMessage?, DeviceMessage?) in
            guard case .welcome? = try await device.handshake() else { return (nil, nil, nil) }
            try await device.send(.acks(sequences: Array(1...10)))
            try await device.send(.ping(1))
            let first = try await device.next()
            try await device.send(.acks(sequences: Array(1...11)))
            return (first, try await device.next(), try await device.next())
        }
        #expect(atLimit == .pong(1))
        #expect(Self.reason(pastLimit) == "ProtocolError", "\(String(describing: pastLimit))")
        #expect(closed == nil)
        await h.stop()
    }

    // MARK: Tokens

    /// A device holds at most `deviceMaximumTokens`; past it a new one is refused and nothing
    /// stored, while the tokens it holds keep being returned.
    @Test func tokensPerDeviceAtAndPastTheLimit() async throws {
        let h = try await GatewayHarness.start { $0.deviceMaximumTokens = 3 }
        let device = try await Self.device(h)
        var tokens: [DeviceToken] = []
        for i in 0..<3 { tokens.append(try await device.requestToken(topic: "com.example.app\(i)", environment: .development)) }
        #expect(Set(tokens).count == 3)
        do {
            _ = try await device.requestToken(topic: "com.example.app3", environment: .development)
            Issue.record("a fourth token")
        } catch let error as DeviceClientError {
            #expect(error.reason == "TooManyDeviceTokens")
        }
        #expect(try h.gateway.store.tokenCount(deviceID: device.deviceID) == 3, "nothing stored past the limit")
        #expect(try await device.requestToken(topic: "com.example.app0", environment: .development) == tokens[0])
        // Removed apps' tokens count too (each stays a row): no new token by remove-and-ask.
        try await device.removeApp(topic: "com.example.app0")
        await #expect(throws: DeviceClientError.self) { try await device.requestToken(topic: "com.example.app0", environment: .development) }
        await device.close()
        await h.stop()
    }

    /// `requestToken`/`removeApp` per device: a bucket of the burst, refilled at the rate, kept
    /// across reconnects (before, each connection had a fresh burst); another device has its own.
    @Test func tokenRequestsAreRateLimitedPerDeviceAcrossReconnects() async throws {
        let h = try await GatewayHarness.start {
            $0.deviceRequestRateLimitBurst = 5
            $0.deviceRequestRateLimitPerSecond = 1
        }
        let key = P256.Signing.PrivateKey()
        let device = try await Self.device(h, key: key)
        for _ in 0..<5 { _ = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development) }
        do {
            _ = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
            Issue.record("a sixth request within the burst")
        } catch let error as DeviceClientError {
            #expect(error.reason == "TooManyRequests")
        }
        await device.close()
        let again = try await Self.device(h, key: key)
        do {
            _ = try await again.requestToken(topic: GatewayHarness.bundleID, environment: .development)
            Issue.record("a reconnect refilled the bucket")
        } catch let error as DeviceClientError {
            #expect(error.reason == "TooManyRequests")
        }
        h.clock.advance(by: 1)
        _ = try await again.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        await #expect(throws: DeviceClientError.self) { try await again.removeApp(topic: GatewayHarness.bundleID) }
        // Another device has its own bucket.
        let other = try await Self.device(h)
        _ = try await other.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        await again.close()
        await other.close()
        await h.stop()
    }

    /// Three token requests in one write while the store holds token writes: the first two are
    /// queued (at the limit), the third is refused at once (past it); the two are answered
    /// once the store moves.
    static func threeRequestsWhileTheRegistryIsStuck(_ configure: @escaping @Sendable (inout GatewayConfiguration) -> Void)
        async throws -> (refused: DeviceMessage?, answered: [DeviceMessage?]) {
        let store = GatedGatewayStore()
        let h = try await GatewayHarness.start {
            $0.storage = .custom(store)
            $0.deviceRequestRateLimitPerSecond = 0
            configure(&$0)
        }
        let result = try await Self.withRawDevice(h) { device -> (DeviceMessage?, [DeviceMessage?]) in
            guard case .welcome? = try await device.handshake() else { return (nil, []) }
            var frames: [UInt8] = []
            for id in Int64(1)...3 {
                DeviceMessage.requestToken(requestID: id, topic: "com.example.app\(id)", environment: .development).appendFrame(to: &frames)
            }
            try await device.sendRaw(frames)
            let refused = try await device.next()
            store.release()
            return (refused, [try await device.next(), try await device.next()])
        }
        await h.stop()
        return result
    }

    /// Per connection: at most `deviceMaximumRequestsInFlight` requests wait in the registry.
    @Test func requestsInFlightPerConnectionAtAndPastTheLimit() async throws {
        let (refused, answered) = try await Self.threeRequestsWhileTheRegistryIsStuck { $0.deviceMaximumRequestsInFlight = 2 }
        guard case .error(3?, "TooManyRequests", let message)? = refused else { Issue.record("\(String(describing: refused))"); return }
        #expect(message.contains("waiting"), "\(message)")
        #expect(answered.allSatisfy { if case .token? = $0 { true } else { false } }, "\(answered)")
    }

    /// Over all connections: at most `deviceRegistryMaximumQueued` registry items.
    @Test func registryQueueAtAndPastItsLimit() async throws {
        let (refused, answered) = try await Self.threeRequestsWhileTheRegistryIsStuck { $0.deviceRegistryMaximumQueued = 2 }
        guard case .error(3?, "TooManyRequests", let message)? = refused else { Issue.record("\(String(describing: refused))"); return }
        #expect(message.contains("busy"), "\(message)")
        #expect(answered.allSatisfy { if case .token? = $0 { true } else { false } }, "\(answered)")
    }

    /// A request still waiting in the registry queue when its connection closed is not run.
    @Test func closedConnectionsQueuedRequestsAreSkipped() async throws {
        let store = GatedGatewayStore()
        let h = try await GatewayHarness.start {
            $0.storage = .custom(store)
            $0.deviceRequestRateLimitPerSecond = 0
        }
        let key = P256.Signing.PrivateKey()
        try await Self.withRawDevice(h, key: key) { device in
            guard case .welcome? = try await device.handshake() else { Issue.record("no welcome"); return }
            var frames: [UInt8] = []
            for id in Int64(1)...2 {
                DeviceMessage.requestToken(requestID: id, topic: "com.example.app\(id)", environment: .development).appendFrame(to: &frames)
            }
            try await device.sendRaw(frames)
            #expect(await store.waitUntilATokenWriteIsStuck())
        }
        for _ in 0..<500 where h.gateway.connectedDeviceCount > 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(h.gateway.connectedDeviceCount == 0)
        store.release()
        // The queue is serial: once a later request is answered, the earlier ones have run.
        let other = try await Self.device(h)
        _ = try await other.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        #expect(try store.tokenCount(deviceID: DeviceChallenge.deviceID(publicKey: key.publicKey)) == 1, "the second request was skipped")
        await other.close()
        await h.stop()
    }

    /// New identities per source address: past the burst a new key is refused (nothing
    /// stored), a known device and another source still get in; the bucket refills.
    @Test func newIdentitiesAreRateLimitedPerSource() async throws {
        let h = try await GatewayHarness.start {
            $0.newDevicesPerSourceBurst = 2
            $0.newDevicesPerSourcePerSecond = 1
        }
        let known = P256.Signing.PrivateKey()
        await (try Self.device(h, key: known)).close()
        await (try Self.device(h)).close()
        let refusedKey = P256.Signing.PrivateKey()
        do {
            _ = try await Self.device(h, key: refusedKey)
            Issue.record("a third new identity from one address")
        } catch let error as DeviceClientError {
            #expect(error.reason == "TooManyNewDevices")
        }
        #expect(try h.gateway.store.device(id: DeviceChallenge.deviceID(publicKey: refusedKey.publicKey)) == nil)
        await (try Self.device(h, key: known)).close()
        await (try Self.device(h, key: refusedKey, localAddress: "127.0.0.2")).close()
        h.clock.advance(by: 1)
        await (try Self.device(h)).close()
        await h.stop()
    }

    /// The overall limit holds whatever the source address.
    @Test func newIdentitiesAreRateLimitedOverall() async throws {
        let h = try await GatewayHarness.start {
            $0.newDevicesPerSourcePerSecond = 0
            $0.newDevicesBurst = 2
            $0.newDevicesPerSecond = 1
        }
        await (try Self.device(h, localAddress: "127.0.0.1")).close()
        await (try Self.device(h, localAddress: "127.0.0.2")).close()
        do {
            _ = try await Self.device(h, localAddress: "127.0.0.3")
            Issue.record("a third new identity")
        } catch let error as DeviceClientError {
            #expect(error.reason == "TooManyNewDevices")
        }
        h.clock.advance(by: 1)
        await (try Self.device(h, localAddress: "127.0.0.3")).close()
        await h.stop()
    }

    /// A new identity refused by the overall limit spends nothing of its source's bucket
    /// (before, the per-source token was taken first and lost).
    @Test func newIdentityRefusedOverallSpendsNoPerSourceToken() async throws {
        let h = try await GatewayHarness.start {
            $0.newDevicesPerSourceBurst = 2
            $0.newDevicesPerSourcePerSecond = 0.001
            $0.newDevicesBurst = 1
            $0.newDevicesPerSecond = 1
        }
        await (try Self.device(h)).close()
        do {
            _ = try await Self.device(h)
            Issue.record("a second new identity past the overall burst")
        } catch let error as DeviceClientError {
            #expect(error.reason == "TooManyNewDevices")
        }
        h.clock.advance(by: 1)  // the overall bucket refills; the source's barely
        await (try Self.device(h)).close()
        await h.stop()
    }

    /// Token writes queue behind each other on the registry queue, not in front of handshakes:
    /// with every token write stuck, a new device still completes its handshake (before, two
    /// stuck writes held both threads handshakes wait on).
    @Test func newDeviceHandshakeCompletesWhileAnotherConnectionFloodsTokenRequests() async throws {
        let store = GatedGatewayStore()
        let h = try await GatewayHarness.start {
            $0.storage = .custom(store)
            $0.deviceRequestRateLimitPerSecond = 0
        }
        let flooder = try await Self.device(h)
        // (tokens, refused): past `deviceMaximumRequestsInFlight` a request is refused at once.
        let requests = Task {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0..<200 {
                    group.addTask {
                        do {
                            _ = try await flooder.requestToken(topic: "com.example.flood\(i)", environment: .development)
                            return true
                        } catch let error as DeviceClientError where error.reason == "TooManyRequests" {
                            return false
                        }
                    }
                }
                return try await group.reduce(into: (0, 0)) { n, issued in if issued { n.0 += 1 } else { n.1 += 1 } }
            }
        }
        #expect(await store.waitUntilATokenWriteIsStuck(), "a token write began")
        let newcomer = try await Self.device(h)
        #expect(!newcomer.deviceID.isEmpty, "the handshake completed while token writes are stuck")
        store.release()
        let (issued, refused) = try await requests.value
        #expect(issued >= 1 && issued + refused == 200, "\(issued) issued, \(refused) refused")
        await newcomer.close()
        await flooder.close()
        await h.stop()
    }

    // MARK: Delivery events

    /// An `event` with a request id is answered `eventRecorded` once durable (and recording
    /// it again is harmless); one without is recorded and not answered (older devices).
    @Test func deliveryEventsAreConfirmedOnceDurable() async throws {
        let h = try await GatewayHarness.start(store: .sqlite)
        let (replies, apnsID) = try await Self.withRawDevice(h) { device -> ([DeviceMessage?], String) in
            guard case .welcome? = try await device.handshake() else { return ([], "") }
            #expect(device.recordsEvents, "the welcome says events are confirmed")
            try await device.send(.requestToken(requestID: 1, topic: GatewayHarness.bundleID, environment: .development))
            guard case .token(1, let token)? = try await device.next() else { return ([], "") }
            let c = try await h.connect()
            let r = try await c.send(h.request(token: token, authorization: try h.bearer(), body: #"{"aps":{"alert":"hi"}}"#))
            await c.close()
            guard case .push(let push)? = try await device.next() else { return ([], "") }
            try await device.send(.ack(sequence: push.sequence))
            try await device.send(.event(apnsID: push.apnsID, event: "presented", requestID: 7))
            var replies = [try await device.nextReply()]
            try await device.send(.event(apnsID: push.apnsID, event: "answered"))
            try await device.send(.event(apnsID: push.apnsID, event: "answered", requestID: 8))
            try await device.send(.event(apnsID: push.apnsID, event: "presented", requestID: 9))
            replies.append(try await device.nextReply())
            replies.append(try await device.nextReply())
            return (replies, r.apnsID ?? "")
        }
        #expect(replies == [.eventRecorded(requestID: 7), .eventRecorded(requestID: 8), .eventRecorded(requestID: 9)])
        let status = try await h.gateway.status(apnsID: apnsID).first
        #expect(status?.presentedAt != nil)
        #expect(status?.answeredAt != nil)
        await h.stop()
    }

    /// An event the store could not record is answered with an error carrying its request
    /// id (the device keeps it and sends it again), not confirmed.
    @Test func deliveryEventThatCannotBeRecordedIsNotConfirmed() async throws {
        let store = GatedGatewayStore()
        store.failEvents.store(true, ordering: .relaxed)
        let h = try await GatewayHarness.start { $0.storage = .custom(store) }
        let reply = try await Self.withRawDevice(h) { device -> DeviceMessage? in
            guard case .welcome? = try await device.handshake() else { return nil }
            try await device.send(.event(apnsID: "00000000-0000-0000-0000-000000000001", event: "presented", requestID: 3))
            return try await device.nextReply()
        }
        guard case .error(3?, let reason, _)? = reply else { Issue.record("\(String(describing: reply))"); await h.stop(); return }
        #expect(reason == "InternalServerError")
        await h.stop()
    }

    /// Events waiting to be recorded, per connection: at the limit queued, past it refused
    /// (`TooManyRequests`, the device sends it again later); an event with an apns-id that is
    /// not a UUID is refused (`BadMessageId`); one the gateway does not record is confirmed.
    @Test func pendingEventsAtAndPastTheLimitAndMalformedEvents() async throws {
        let h = try await GatewayHarness.start { $0.deviceMaximumPendingEvents = 2 }
        let replies = try await Self.withRawDevice(h) { device -> [DeviceMessage?] in
            guard case .welcome? = try await device.handshake() else { return [] }
            var frames: [UInt8] = []
            for id in Int64(1)...3 {
                DeviceMessage.event(apnsID: "00000000-0000-4000-8000-00000000000\(id)", event: "presented", requestID: id).appendFrame(to: &frames)
            }
            try await device.sendRaw(frames)  // one write: one read, all three waiting together
            var replies: [DeviceMessage?] = []
            for _ in 0..<3 { replies.append(try await device.next()) }
            try await device.send(.event(apnsID: String(repeating: "a", count: 60_000), event: "presented", requestID: 4))
            replies.append(try await device.next())
            try await device.send(.event(apnsID: "00000000-0000-4000-8000-000000000005", event: "dismissedByAFutureDevice", requestID: 5))
            replies.append(try await device.next())
            return replies
        }
        #expect(replies.count == 5)
        guard replies.count == 5 else { await h.stop(); return }
        let first = Set(replies[0..<3].compactMap { $0 })
        #expect(first.contains(.eventRecorded(requestID: 1)) && first.contains(.eventRecorded(requestID: 2)))
        #expect(first.contains { if case .error(3?, "TooManyRequests", _) = $0 { true } else { false } }, "\(first)")
        if case .error(4?, let reason, _)? = replies[3] { #expect(reason == "BadMessageId") } else { Issue.record("\(String(describing: replies[3]))") }
        #expect(replies[4] == .eventRecorded(requestID: 5))
        await h.stop()
    }

    /// `events`: several in one message, one `eventRecorded` once all are durable; past the
    /// bound of waiting events the whole message is refused (`TooManyRequests`), and so is one
    /// naming an apns-id that is not a UUID (`BadMessageId`) — nothing of either is recorded.
    @Test func eventBatchesAreConfirmedOnceAllAreDurableOrRefusedWhole() async throws {
        let h = try await GatewayHarness.start(store: .sqlite) { $0.deviceMaximumPendingEvents = 3 }
        let (replies, ids) = try await Self.withRawDevice(h) { device -> ([DeviceMessage?], [String]) in
            guard case .welcome(_, _, true, true)? = try await device.handshake() else { Issue.record("no event batches"); return ([], []) }
            try await device.send(.requestToken(requestID: 1, topic: GatewayHarness.bundleID, environment: .development))
            guard case .token(1, let token)? = try await device.next() else { return ([], []) }
            let c = try await h.connect()
            var pushes: [DevicePush] = []
            let bearer = try h.bearer()  // one provider token per connection (a new one each time is TooManyProviderTokenUpdates)
            for n in 0..<4 {
                let r = try await c.send(h.request(token: token, authorization: bearer, body: #"{"aps":{"alert":"n\#(n)"}}"#))
                #expect(r.status == 200, "push \(n): \(r.status) \(r.reason ?? "")")
                let next = try await device.next()
                guard case .push(let push)? = next else { Issue.record("push \(n): \(String(describing: next))"); return ([], []) }
                pushes.append(push)
                try await device.send(.ack(sequence: push.sequence))
            }
            await c.close()
            let item = { (p: DevicePush) in DeviceEventItem(apnsID: p.apnsID, event: "presented", sequence: p.sequence) }
            var replies: [DeviceMessage?] = []
            // Four at a bound of three: refused whole.
            try await device.send(.events(requestID: 10, events: pushes.map(item)))
            replies.append(try await device.nextReply())
            // A bad apns-id among good ones: refused whole.
            try await device.send(.events(requestID: 11, events: [item(pushes[0]), DeviceEventItem(apnsID: "nope", event: "presented")]))
            replies.append(try await device.nextReply())
            // Three (one a stage the gateway does not record): one confirmation, after all.
            try await device.send(.events(requestID: 12, events: [item(pushes[0]), item(pushes[1]),
                                                                   DeviceEventItem(apnsID: pushes[2].apnsID, event: "dismissedByAFutureDevice")]))
            replies.append(try await device.nextReply())
            return (replies, pushes.map(\.apnsID))
        }
        #expect(replies.count == 3)
        guard replies.count == 3, ids.count == 4 else { await h.stop(); return }
        if case .error(10?, let reason, _)? = replies[0] { #expect(reason == "TooManyRequests") } else { Issue.record("\(String(describing: replies[0]))") }
        if case .error(11?, let reason, _)? = replies[1] { #expect(reason == "BadMessageId") } else { Issue.record("\(String(describing: replies[1]))") }
        #expect(replies[2] == .eventRecorded(requestID: 12))
        var presented: [Bool] = []
        for id in ids { presented.append(try await h.gateway.status(apnsID: id).first?.presentedAt != nil) }
        #expect(presented == [true, true, false, false], "the two presented of the confirmed batch, nothing of the refused ones")
        await h.stop()
    }

    /// The client: `record` returns once the gateway confirmed the event.
    @Test func deviceRecordWaitsForTheConfirmation() async throws {
        let h = try await GatewayHarness.start(store: .sqlite)
        let device = try await Self.device(h)
        #expect(device.gatewayConfirmsEvents)
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development)
        let collector = await PushCollector.start(device)
        let c = try await h.connect()
        let r = try await c.send(h.request(token: token.hex, authorization: try h.bearer(), body: #"{"aps":{"alert":"hi"}}"#))
        await c.close()
        let pushes = await collector.wait(for: 1)
        #expect(pushes.count == 1)
        #expect(try await device.record(.presented, apnsID: try #require(r.apnsID)))
        #expect(try await h.gateway.status(apnsID: r.apnsID!).first?.presentedAt != nil, "durable when confirmed")
        await device.close()
        await h.stop()
    }
}

/// The device's `record(_ events:)` against a gateway whose welcome does not say
/// `"eventBatches":true` (one that predates `events`): each event goes as its own `event`
/// request, all at once, and the call returns once every one is confirmed.
@Test func eventsGoOneByOneToAGatewayWithoutBatches() async throws {
    let shared = DeviceConnectionShared(pushes: DevicePushBuffer())
    let channel = NIOAsyncTestingChannel()
    try await channel.pipeline.addHandler(DeviceClientHandler(shared: shared, key: P256.Signing.PrivateKey(), logger: Logger(label: "test"), pingInterval: nil))
    try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1))
    try await channel.writeInbound(ByteBuffer(bytes: DeviceMessage.welcome(deviceID: "ab", batchedAcks: true, recordsEvents: true).encoded()))
    let connection = DeviceConnection(deviceID: "ab", channel: channel, shared: shared, pushes: DevicePushes(buffer: DevicePushBuffer()))
    let items = [DeviceEventItem(apnsID: "a", event: "presented", sequence: 1, occurredAt: 1_700_000_000_123), DeviceEventItem(apnsID: "b", event: "answered", sequence: 2)]
    let recording = Task { try await connection.record(items) }
    var sent: [DeviceMessage] = []
    while sent.count < 2 {
        var buffer = try await channel.waitForOutboundWrite(as: ByteBuffer.self)
        while let length = buffer.readInteger(as: UInt32.self), let bytes = buffer.readBytes(length: Int(length)) {
            sent.append(try DeviceMessage(decoding: bytes))
        }
    }
    var requests: [Int64] = []
    var events: [DeviceEventItem] = []
    for message in sent {
        guard case .event(let apnsID, let event, let id?, let sequence, let occurredAt) = message else { Issue.record("not an event request: \(message)"); continue }
        requests.append(id)
        events.append(DeviceEventItem(apnsID: apnsID, event: event, sequence: sequence, occurredAt: occurredAt))
    }
    #expect(Set(events.map(\.apnsID)) == ["a", "b"] && Set(events) == Set(items), "each event as its own message: \(sent)")
    #expect(Set(requests).count == 2)
    for id in requests { try await channel.writeInbound(ByteBuffer(bytes: DeviceMessage.eventRecorded(requestID: id).encoded())) }
    #expect(try await recording.value, "confirmed once both are")
    _ = try? await channel.finish()
}

/// The device's side of the keep-alive, on an `EmbeddedChannel` (time advanced by hand).
@Suite("Device keep-alive")
struct DeviceKeepAliveTests {
    static func frame(_ message: DeviceMessage) -> ByteBuffer { ByteBuffer(bytes: message.encoded()) }

    /// The outbound messages written so far.
    static func written(_ channel: EmbeddedChannel) throws -> [DeviceMessage] {
        var out: [DeviceMessage] = []
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            while let length = buffer.readInteger(as: UInt32.self), let bytes = buffer.readBytes(length: Int(length)) {
                out.append(try DeviceMessage(decoding: bytes))
            }
        }
        return out
    }

    static func welcomed() throws -> EmbeddedChannel {
        let shared = DeviceConnectionShared(pushes: DevicePushBuffer())
        let handler = DeviceClientHandler(shared: shared, key: P256.Signing.PrivateKey(), logger: Logger(label: "test"),
                                          pingInterval: .seconds(30))
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeInbound(frame(.welcome(deviceID: "ab", batchedAcks: true, recordsEvents: true)))
        return channel
    }

    /// A ping every interval while the gateway answers; the connection stays up.
    @Test func pingsEveryIntervalWhileAnswered() throws {
        let channel = try Self.welcomed()
        #expect(try Self.written(channel).isEmpty)
        for id in Int64(1)...3 {
            channel.embeddedEventLoop.advanceTime(by: .seconds(30))
            #expect(try Self.written(channel) == [.ping(id)])
            try channel.writeInbound(Self.frame(.pong(id)))
        }
        #expect(channel.isActive)
        _ = try? channel.finish()
    }

    /// A ping unanswered (nothing heard) when the next is due closes the connection.
    @Test func unansweredPingClosesTheConnection() throws {
        let channel = try Self.welcomed()
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(try Self.written(channel) == [.ping(1)])
        channel.embeddedEventLoop.advanceTime(by: .seconds(29))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive, "closed: the gateway said nothing for a whole interval after a ping")
        _ = try? channel.finish()
    }
}

/// The protocol's additions for confirmed events decode as the reference decoder does and
/// survive a round trip (FuzzDeviceMessage checks the same on random input).
@Test func confirmedEventMessagesRoundTrip() throws {
    let messages: [DeviceMessage] = [
        .event(apnsID: "a", event: "presented"), .event(apnsID: "a", event: "answered", requestID: .max),
        .event(apnsID: "a", event: "presented", requestID: .min), .eventRecorded(requestID: 0),
        .welcome(deviceID: "ab", batchedAcks: true, recordsEvents: true), .welcome(deviceID: "ab", batchedAcks: false, recordsEvents: true),
    ]
    for m in messages {
        #expect(try DeviceMessage(decoding: m.encoded()) == m)
        #expect(try DeviceMessage.referenceDecoded(m.referenceEncoded()) == m)
    }
    #expect(try DeviceMessage(decoding: Array(#"{"type":"event","apnsID":"a","event":"b","requestID":null}"#.utf8)) == .event(apnsID: "a", event: "b"))
    #expect(throws: DeviceProtocolError.self) { try DeviceMessage(decoding: Array(#"{"type":"event","apnsID":"a","event":"b","requestID":"1"}"#.utf8)) }
    #expect(throws: DeviceProtocolError.self) { try DeviceMessage(decoding: Array(#"{"type":"push","sequence":1,"apnsID":"a","token":"t","topic":"t","pushType":"alert","priority":9223372036854775807,"expiresAt":0,"acceptedAt":0,"payload":"{}"}"#.utf8)) }
}

/// FuzzDeviceMessage's oracle (fast decoder = reference decoder; what decodes round-trips
/// through both encoders) over its seeds and every one-byte deletion and digit/quote
/// substitution of them: the seeds for the new messages stay valid fuzz inputs.
@Test func fuzzOracleHoldsOnTheSeedsAndTheirMutations() throws {
    let seeds = BuiltProducts.packageRoot.appendingPathComponent("Fuzz/seeds/FuzzDeviceMessage")
    let files = try FileManager.default.contentsOfDirectory(atPath: seeds.path)
    #expect(files.count >= 5)
    var decoded = 0
    for file in files {
        let seed = Array(try Data(contentsOf: seeds.appendingPathComponent(file)))
        var inputs = [seed]
        for i in seed.indices {
            var deleted = seed
            deleted.remove(at: i)
            inputs.append(deleted)
            for replacement in [UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "\""), UInt8(ascii: "e")] {
                var changed = seed
                changed[i] = replacement
                inputs.append(changed)
            }
        }
        for bytes in inputs {
            let fast = Result { () throws(DeviceProtocolError) in try DeviceMessage(decoding: bytes) }
            let reference = Result { () throws(DeviceProtocolError) in try DeviceMessage.referenceDecoded(bytes) }
            #expect(fast == reference, "\(String(decoding: bytes, as: UTF8.self))")
            guard case .success(let message) = fast else { continue }
            decoded += 1
            #expect(try DeviceMessage(decoding: message.encoded()) == message)
            #expect(try DeviceMessage(decoding: message.referenceEncoded()) == message)
        }
    }
    #expect(decoded > files.count)
}
