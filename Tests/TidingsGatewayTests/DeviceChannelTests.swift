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
    /// Opens a raw framed TLS connection and returns the messages received after sending `reply(challengeNonce)`.
    func exchange(_ h: GatewayHarness, reply: @escaping @Sendable ([UInt8]) -> [UInt8]) async throws -> [DeviceMessage] {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(h.certificatePath))
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: h.devicePort) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: context, serverHostname: nil))
                    try sync.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
                    try sync.addHandler(LengthFieldPrepender(lengthFieldBitLength: .fourBytes))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
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
}
