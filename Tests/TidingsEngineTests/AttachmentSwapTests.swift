import Foundation
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting

/// Files swapped during an `add`, links in a path's directories, and paths into other apps'
/// stores (docs/security.md, "Attachments (daemon)"). The store's `afterOpen` hook runs
/// between the checks and the copy — where the old code checked by path and then moved by
/// path — and swaps the file there.
@Suite("Attachments: swaps, links and other apps' stores", .timeLimit(.minutes(1)))
struct AttachmentSwapTests {
    static let png: [UInt8] = AttachmentStoreTests.png

    final class Scratch {
        let directory: URL
        init() throws {
            directory = URL(fileURLWithPath: "/tmp/tas-\(UUID().uuidString.prefix(8).lowercased())")
            try FileManager.default.createDirectory(at: directory.appendingPathComponent("app"), withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(at: directory) }
        var root: URL { directory.appendingPathComponent("data/attachments") }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        func store(afterOpen: (@Sendable (String) -> Void)? = nil) -> AttachmentStore {
            AttachmentStore(root: root, protectedDirectories: [directory.appendingPathComponent("data").path], afterOpen: afterOpen)
        }
        func write(_ bytes: [UInt8], _ name: String) throws -> String {
            let path = path(name)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
        func stored(_ bundle: String) -> [String] {
            (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(bundle).path)) ?? []
        }
    }

    static func attachment(_ path: String, hint: String? = nil) -> AttachmentValue {
        var value = AttachmentValue(identifier: "a", path: path, type: "")
        value.options.typeHint = hint
        return value
    }

    static func code(_ body: () throws(NotificationError) -> [AttachmentValue]) -> NotificationError.Code? {
        do throws(NotificationError) {
            _ = try body()
            return nil
        } catch {
            return error.code
        }
    }

    func isRegular(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }

