import Crypto
import Foundation
import NIOCore
import NIOExtras
import NIOPosix
import NIOSSL
import Testing
import TidingsCore
import TidingsDevice

/// The device channel's handshake refuses a device that cannot prove its key.
@Suite("Device channel", .serialized)
struct DeviceChannelTests {
    /// A raw TLS connection to the device channel, framed by length, below `TidingsDevice`.
    func rawConnection(_ h: GatewayHarness) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(h.certificatePath))
        let context = try NIOSSLContext(configuration: tls)
        return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: h.devicePort) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: context, serverHostname: nil))
                    try sync.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
                    try sync.addHandler(LengthFieldPrepender(lengthFieldBitLength: .fourBytes))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
    }

    /// Opens a raw framed TLS connection and returns the messages received after sending `reply(challengeNonce)`.
    func exchange(_ h: GatewayHarness, reply: @escaping @Sendable ([UInt8]) -> [UInt8]) async throws -> [DeviceMessage] {
        let channel = try await rawConnection(h)
        return try await channel.executeThenClose { inbound, outbound in
            var received: [DeviceMessage] = []
            for try await frame in inbound {
                let message = try DeviceMessage(decoding: frame.readableBytesView)
                received.append(message)
                if case .challenge(let nonce) = message {
                    try await outbound.write(ByteBuffer(bytes: reply(nonce)))
                }
            }
            return received
        }
    }

    @Test func wrongSignatureIsRefused() async throws {
        let h = try await GatewayHarness.start()
        let key = P256.Signing.PrivateKey()
        let other = P256.Signing.PrivateKey()
        let messages = try await exchange(h) { nonce in
            // Signed with another key than the one presented.
            DeviceMessage.hello(publicKey: Array(key.publicKey.x963Representation),
                                signature: (try? DeviceChallenge.sign(nonce: nonce, with: other)) ?? []).encoded()
        }
        #expect(messages.count == 2)
        guard case .error(nil, let reason, _)? = messages.last else { Issue.record("expected an error, got \(messages)"); return }
        #expect(reason == "BadDeviceKey")
        await h.stop()
    }

    @Test func replayedSignatureForAnotherNonceIsRefused() async throws {
        let h = try await GatewayHarness.start()
        let key = P256.Signing.PrivateKey()
        let old = try DeviceChallenge.sign(nonce: Array(repeating: 7, count: 32), with: key)
        let messages = try await exchange(h) { _ in
            DeviceMessage.hello(publicKey: Array(key.publicKey.x963Representation), signature: old).encoded()
        }
        guard case .error(nil, let reason, _)? = messages.last else { Issue.record("expected an error, got \(messages)"); return }
        #expect(reason == "BadDeviceKey")
        await h.stop()
    }

    @Test func anythingBeforeHelloIsAProtocolError() async throws {
        let h = try await GatewayHarness.start()
        let messages = try await exchange(h) { _ in
            DeviceMessage.requestToken(requestID: 1, topic: "com.example.app", environment: .development).encoded()
        }
        guard case .error(nil, let reason, _)? = messages.last else { Issue.record("expected an error, got \(messages)"); return }
        #expect(reason == "ProtocolError")
        await h.stop()
    }

    @Test func badTopicInTokenRequest() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        await #expect(throws: DeviceClientError.self) { try await device.requestToken(topic: "not a topic", environment: .development) }
        // The connection stays usable.
        _ = try await device.requestToken(topic: "com.example.app", environment: .production)
        await device.close()
        await h.stop()
    }

    /// A device that acknowledges one push per `ack` message (as before `acks` existed) and one
    /// that sends several in one `acks` message: both become durable deliveries.
    @Test func singleAndBatchedAcknowledgementsAreDurable() async throws {
        let h = try await GatewayHarness.start(store: .sqlite)
        let channel = try await rawConnection(h)
        let key = P256.Signing.PrivateKey()
        let ids: [String] = try await channel.executeThenClose { inbound, outbound in
            var frames = inbound.makeAsyncIterator()
            func next() async throws -> DeviceMessage {
                guard let frame = try await frames.next() else { throw DeviceClientError.closed }
                return try DeviceMessage(decoding: frame.readableBytesView)
            }
            func send(_ message: DeviceMessage) async throws { try await outbound.write(ByteBuffer(bytes: message.encoded())) }
            guard case .challenge(let nonce) = try await next() else { Issue.record("no challenge"); return [] }
            try await send(.hello(publicKey: Array(key.publicKey.x963Representation), signature: try DeviceChallenge.sign(nonce: nonce, with: key)))
            guard case .welcome(_, let batchedAcks, _, _) = try await next() else { Issue.record("no welcome"); return [] }
            #expect(batchedAcks, "the gateway says it accepts acks")
            try await send(.requestToken(requestID: 1, topic: GatewayHarness.bundleID, environment: .development))
            guard case .token(1, let token) = try await next() else { Issue.record("no token"); return [] }
            let c = try await h.connect()
            let auth = try h.bearer()
            var ids: [String] = []
            for i in 0..<3 {
                let r = try await c.send(h.request(token: token, authorization: auth, body: #"{"aps":{"alert":"n\#(i)"}}"#))
                ids.append(try #require(r.apnsID))
            }
            await c.close()
            var pushes: [DevicePush] = []
            while pushes.count < 3 {
                if case .push(let p) = try await next() { pushes.append(p) }
            }
            #expect(pushes.map(\.apnsID) == ids)
            try await send(.ack(sequence: pushes[0].sequence))
            try await send(.acks(sequences: [pushes[1].sequence, pushes[2].sequence]))
            // Durable before the connection closes (a closed connection would send them again).
            for id in ids {
                for _ in 0..<500 {
                    if try await h.gateway.status(apnsID: id).first?.deliveredAt != nil { break }
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            return ids
        }
        for id in ids { #expect(try await h.gateway.status(apnsID: id).first?.stage == "delivered", "\(id)") }
        await h.stop()
    }

    /// A provider's body reaches the device byte for byte, whatever it escapes: the gateway's
    /// one-pass escaper and the device's byte decoder, through TLS and the store.
    @Test func payloadsWithEveryEscapeClassArriveByteForByte() async throws {
        let h = try await GatewayHarness.start(store: .sqlite)
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let collector = await PushCollector.start(device)
        let bodies = [
            #"{"aps":{"alert":"quote \" backslash \\ solidus \/ slash / tab \t nl \n cr \r bs \b ff \f"}}"#,
            #"{"aps":{"alert":"nul \u0000 one \u0001 us \u001F del \u007f \u00e9 \uD83D\uDE00"},"k":"\u0022\u005c"}"#,
            "{\n  \"aps\" : {\"alert\":\"Hé — 日本語 😀\", \"badge\" : 3},\r\n\t\"n\": [1, -0, 2.5e3, true, null]\n}",
            #"{"aps":{}}"#,
            #"{"aps":{"alert":""},"q":"\"\"\"\"","b":"\\\\"}"#,
        ]
        let c = try await h.connect()
        let auth = try h.bearer()
        for body in bodies {
            let r = try await c.send(h.request(token: token, authorization: auth, body: body))
            #expect(r.status == 200, "\(body)")
        }
        await c.close()
        let pushes = await collector.wait(for: bodies.count)
        #expect(pushes.map(\.payload) == bodies.map { Array($0.utf8) })
        await device.close()
        await h.stop()
    }
}
