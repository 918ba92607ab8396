import Foundation
import Synchronization
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting

/// The quota under concurrent adds, descriptors per add, and bundle identifiers that are no
/// folder names (docs/security.md, "Attachments (daemon)").
@Suite("Attachments: quota under concurrency, descriptors, bundle identifiers", .timeLimit(.minutes(1)))
struct AttachmentLimitsTests {
    typealias Scratch = AttachmentSwapTests.Scratch
    static let png = AttachmentStoreTests.png

    /// Lets the first caller of `wait` stop there until `release`; later callers go on.
    final class FirstStops: Sendable {
        private let state = Mutex((arrived: 0, released: false))
        private let gate = DispatchSemaphore(value: 0)

        var arrived: Int { state.withLock { $0.arrived } }

        func wait() {
            let first = state.withLock { state -> Bool in
                state.arrived += 1
                return state.arrived == 1 && !state.released
            }
            if first { gate.wait() }
        }

        func release() {
            state.withLock { $0.released = true }
            gate.signal()
        }
    }

    @Test("two adds of one app whose files together pass the quota: the second is refused while the first copies; the store stays within the quota")
    func concurrentAddsKeepTheQuota() async throws {
        let scratch = try Scratch()
        let stops = FirstStops()
        // Room for one file of 80 bytes, not two.
        let store = AttachmentStore(root: scratch.root, quota: Int64(Self.png.count) * 2 - 1, afterOpen: { _ in stops.wait() })
        let first = try scratch.write(Self.png, "first.png")
        let second = try scratch.write(Self.png, "second.png")
        // The first add stops after its checks, before its copy exists.
        let firstAdd = Task {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<[AttachmentValue], NotificationError>, Never>) in
                // On a thread of its own: it blocks in `afterOpen` until released.
                Thread.detachNewThread {
                    continuation.resume(returning: Result { () throws(NotificationError) in
                        try store.ingest([AttachmentSwapTests.attachment(first)], bundleIdentifier: "com.example.q", appDirectory: nil)
                    })
                }
            }
        }
        #expect(await eventually(within: 10) { stops.arrived == 1 })
        let secondAdd = AttachmentSwapTests.code { () throws(NotificationError) in
            try store.ingest([AttachmentSwapTests.attachment(second)], bundleIdentifier: "com.example.q", appDirectory: nil)
        }
        #expect(secondAdd == .attachmentMoveIntoDataStoreFailed, "the first add's bytes are reserved")
        #expect(FileManager.default.fileExists(atPath: second), "the refused file stays")
        stops.release()
        #expect(try await firstAdd.value.get().count == 1)
        #expect(scratch.stored("com.example.q").count == 1)
        // Once the first is stored and its reservation released, the store counts it: still full.
        #expect(AttachmentSwapTests.code { () throws(NotificationError) in
            try store.ingest([AttachmentSwapTests.attachment(second)], bundleIdentifier: "com.example.q", appDirectory: nil)
        } == .attachmentMoveIntoDataStoreFailed)
        // Another app's reservations and files are its own.
        #expect(try store.ingest([AttachmentSwapTests.attachment(second)], bundleIdentifier: "com.example.other", appDirectory: nil).count == 1)
        withExtendedLifetime(scratch) {}
    }

    /// The descriptors this process holds open on `directory`.
    static func descriptors(on directory: String) -> Int {
        let target = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == target }.count
    }

    @Test("100 attachments in one directory hold one descriptor of it, not 100")
    func oneDescriptorPerDirectory() throws {
        let scratch = try Scratch()
        let folder = scratch.path("app/many")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let sources = try (0..<100).map { try scratch.write(Self.png, "app/many/\($0).png") }
        let held = Counts()
        let store = AttachmentStore(root: scratch.root, maximumAttachmentsPerRequest: 100, afterOpen: { _ in
            let count = Self.descriptors(on: folder)
            held.values.withLock { $0.append(count) }
        })
        let stored = try store.ingest(sources.map { AttachmentSwapTests.attachment($0) }, bundleIdentifier: "com.example.fd", appDirectory: nil)
        #expect(stored.count == 100)
        let counts = held.values.withLock { $0 }
        #expect(counts.count == 100)
        #expect(counts.max() == 1, "descriptors of the folder while the 100 files were copied: \(counts.suffix(3))")
        #expect(Self.descriptors(on: folder) == 0, "all closed after the add")
        withExtendedLifetime(scratch) {}
    }

    final class Counts: Sendable {
        let values = Mutex<[Int]>([])
    }

    @Test("bundle identifiers that are no reverse-DNS name: refused by the store (invalidRequest), no folder made; 255 characters pass, 256 do not")
    func bundleIdentifiers() throws {
        let scratch = try Scratch()
        let store = scratch.store()
        let longest = "com." + String(repeating: "a", count: BundleIdentifier.maximumLength - 4)
        #expect(longest.count == 255 && BundleIdentifier.isValid(longest))
        for bad in ["..", "../escape", "com.example/../../x", ".hidden.app", "com..example", "com.example.", "single", "", "com.ex ample", "com.exämple", longest + "a"] {
            #expect(!BundleIdentifier.isValid(bad), "\(bad)")
            let source = try scratch.write(Self.png, "bad.png")
            #expect(AttachmentSwapTests.code { () throws(NotificationError) in
                try store.ingest([AttachmentSwapTests.attachment(source)], bundleIdentifier: bad, appDirectory: nil)
            } == .invalidRequest, "\(bad)")
            #expect(FileManager.default.fileExists(atPath: source), "\(bad): the file stays")
        }
        // Nothing was made beside or above the store's own folder.
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: scratch.root.path)) ?? []).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: scratch.path("data/escape")))
        for good in ["com.example.app", "org.example-1.App2", longest] {
            #expect(BundleIdentifier.isValid(good), "\(good)")
        }
        withExtendedLifetime(scratch) {}
    }

    @Test("install refuses an app whose bundle identifier is no reverse-DNS name")
    func installRefusesBadIdentifiers() async throws {
        let system = try await NotificationTestSystem.start()
        for bad in ["..", "a/b", ".x.y"] {
            let record = AppRecord(bundleIdentifier: bad, displayName: bad, executable: "/usr/bin/true", directory: system.directory.path, installedAt: Date())
            await #expect(throws: NotificationError.self, "\(bad)") { try await system.engine.install(record) }
        }
        #expect(try await system.engine.installedApps().isEmpty)
        await system.shutdown()
    }
}
