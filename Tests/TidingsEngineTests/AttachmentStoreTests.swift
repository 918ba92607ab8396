import Foundation
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting

@Suite("Attachments in the data store")
struct AttachmentStoreTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52] + Array(repeating: 0, count: 64)

    func write(_ bytes: [UInt8], to path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    func request(_ id: String, attachments: [AttachmentValue]) -> AppRequest {
        var content = NotificationContentValue()
        content.title = "With a picture"
        content.attachments = attachments
        return .add(NotificationRequestValue(identifier: id, content: content, trigger: .timeInterval(seconds: 60, repeats: false)))
    }

    /// Past the delivered limit the oldest notification leaves the list, the presenters and its
    /// files, as a removal does; a newer one's file stays.
    @Test("a notification trimmed off the delivered list takes its files with it")
    func trimmedNotificationsFilesGo() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite, deliveredLimit: 1)
        let app = try await system.connect("com.example.trim")
        _ = await app.request(.requestAuthorization([.alert]))
        var stored: [String] = []
        for id in ["old", "new"] {
            let source = system.directory.appendingPathComponent("\(id).png").path
            try write(Self.png, to: source)
            var content = NotificationContentValue()
            content.title = id
            content.attachments = [AttachmentValue(identifier: id, path: source, type: "")]
            let reply = await app.request(.add(NotificationRequestValue(identifier: id, content: content, trigger: nil)))
            guard case .added(let request) = reply else { Issue.record("not added: \(reply)"); return }
            stored.append(try #require(request.content.attachments.first?.path))
            await system.settle()
        }
        let trimmedFile = stored[0]
        #expect(await eventually { !FileManager.default.fileExists(atPath: trimmedFile) }, "the trimmed notification's file went")
        #expect(FileManager.default.fileExists(atPath: stored[1]))
        #expect(try await system.engine.deliveredNotifications("com.example.trim").map(\.request.identifier) == ["new"])
        #expect(system.presenter.events.contains(.withdrawn(bundleIdentifier: "com.example.trim", identifiers: ["old"])))
        await system.shutdown()
    }

    @Test("add moves the file into the app's store; removing the request deletes it")
    func moveAndDelete() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite)
        let app = try await system.connect("com.example.pics")
        _ = await app.request(.requestAuthorization([.alert]))
        let source = system.directory.appendingPathComponent("photo.png").path
        try write(Self.png, to: source)
        let reply = await app.request(request("p", attachments: [AttachmentValue(identifier: "photo", path: source, type: "")]))
        guard case .added(let stored) = reply else { Issue.record("not added: \(reply)"); return }
        let storedPath = try #require(stored.content.attachments.first?.path)
        #expect(!FileManager.default.fileExists(atPath: source), "moved, not copied")
        #expect(FileManager.default.fileExists(atPath: storedPath))
        #expect(storedPath.hasPrefix(system.directory.appendingPathComponent("attachments/com.example.pics/").path))
        #expect(stored.content.attachments.first?.type == "public.png")
        app.send(.removePending(["p"]))
        #expect(await app.pendingIdentifiers().isEmpty)
        // Files go after the removal is durable, a moment after the fire-and-forget call.
        #expect(await eventually { !FileManager.default.fileExists(atPath: storedPath) })
        await system.shutdown()
    }

    @Test("replacing a pending request, or evicting one at the iOS limit, deletes its files", arguments: [false, true])
    func replacedAndEvictedFilesGo(evict: Bool) async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite, pendingLimit: evict ? 1 : nil)
        let app = try await system.connect("com.example.replace")
        _ = await app.request(.requestAuthorization([.alert]))
        var stored: [String] = []
        let ids = evict ? ["first", "second"] : ["same", "same"]
        for (n, id) in ids.enumerated() {
            let source = system.directory.appendingPathComponent("photo\(n).png").path
            try write(Self.png, to: source)
            guard case .added(let added) = await app.request(request(id, attachments: [AttachmentValue(identifier: "photo", path: source, type: "")])) else {
                Issue.record("not added")
                return
            }
            stored.append(try #require(added.content.attachments.first?.path))
        }
        #expect(await app.pendingIdentifiers() == (evict ? ["second"] : ["same"]))
        await system.settle()
        #expect(!FileManager.default.fileExists(atPath: stored[0]), "the old request's file went with it")
        #expect(FileManager.default.fileExists(atPath: stored[1]))
        await system.shutdown()
    }

    @Test("a file inside the app's own directory is copied")
    func copyFromBundle() async throws {
        let system = try await NotificationTestSystem.start()
        let record = try await system.install("com.example.bundle")
        let app = try await system.connect("com.example.bundle")
        _ = await app.request(.requestAuthorization([.alert]))
        let source = record.directory + "/icon.png"
        try write(Self.png, to: source)
        let reply = await app.request(request("b", attachments: [AttachmentValue(identifier: "icon", path: source, type: "")]))
        #expect(reply.isSuccess)
        #expect(FileManager.default.fileExists(atPath: source))
        await system.shutdown()
    }

    @Test("missing, symlinked, mistyped or corrupt files: the matching error, nothing scheduled, nothing moved")
    func invalidFiles() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.badpics")
        _ = await app.request(.requestAuthorization([.alert]))
        let dir = system.directory.path
        let good = dir + "/good.png"
        try write(Self.png, to: good)
        let link = dir + "/link.png"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: good)
        let text = dir + "/notes.txt"
        try write(Array("hello".utf8), to: text)
        let fake = dir + "/fake.png"
        try write(Array("not a png at all".utf8), to: fake)

        #expect(await app.request(request("1", attachments: [AttachmentValue(identifier: "a", path: dir + "/missing.png", type: "")])).failureCode == .attachmentInvalidURL)
        #expect(await app.request(request("2", attachments: [AttachmentValue(identifier: "a", path: link, type: "")])).failureCode == .attachmentInvalidURL)
        #expect(await app.request(request("3", attachments: [AttachmentValue(identifier: "a", path: text, type: "")])).failureCode == .attachmentUnrecognizedType)
        #expect(await app.request(request("4", attachments: [AttachmentValue(identifier: "a", path: fake, type: "")])).failureCode == .attachmentCorrupt)
        #expect(await app.request(request("5", attachments: [AttachmentValue(identifier: "a", path: "relative/x.png", type: "")])).failureCode == .attachmentInvalidURL)
        // The good file in a batch with a bad one goes back where it was.
        #expect(await app.request(request("6", attachments: [AttachmentValue(identifier: "g", path: good, type: ""), AttachmentValue(identifier: "f", path: fake, type: "")])).failureCode == .attachmentCorrupt)
        #expect(FileManager.default.fileExists(atPath: good))
        #expect(await app.pendingIdentifiers().isEmpty)
        await system.shutdown()
    }

    @Test("the per-app quota is a clear error")
    func quota() throws {
        let root = TemporaryDirectories.make(prefix: "tidings-quota-")
        let store = AttachmentStore(root: root, quota: 100)
        let source = root.path + "-photo.png"
        defer { for path in [root.path, source] { try? FileManager.default.removeItem(atPath: path) } }
        try write(Self.png, to: source)
        _ = try store.ingest([AttachmentValue(identifier: "a", path: source, type: "")], bundleIdentifier: "com.example.q", appDirectory: nil)
        try write(Self.png, to: source)
        #expect(throws: NotificationError.self) {
            _ = try store.ingest([AttachmentValue(identifier: "b", path: source, type: "")], bundleIdentifier: "com.example.q", appDirectory: nil)
        }
        #expect(FileManager.default.fileExists(atPath: source))
    }

    @Test("delete never touches paths outside the app's store")
    func deleteStaysInside() throws {
        let root = TemporaryDirectories.make(prefix: "tidings-escape-")
        let store = AttachmentStore(root: root)
        try FileManager.default.createDirectory(at: store.directory(for: "com.example.e"), withIntermediateDirectories: true)
        let outside = root.path + "-victim.png"
        defer { for path in [root.path, outside] { try? FileManager.default.removeItem(atPath: path) } }
        try write(Self.png, to: outside)
        store.delete([AttachmentValue(identifier: "x", path: store.directory(for: "com.example.e").path + "/../../" + (outside as NSString).lastPathComponent, type: "")], bundleIdentifier: "com.example.e")
        store.delete([AttachmentValue(identifier: "y", path: outside, type: "")], bundleIdentifier: "com.example.e")
        #expect(FileManager.default.fileExists(atPath: outside))
    }
}