    @Test("a symbolic link to /etc/passwd swapped in after the checks: the file that was checked is stored, not the link")
    func symlinkSwappedIn() throws {
        let scratch = try Scratch()
        let source = try scratch.write(Self.png, "photo.png")
        let store = scratch.store { path in
            let link = path + ".link"
            try? FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/etc/passwd")
            rename(link, path)
        }
        let stored = try store.ingest([Self.attachment(source)], bundleIdentifier: "com.example.a", appDirectory: nil)
        let path = try #require(stored.first?.path)
        #expect(isRegular(path), "a regular file in the store, not a link")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(Self.png))
        // The name now holds the app's link, which is not the file taken: it stays.
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: source)) == "/etc/passwd")
    }

    @Test("a FIFO swapped in after the checks neither blocks nor lands in the store")
    func fifoSwappedIn() throws {
        let scratch = try Scratch()
        let source = try scratch.write(Self.png, "photo.png")
        let store = scratch.store { path in
            unlink(path)
            mkfifo(path, 0o600)
        }
        let stored = try store.ingest([Self.attachment(source)], bundleIdentifier: "com.example.a", appDirectory: nil)
        let path = try #require(stored.first?.path)
        #expect(isRegular(path))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(Self.png))
        var info = stat()
        #expect(lstat(source, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "the app's FIFO is left alone")
    }

    @Test("a FIFO or a device named as the attachment: attachmentInvalidURL at once, nothing stored")
    func fifoAndDevice() throws {
        let scratch = try Scratch()
        let fifo = scratch.path("pipe.png")
        #expect(mkfifo(fifo, 0o600) == 0)
        let store = scratch.store()
        #expect(Self.code { () throws(NotificationError) in try store.ingest([Self.attachment(fifo)], bundleIdentifier: "com.example.a", appDirectory: nil) } == .attachmentInvalidURL)
        #expect(Self.code { () throws(NotificationError) in try store.ingest([Self.attachment("/dev/zero", hint: "public.png")], bundleIdentifier: "com.example.a", appDirectory: nil) } == .attachmentInvalidURL)
        #expect(scratch.stored("com.example.a").isEmpty)
    }

    @Test("bytes that change type, or grow past the limit, after the checks: the bytes copied are checked; nothing stored, the original kept")
    func bytesChangeAfterTheChecks() throws {
        let scratch = try Scratch()
        func check(_ name: String, _ expected: NotificationError.Code, change: @escaping @Sendable (String) -> Void) throws {
            let source = try scratch.write(Self.png, name)
            let store = scratch.store(afterOpen: change)
            #expect(Self.code { () throws(NotificationError) in try store.ingest([Self.attachment(source)], bundleIdentifier: "com.example.a", appDirectory: nil) } == expected, "\(name)")
            #expect(scratch.stored("com.example.a").isEmpty, "\(name)")
            #expect(FileManager.default.fileExists(atPath: source), "\(name)")
        }
        try check("text.png", .attachmentCorrupt) { path in
            try? Data("now this is text, not a PNG".utf8).write(to: URL(fileURLWithPath: path))
        }
        try check("huge.png", .attachmentInvalidFileSize) { path in
            let handle = FileHandle(forWritingAtPath: path)
            _ = try? handle?.seekToEnd()
            try? handle?.write(contentsOf: Data(count: Int(AttachmentKind.image.maximumSize)))
            try? handle?.close()
        }
    }

    @Test("another app's stored attachment, named directly, through `..`, or through a symbolic link to its folder: attachmentInvalidURL, nothing changed")
    func otherAppsStore() throws {
        let scratch = try Scratch()
        let store = scratch.store()
        let source = try scratch.write(Self.png, "photo.png")
        let theirs = try #require(try store.ingest([Self.attachment(source)], bundleIdentifier: "com.example.a", appDirectory: nil).first?.path)
        let name = (theirs as NSString).lastPathComponent
        try FileManager.default.createDirectory(at: store.directory(for: "com.example.b"), withIntermediateDirectories: true)
        let link = scratch.path("app/sneaky")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: store.directory(for: "com.example.a").path)
        let dataLink = scratch.path("app/data")
        try FileManager.default.createSymbolicLink(atPath: dataLink, withDestinationPath: scratch.path("data"))
        for path in [theirs,
                     store.directory(for: "com.example.b").path + "/../com.example.a/" + name,
                     link + "/" + name,
                     dataLink + "/attachments/com.example.a/" + name] {
            #expect(Self.code { () throws(NotificationError) in try store.ingest([Self.attachment(path)], bundleIdentifier: "com.example.b", appDirectory: nil) } == .attachmentInvalidURL, "\(path)")
        }
        #expect(scratch.stored("com.example.b").isEmpty)
        #expect(FileManager.default.fileExists(atPath: theirs))
        // The app's own stored attachment (of a delivered notification) may be added again: a copy.
        let again = try store.ingest([Self.attachment(theirs)], bundleIdentifier: "com.example.a", appDirectory: nil)
        #expect(FileManager.default.fileExists(atPath: theirs))
        #expect(try #require(again.first?.path) != theirs)
    }

    @Test("attachments per request: the limit is stored, one more is invalidRequest and nothing moves")
    func attachmentsPerRequest() throws {
        let scratch = try Scratch()
        let store = AttachmentStore(root: scratch.root, maximumAttachmentsPerRequest: 3)
        let sources = try (0..<4).map { try scratch.write(Self.png, "photo\($0).png") }
        #expect(Self.code { () throws(NotificationError) in try store.ingest(sources.map { Self.attachment($0) }, bundleIdentifier: "com.example.a", appDirectory: nil) } == .invalidRequest)
        #expect(scratch.stored("com.example.a").isEmpty)
        #expect(sources.allSatisfy { FileManager.default.fileExists(atPath: $0) })
        #expect(try store.ingest(sources.prefix(3).map { Self.attachment($0) }, bundleIdentifier: "com.example.a", appDirectory: nil).count == 3)
        #expect(scratch.stored("com.example.a").count == 3)
    }

    @Test("a symbolic link to an ordinary directory is walked, and the file under it moved")
    func linkedDirectoryElsewhere() throws {
        let scratch = try Scratch()
        let source = try scratch.write(Self.png, "app/photo.png")
        let link = scratch.path("via")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "app")
        let stored = try scratch.store().ingest([Self.attachment(link + "/photo.png")], bundleIdentifier: "com.example.a", appDirectory: nil)
        #expect(stored.count == 1)
        #expect(!FileManager.default.fileExists(atPath: source), "moved")
    }

    @Test("through the engine: app B naming app A's stored attachment is refused, A's file stays")
    func otherAppsStoreThroughTheEngine() async throws {
        let system = try await NotificationTestSystem.start()
        let a = try await system.connect("com.example.owner")
        let b = try await system.connect("com.example.thief")
        _ = await a.request(.requestAuthorization([.alert]))
        _ = await b.request(.requestAuthorization([.alert]))
        let source = system.directory.appendingPathComponent("photo.png").path
        try Data(Self.png).write(to: URL(fileURLWithPath: source))
        var content = NotificationContentValue()
        content.title = "t"
        content.attachments = [Self.attachment(source)]
        guard case .added(let added) = await a.request(.add(NotificationRequestValue(identifier: "a", content: content, trigger: .timeInterval(seconds: 60, repeats: false)))) else {
            Issue.record("A's add failed")
            return
        }
        let theirs = try #require(added.content.attachments.first?.path)
        content.attachments = [Self.attachment(theirs)]
        let reply = await b.request(.add(NotificationRequestValue(identifier: "b", content: content, trigger: .timeInterval(seconds: 60, repeats: false))))
        #expect(reply.failureCode == .attachmentInvalidURL)
        #expect(await b.pendingIdentifiers().isEmpty)
        #expect(FileManager.default.fileExists(atPath: theirs))
        await system.shutdown()
    }
}
