import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
import TidingsTestSupport
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsTesting

/// The two example extensions under Examples/, run as the daemon runs them.
@Suite("Example service extensions")
struct ExampleExtensionTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("an image served on loopback".utf8)

    @Test("image download: the image from a local HTTP server arrives as an attachment in the app's store")
    func imageDownload() async throws {
        let server = try await ImageServer.start(path: "/cat.png", body: Self.png)
        let h = try ExtensionHarness(executable: Built.imageService)
        let request = h.request("", ["image": .string("http://127.0.0.1:\(server.port)/cat.png")])
        let outcome = await h.modify(request)
        try await server.stop()
        #expect(outcome.failure == nil)
        #expect(outcome.rejectedAttachments.isEmpty)
        let attachment = try #require(outcome.content.attachments.first)
        #expect(attachment.identifier == "image_downloaded")
        #expect(attachment.type == "public.png")
        #expect(h.attachments.contains(attachment.path, bundleIdentifier: h.app.bundleIdentifier))
        #expect(try Data(contentsOf: URL(fileURLWithPath: attachment.path)) == Data(Self.png))
        #expect(outcome.content.title == "Hello")
        await h.close()
    }

    @Test("image download: an unreachable image delivers the alert without an attachment")
    func imageDownloadFails() async throws {
        let server = try await ImageServer.start(path: "/cat.png", body: Self.png)
        let h = try ExtensionHarness(executable: Built.imageService)
        let outcome = await h.modify(h.request("", ["image": .string("http://127.0.0.1:\(server.port)/missing.png")]))
        try await server.stop()
        #expect(outcome.failure == nil)
        #expect(outcome.content.attachments.isEmpty)
        #expect(outcome.content.body == "original body")
        await h.close()
    }

    @Test("end-to-end encryption: the extension decrypts what the provider sealed; the payload holds no plaintext")
    func decrypts() async throws {
        let h = try ExtensionHarness(executable: Built.secureMessages)
        let key = SymmetricKey(size: .bits256)
        try key.withUnsafeBytes { Data($0).base64EncodedString() }.write(toFile: h.appDirectory + "/e2e.key", atomically: true, encoding: .utf8)

        // The provider's side (docs/service-extensions.md, in Swift).
        let secret = #"{"title":"Alice","body":"The door code is 4711"}"#
        let sealed = try AES.GCM.seal(Data(secret.utf8), using: key).combined!
        let payload: [String: Any] = [
            "aps": ["alert": ["title": "New message", "body": "(encrypted)"], "mutable-content": 1],
            "e2e": sealed.base64EncodedString(),
        ]
        let wire = try JSONSerialization.data(withJSONObject: payload)
        #expect(!String(decoding: wire, as: UTF8.self).contains("4711"), "the gateway sees only ciphertext")

        let outcome = await h.modify(try encryptedRequest(wire))
        #expect(outcome.failure == nil)
        #expect(outcome.content.title == "Alice")
        #expect(outcome.content.body == "The door code is 4711")
        #expect(outcome.content.userInfo["e2e"] == nil)

        // A payload sealed with another key shows the placeholder.
        let other = try AES.GCM.seal(Data(secret.utf8), using: SymmetricKey(size: .bits256)).combined!
        let forged = try JSONSerialization.data(withJSONObject: [
            "aps": ["alert": ["title": "New message", "body": "(encrypted)"], "mutable-content": 1],
            "e2e": other.base64EncodedString(),
        ] as [String: Any])
        let placeholder = await h.modify(try encryptedRequest(forged))
        #expect(placeholder.content.title == "New message")
        #expect(placeholder.content.body == "(encrypted)")
        await h.close()
    }

    @Test("end-to-end encryption: the recipe's Python provider snippet produces what the extension decrypts",
          .enabled(if: ProcessInfo.processInfo.environment["TIDINGS_TEST_PYTHON"] != nil, "needs TIDINGS_TEST_PYTHON: a Python with the cryptography package"))
    func pythonProvider() async throws {
        let python = try #require(ProcessInfo.processInfo.environment["TIDINGS_TEST_PYTHON"])
        let h = try ExtensionHarness(executable: Built.secureMessages)
        let keyFile = h.appDirectory + "/e2e.key"
        try Data((0..<32).map { UInt8($0) }).base64EncodedString().write(toFile: keyFile, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [BuiltProducts.packageRoot.appendingPathComponent("Examples/SecureMessages/encrypt_push.py").path, keyFile, "Bob", "Lunch at noon"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let wire = await offThePool {
            let wire = readToEnd(pipe.fileHandleForReading)
            process.waitUntilExit()
            return wire
        }
        #expect(process.terminationStatus == 0)
        #expect(!String(decoding: wire, as: UTF8.self).contains("Lunch"))
        let outcome = await h.modify(try encryptedRequest(wire))
        #expect(outcome.content.title == "Bob")
        #expect(outcome.content.body == "Lunch at noon")
        await h.close()
    }

    @Test("the example manifests declare their extensions with point service")
    func manifests() throws {
        for (folder, name) in [("ImageService", "ImageServiceExtension"), ("SecureMessages", "SecureMessageExtension")] {
            let path = BuiltProducts.packageRoot.appendingPathComponent("Examples/\(folder)/manifest.json").path
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            let manifest = try JSONDecoder().decode(AppManifest.self, from: data)
            let ext = try #require(manifest.extensions?.first)
            #expect(ext.point == "service")
            #expect(ext.executable.hasSuffix("/\(name)"))
            #expect(ext.bundleIdentifier.hasPrefix(manifest.bundleIdentifier + "."))
        }
    }

    /// The request the remote pipeline makes of a push: the alert, the payload in `userInfo`.
    private func encryptedRequest(_ wire: Data) throws -> NotificationRequestValue {
        guard case .dictionary(let userInfo)? = try JSONValue(parsing: wire).propertyListValue else {
            throw DescriptorFrameTestError.notADictionary
        }
        var content = NotificationContentValue()
        content.title = "New message"
        content.body = "(encrypted)"
        content.userInfo = userInfo
        return NotificationRequestValue(identifier: UUID().uuidString, content: content, trigger: .push)
    }
}

enum DescriptorFrameTestError: Error { case notADictionary }

/// An HTTP server on 127.0.0.1, port 0, that serves one file; stopped by the test.
final class ImageServer: Sendable {
    let channel: any Channel
    let port: Int

    private init(channel: any Channel) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    static func start(path: String, body: [UInt8]) async throws -> ImageServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(FileHandler(path: path, body: body))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return ImageServer(channel: channel)
    }

    func stop() async throws {
        try await channel.close()
    }
}

private final class FileHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let path: String
    let body: [UInt8]

    init(path: String, body: [UInt8]) {
        self.path = path
        self.body = body
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        let found = head.uri == path
        let bytes = found ? body : Array("not found".utf8)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: found ? "image/png" : "text/plain")
        headers.add(name: "Content-Length", value: "\(bytes.count)")
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: found ? .ok : .notFound, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: bytes)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
