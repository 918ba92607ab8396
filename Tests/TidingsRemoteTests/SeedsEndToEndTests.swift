import Foundation
import Testing
import TidingsCore
import TidingsTesting
import TidingsTestSupport

/// Issue 4's "Done when", across real processes and by the README's commands: a fresh
/// `tidings serve`; the sample app installed from a manifest whose service extension
/// (Examples/SampleService) decrypts and downloads images; a provider with only a `.p8` key
/// from `tidings keys create` pushes the seeds' payloads with aioapns.
@Suite("The seeds' remote flow, end to end", .serialized)
struct SeedsEndToEndTests {
    static let team = "TEAM123456"
    static let bundle = "com.example.tidings.sample"
    /// Served by the test as the seeds' `background-cover.jpg` (JPEG magic, then bytes).
    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0] + Array("an image served on loopback for the seeds".utf8)

    static var repository: URL { BuiltProducts.packageRoot }
    static var sampleService: String { BuiltProducts.path("SampleServiceExtension") }

    @Test func seedsPayloadsFromAP8KeyReachTheSampleAppAndShowInStatus() async throws {
        guard requireTool(FileManager.default.isExecutableFile(atPath: BuiltProducts.sampleApp), "the SampleApp executable"),
              requireTool(FileManager.default.isExecutableFile(atPath: Self.sampleService), "the SampleServiceExtension executable") else { return }
        guard let python = BuiltProducts.python,
              requireTool((try? await RemoteProcessTests.run(python, ["-c", "import aioapns, cryptography"]).status) == 0,
                                "python aioapns and cryptography") else { return }
        let dir = URL(fileURLWithPath: "/tmp/tre-\(UUID().uuidString.prefix(8))")
        let data = dir.appendingPathComponent("data"), appDir = dir.appendingPathComponent("app"), www = dir.appendingPathComponent("www")
        for d in [data, appDir, www.appendingPathComponent("assets/images")] {
            try FileManager.default.createDirectory(at: d, withIntermediateDirectories: true)
        }
        defer { try? FileManager.default.removeItem(at: dir) }

        // The image, on a local HTTP server (127.0.0.1, port 0), stopped by the test.
        try Data(Self.jpeg).write(to: www.appendingPathComponent("assets/images/background-cover.jpg"))
        let http = try ChildProcess(python, ["-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", www.path], directory: dir, name: "http")
        defer { http.stopAtEnd(signal: SIGKILL) }  // python inherits the test bundle's blocked SIGTERM
        #expect(await eventually { http.value(after: "Serving HTTP on 127.0.0.1 port ") != nil }, "\(http.output)")
        let httpPort = try #require(http.value(after: "Serving HTTP on 127.0.0.1 port ")?.split(separator: " ").first.flatMap { Int($0) })

        // README: tidings serve, then keys create and apps register (the .p8 is all the provider has).
        let serve = try ChildProcess(BuiltProducts.tidings, ["serve", "--data-dir", data.path, "--consent", "grant", "--listen", "127.0.0.1:0",
                                                         "--device-listen", "127.0.0.1:0", "--admin-listen", "off"], directory: dir, name: "serve")
        defer { serve.stopAtEnd() }
        #expect(await eventually { serve.port(after: "provider API on ") != nil }, "\(serve.output)")
        let providerPort = try #require(serve.port(after: "provider API on "))
        let p8 = dir.appendingPathComponent("AuthKey.p8").path
        let keys = try await runTidings(["keys", "create", "--team", Self.team, "-o", p8, "--data-dir", data.path])
        #expect(keys.status == 0, "\(keys.output)")
        let keyID = try #require(keys.output.split(separator: "\n").first { $0.hasPrefix("key id: ") }.map { String($0.dropFirst("key id: ".count)) })
        let register = try await runTidings(["apps", "register", Self.bundle, "--team", Self.team, "--data-dir", data.path])
        #expect(register.status == 0, "\(register.output)")

        // The app's directory: its manifest (with the combined service extension) and the
        // key it shares with the provider.
        let key = SymmetricKeyFile.random()
        try key.write(toFile: appDir.appendingPathComponent("e2e.key").path, atomically: true, encoding: .utf8)
        let (app, token) = try await RemoteProcessTests.startSampleAppForRemote(
            bundle: Self.bundle, extensions: #"[{"bundleIdentifier": "\#(Self.bundle).service", "point": "service", "executable": "\#(Self.sampleService)"}]"#,
            appDirectory: appDir, data: data)
        defer { app.stopAtEnd() }
        let cert = data.appendingPathComponent("tls/gateway-cert.pem").path

        /// aioapns pushes `payload` (a JSON file); returns the apns-id once the daemon shows it.
        func push(_ payloadFile: String) async throws -> String {
            let sent = try await RemoteProcessTests.run(python, [BuiltProducts.gatewayClients.appendingPathComponent("remote_push.py").path, "127.0.0.1",
                                                                 String(providerPort), cert, p8, keyID, Self.team, Self.bundle, token, payloadFile])
            #expect(sent.status == 0, "\(sent.output)")
            let result = try JSONValue(parsing: Array(sent.output.split(separator: "\n").last.map(String.init)?.utf8 ?? "".utf8))
            #expect(result["status"]?.stringValue == "200", "\(sent.output)")
            let apnsID = try #require(result["apns_id"]?.stringValue)
            #expect(await eventually { serve.output.contains("tidings notifications respond \(apnsID)") }, "\(serve.output)")
            return apnsID
        }
        func write(_ payload: String, _ name: String) throws -> String {
            let path = dir.appendingPathComponent(name).path
            try payload.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        // Seed 000/001: mutable-content with an image URL.
        let imageID = try await push(try write("""
            {"aps":{"alert":{"title":"Image Notification","body":"Show me an image from web!"},"mutable-content":1},
             "image":"http://127.0.0.1:\(httpPort)/assets/images/background-cover.jpg"}
            """, "image.json"))
        // Seed 001's end-to-end encryption: the provider seals the alert (Examples/SecureMessages/encrypt_push.py).
        let sealed = try await RemoteProcessTests.run(python, [Self.repository.appendingPathComponent("Examples/SecureMessages/encrypt_push.py").path,
                                                               appDir.appendingPathComponent("e2e.key").path, "Alice", "See you at 8?"])
        #expect(sealed.status == 0, "\(sealed.output)")
        #expect(!sealed.output.contains("See you at 8?"), "the gateway must see only ciphertext")
        let secretID = try await push(try write(sealed.output, "sealed.json"))
        // Seed 000: a category with actions and a text input (the identifier the seed's app registers).
        let category = #"{"aps":{"alert":"Please say something","category":"saySomethingCategory"}}"#
        let actionID = try await push(try write(category, "category1.json"))
        let textID = try await push(try write(category, "category2.json"))

        // What was delivered: the image as an attachment, the message decrypted.
        let list = try await runTidings(["notifications", "list", "--app", Self.bundle, "--json", "--data-dir", data.path])
        #expect(list.status == 0, "\(list.output)")
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let delivered = try decoder.decode([AppNotification].self, from: Data(list.output.utf8))
        let byID = Dictionary(delivered.map { ($0.notification.request.identifier, $0.notification.request.content) }, uniquingKeysWith: { a, _ in a })
        let image = try #require(byID[imageID], "\(list.output)")
        #expect(image.title == "Image Notification")
        let attachment = try #require(image.attachments.first, "no attachment: \(list.output)\n\(serve.output)")
        #expect(attachment.identifier == "image_downloaded")
        #expect(attachment.type == "public.jpeg")
        #expect(try Data(contentsOf: URL(fileURLWithPath: attachment.path)) == Data(Self.jpeg))
        let secret = try #require(byID[secretID], "\(list.output)")
        #expect(secret.title == "Alice")
        #expect(secret.body == "See you at 8?")
        #expect(secret.userInfo["e2e"] == nil)
        #expect(byID[actionID]?.categoryIdentifier == "saySomethingCategory")
        #expect(list.output.contains("action.input"), "the category's actions are listed")

        // The person answers: a tap, a tap, an action, a text reply; the app's delegate prints each.
        for (id, extra, line) in [
            (imageID, [String](), "response \(imageID) action=tap remote"),
            (secretID, [], "response \(secretID) action=tap remote"),
            (actionID, ["--action", "action.goodbye"], "response \(actionID) action=action.goodbye"),
            (textID, ["--action", "action.input", "--text", "Hello from the seeds"], "response \(textID) action=action.input text=Hello from the seeds"),
        ] {
            let respond = try await runTidings(["notifications", "respond", id, "--app", Self.bundle] + extra + ["--data-dir", data.path])
            #expect(respond.status == 0, "\(respond.output)")
            #expect(await eventually { app.output.contains("SampleApp: \(line)") }, "\(app.output)")
        }

        // Each push's path in `tidings status`, in order.
        let stages = ["accepted", "stored", "delivered", "presented", "answered"]
        for id in [imageID, secretID, actionID, textID] {
            let shown = await eventually {
                let output = (try? await runTidings(["status", id, "--data-dir", data.path]))?.output ?? ""
                let seen = output.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }.filter(stages.contains)
                return seen == stages
            }
            let status = shown ? "" : (try? await runTidings(["status", id, "--data-dir", data.path]))?.output ?? ""
            #expect(shown, "\(id): \(status)")
        }
    }
}

/// A key shared by the app and the provider: 32 random bytes, base64 (as `head -c 32 /dev/urandom | base64`).
enum SymmetricKeyFile {
    static func random() -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        return Data(bytes).base64EncodedString() + "\n"
    }
}
