import Foundation
import Logging
import Synchronization
import Testing
import TidingsCore
import TidingsEngine
@testable import TidingsWeb

/// The content extension frame's capability URLs (`/x/<token>/…`), with a scripted host:
/// only the open view's document and its notification's files in the app's store, no
/// cookie needed, forgotten when the view closes.
@Suite(.serialized) struct WebContentExtensionTests {
    final class ScriptedHost: WebContentExtensions {
        let notification: DeliveredNotificationValue
        let urls = Mutex<[String]>([])
        let closed = Mutex<[UInt64]>([])
        init(notification: DeliveredNotificationValue) { self.notification = notification }

        func open(app: String, identifier: String, frameOrigin: String, attachmentURLs: @escaping @Sendable (UInt64, DeliveredNotificationValue) -> [String]) async throws -> WebExtensionView {
            let given = attachmentURLs(7, notification)
            urls.withLock { $0 = given }
            return WebExtensionView(session: 7, document: "<!doctype html><p>view</p>", contentSecurityPolicy: "default-src 'none'; img-src \(frameOrigin)",
                                    sandbox: "", heightRatio: 0.5, defaultContentHidden: false, title: nil, actions: [], failure: nil)
        }
        func perform(session: UInt64, action: String, text: String?) async throws -> WebExtensionOutcome { .dismissed }
        func media(session: UInt64, play: Bool) async throws -> WebExtensionOutcome { .dismissed }
        func userEvent(session: UInt64, element: String, value: String) async throws -> WebExtensionOutcome { .dismissed }
        func close(session: UInt64) async { closed.withLock { $0.append(session) } }
        func events(session: UInt64) async -> AsyncStream<WebExtensionOutcome> { AsyncStream { _ in } }
    }

    @Test(.timeLimit(.minutes(1))) func capabilityURLsServeOnlyTheOpenViewsFiles() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("web-ext-\(UUID().uuidString.prefix(8))").path
        let store = directory + "/attachments/com.example.app"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data([0x89, 0x50, 0x4E, 0x47]).write(to: URL(fileURLWithPath: store + "/a.png"))
        try Data("secret".utf8).write(to: URL(fileURLWithPath: directory + "/outside.png"))
        var content = NotificationContentValue()
        content.title = "t"
        content.attachments = [AttachmentValue(identifier: "in", path: store + "/a.png", type: "public.png"),
                               AttachmentValue(identifier: "out", path: directory + "/outside.png", type: "public.png")]
        let host = ScriptedHost(notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: "n", content: content, trigger: nil), date: Date()))
        let center = try WebCenter(configuration: WebCenterConfiguration(dataDirectory: directory, port: 0),
                                   hub: WebHub(attachmentsRoot: directory + "/attachments", logger: Logger(label: "test")),
                                   admin: { _ in .ok }, contentExtensions: host)
        let task = Task { try await center.run() }
        defer { task.cancel() }
        let port = await center.url().port ?? 0
        let origin = "http://127.0.0.1:\(port)"
        func get(_ path: String) async -> String {
            await WebCenterLimitsTests.blocking {
                let fd = WebCenterLimitsTests.connectTo(port)
                defer { close(fd) }
                let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
                _ = request.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
                return WebCenterLimitsTests.readAll(fd, timeout: 30)
            }
        }

        #expect(await WebCenterLimitsTests.blocking { WebCenterLimitsTests.post(center, port, "/api/extension/open", #"{"app":"com.example.app","identifier":"n"}"#) } == 200)
        let urls = host.urls.withLock { $0 }
        #expect(urls.count == 2 && urls[0].hasPrefix("\(origin)/x/") && urls[0].hasSuffix("/0") && urls[1].isEmpty)
        let base = String(urls[0].dropFirst(origin.count).dropLast(2))
        let frame = await get(base + "/frame")
        #expect(frame.hasPrefix("HTTP/1.1 200"))
        #expect(frame.contains("<p>view</p>"))
        #expect(frame.lowercased().contains("content-security-policy: default-src 'none'; img-src \(origin); frame-ancestors \(origin)"))
        #expect(!frame.lowercased().contains("x-frame-options"))
        #expect(await get(base + "/0").hasPrefix("HTTP/1.1 200"))
        #expect(await get(base + "/1").hasPrefix("HTTP/1.1 404"))
        #expect(await get(base + "/..%2F..%2Foutside.png").hasPrefix("HTTP/1.1 404"))
        #expect(await get("/x/" + String(repeating: "0", count: 64) + "/frame").hasPrefix("HTTP/1.1 404"))

        #expect(await WebCenterLimitsTests.blocking { WebCenterLimitsTests.post(center, port, "/api/extension/close", #"{"session":7}"#) } == 200)
        #expect(host.closed.withLock { $0 } == [7])
        #expect(await get(base + "/frame").hasPrefix("HTTP/1.1 404"))
        #expect(await get(base + "/0").hasPrefix("HTTP/1.1 404"))
    }
}
