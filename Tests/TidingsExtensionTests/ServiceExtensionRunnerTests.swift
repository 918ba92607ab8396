import Foundation
import Testing
import TidingsCore
@testable import TidingsDaemon
import TidingsEngine
import TidingsTesting

/// The runner with real extension processes (the `TestServiceExtension` fixture): the
/// happy path, the deadline on a test clock, every way an extension can fail, process
/// reuse, and attachments.
@Suite("Service extension runner")
struct ServiceExtensionRunnerTests {
    @Test("didReceive modifies the content, on the main thread, with the extension's bundle id in its environment")
    func modifies() async throws {
        let h = try ExtensionHarness()
        let outcome = await h.modify(h.request("modify"))
        #expect(outcome.failure == nil)
        #expect(outcome.content.title == "modified: Hello")
        #expect(outcome.content.body == "original body")
        #expect(outcome.content.subtitle == h.record.bundleIdentifier)
        #expect(outcome.content.userInfo["mainThread"] == .bool(true))
        #expect(outcome.processIdentifier != nil)
        await h.close()
    }

    @Test("after the deadline, serviceExtensionTimeWillExpire's best attempt is delivered and the process is not reused")
    func bestAttemptAfterDeadline() async throws {
        let h = try ExtensionHarness()
        let task = await h.start(h.request("best-attempt"))
        #expect(h.clock.sleeperCount == 1)
        h.clock.advance(by: 29)
        #expect(h.clock.sleeperCount == 1, "nothing happens before the 30 s deadline")
        h.clock.advance(by: 1)
        let outcome = await task.value
        #expect(outcome.content.title == "best attempt: Hello")
        #expect(outcome.failure?.contains("best attempt") == true)
        #expect(await h.runner.warmProcess(for: h.record.bundleIdentifier) == nil)
        let pid = try #require(outcome.processIdentifier)
        #expect(await eventually { !processExists(pid) })
        await h.close()
    }

    @Test("an extension that hangs past a configured deadline and the grace is killed; the original content is delivered")
    func hangIsKilled() async throws {
        let h = try ExtensionHarness(deadline: 10, grace: 1)
        let task = await h.start(h.request("hang"))
        h.clock.advance(by: 10)
        // The deadline's sleeper is gone; the grace period's comes.
        #expect(await eventually { h.clock.sleeperCount == 1 })
        h.clock.advance(by: 1)
        let outcome = await task.value
        #expect(outcome.content == h.request("hang", identifier: "x").content)
        #expect(outcome.failure?.contains("killed") == true)
        let pid = try #require(outcome.processIdentifier)
        #expect(await eventually { !processExists(pid) })
        await h.close()
    }

    @Test("a crash delivers the original content and says how the process ended")
    func crash() async throws {
        let h = try ExtensionHarness()
        let request = h.request("crash")
        let outcome = await h.modify(request)
        #expect(outcome.content == request.content)
        #expect(outcome.failure?.contains("signal") == true)
        await h.close()
    }

    @Test("garbage on the channel delivers the original content and kills the process")
    func garbage() async throws {
        let h = try ExtensionHarness()
        let request = h.request("garbage")
        let outcome = await h.modify(request)
        #expect(outcome.content == request.content)
        #expect(outcome.failure?.contains("garbage") == true)
        let pid = try #require(outcome.processIdentifier)
        #expect(await eventually { !processExists(pid) })
        #expect(await h.runner.warmProcess(for: h.record.bundleIdentifier) == nil)
        await h.close()
    }

    @Test("memory over the default limit delivers the original content; the same request without the limit succeeds")
    func memoryLimit() async throws {
        let limited = try ExtensionHarness()
        let limit = ServiceExtensionConfiguration.defaultMemoryLimit >> 20
        let request = limited.request("memory", ["megabytes": .integer(Int64(limit + 256))])
        let outcome = await limited.modify(request)
        #expect(outcome.content == request.content)
        #expect(outcome.failure?.contains("memory over the limit of \(limit) MiB") == true)
        await limited.close()

        let unlimited = try ExtensionHarness(memoryLimit: nil)
        let control = await unlimited.modify(request)
        #expect(control.failure == nil)
        #expect(control.content.body == "allocated \(limit + 256) MiB")
        await unlimited.close()
    }

    @Test("a warm process serves sequential requests; a failed one is never reused")
    func warmReuse() async throws {
        let h = try ExtensionHarness()
        let first = await h.modify(h.request("modify"))
        let second = await h.modify(h.request("modify"))
        let pid = try #require(first.processIdentifier)
        #expect(second.processIdentifier == pid)
        #expect(await h.runner.warmProcess(for: h.record.bundleIdentifier) == pid)

        let crashed = await h.modify(h.request("crash"))
        #expect(crashed.processIdentifier == pid, "the crash happens in the warm process")
        #expect(crashed.failure != nil)
        #expect(await h.runner.warmProcess(for: h.record.bundleIdentifier) == nil)

        let after = await h.modify(h.request("modify"))
        #expect(after.failure == nil)
        #expect(after.processIdentifier != nil && after.processIdentifier != pid)
        await h.close()
    }

    @Test("a warm process that died while idle is replaced at the next push")
    func deadWarmProcessIsReplaced() async throws {
        let h = try ExtensionHarness()
        let pid = try #require(await h.modify(h.request("modify")).processIdentifier)
        kill(pid, SIGKILL)
        // Once the runner has seen the channel close or the exit, the process is not warm.
        #expect(await eventually { await h.runner.warmProcess(for: h.record.bundleIdentifier) == nil })
        let next = await h.modify(h.request("modify"))
        #expect(next.failure == nil)
        #expect(next.content.title == "modified: Hello")
        #expect(next.processIdentifier != nil && next.processIdentifier != pid)
        await h.close()
    }

    @Test("a push that arrives while the extension's process is busy gets a process of its own")
    func busyProcessIsNotShared() async throws {
        let h = try ExtensionHarness()
        let warm = try #require(await h.modify(h.request("modify")).processIdentifier)
        let slow = await h.start(h.request("best-attempt"))
        let meanwhile = await h.modify(h.request("modify"))
        #expect(meanwhile.failure == nil)
        #expect(meanwhile.processIdentifier != warm)
        h.clock.advance(by: 30)
        let late = await slow.value
        #expect(late.processIdentifier == warm)
        #expect(late.content.title == "best attempt: Hello")
        await h.close()
    }

    @Test("without reuse, each request gets a new process")
    func noReuse() async throws {
        let h = try ExtensionHarness(reuse: false)
        let first = await h.modify(h.request("modify"))
        let second = await h.modify(h.request("modify"))
        #expect(first.failure == nil && second.failure == nil)
        #expect(first.processIdentifier != second.processIdentifier)
        await h.close()
    }

    @Test("an executable that cannot start delivers the original content")
    func missingExecutable() async throws {
        let h = try ExtensionHarness(executable: "/nonexistent/extension")
        let request = h.request("modify")
        let outcome = await h.modify(request)
        #expect(outcome.content == request.content)
        #expect(outcome.failure?.contains("cannot start") == true)
        await h.close()
    }

    @Test("attachments from the extension land in the app's store; corrupt ones and files outside its container are left out",
          arguments: [false, true])
    func attachments(behindSymlink: Bool) async throws {
        let h = try ExtensionHarness(behindSymlink: behindSymlink)
        let outside = h.directory.appendingPathComponent("outside.png")
        try Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0, count: 24)).write(to: outside)
        let outcome = await h.modify(h.request("attach", ["outside": .string(outside.path)]))
        #expect(outcome.failure == nil)
        #expect(outcome.content.attachments.map(\.identifier) == ["good"])
        let stored = try #require(outcome.content.attachments.first)
        #expect(h.attachments.contains(stored.path, bundleIdentifier: h.app.bundleIdentifier))
        #expect(FileManager.default.fileExists(atPath: stored.path))
        #expect(stored.type == "public.png")
        #expect(outcome.rejectedAttachments.count == 2)
        #expect(outcome.rejectedAttachments.contains { $0.hasPrefix("corrupt:") })
        #expect(outcome.rejectedAttachments.contains { $0.hasPrefix("outside:") })
        #expect(FileManager.default.fileExists(atPath: outside.path), "a file outside the container is never moved")
        // The request's staging directory is gone.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: h.container + "/tmp")
        #expect(leftovers.isEmpty)
        await h.close()
    }
}

extension ServiceExtensionRunnerTests {
    @Test("with the data directory protected, as in the daemon: the extension's own container is allowed for its call; another extension's container and the app store's files are not")
    func ownContainerOnly() async throws {
        let h = try ExtensionHarness(protectDataDirectory: true)
        // A file in another extension's container (under the data directory).
        let other = h.directory.appendingPathComponent("data/extensions/com.example.tests.other")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        let theirs = other.appendingPathComponent("theirs.png")
        try Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0, count: 24)).write(to: theirs)
        let outcome = await h.modify(h.request("attach", ["outside": .string(theirs.path)]))
        #expect(outcome.content.attachments.map(\.identifier) == ["good"], "\(outcome.rejectedAttachments)")
        #expect(outcome.rejectedAttachments.contains { $0.hasPrefix("outside:") })
        #expect(FileManager.default.fileExists(atPath: theirs.path))
        // The store itself allows no container for app adds.
        let own = h.container + "/mine.png"
        try FileManager.default.createDirectory(atPath: h.container, withIntermediateDirectories: true)
        try Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0, count: 24)).write(to: URL(fileURLWithPath: own))
        #expect(throws: NotificationError.self) {
            _ = try h.attachments.ingest([AttachmentValue(identifier: "m", path: own, type: "")], bundleIdentifier: h.app.bundleIdentifier, appDirectory: nil)
        }
        await h.close()
    }
}

@Suite("Service extension request state machine")
struct ServiceExtensionRequestStateMachineTests {
    typealias Machine = ServiceExtensionRequestStateMachine

    var content: NotificationContentValue {
        var content = NotificationContentValue()
        content.title = "t"
        return content
    }

    @Test func contentInTimeIsDeliveredAndTheProcessKept() {
        var m = Machine(deadline: 30, grace: 2)
        #expect(m.handle(.content(content)) == .deliver(content, note: nil, reuseProcess: true))
        #expect(m.handle(.deadlinePassed) == .wait)
    }

    @Test func deadlineThenContentIsABestAttempt() {
        var m = Machine(deadline: 30, grace: 2)
        #expect(m.handle(.graceOver) == .wait)
        #expect(m.handle(.deadlinePassed) == .sendTimeWillExpire)
        #expect(m.handle(.deadlinePassed) == .wait)
        guard case .deliver(let delivered, let note?, false) = m.handle(.content(content)) else {
            Issue.record("expected a best attempt")
            return
        }
        #expect(delivered == content)
        #expect(note.contains("30 s"))
        #expect(m.state == .finished)
    }

    @Test func graceOverDeliversTheOriginal() {
        var m = Machine(deadline: 30, grace: 2)
        _ = m.handle(.deadlinePassed)
        guard case .deliverOriginal(let failure) = m.handle(.graceOver) else {
            Issue.record("expected the original")
            return
        }
        #expect(failure.contains("killed"))
        #expect(m.handle(.content(content)) == .wait, "a reply after the kill is ignored")
    }

    @Test(arguments: [Machine.Event.garbage("x"), .closed("exited with status 1"), .invalidContent("badge")])
    func failuresDeliverTheOriginal(event: Machine.Event) {
        for expiring in [false, true] {
            var m = Machine(deadline: 30, grace: 2)
            if expiring { _ = m.handle(.deadlinePassed) }
            guard case .deliverOriginal = m.handle(event) else {
                Issue.record("expected the original for \(event)")
                return
            }
            #expect(m.handle(.content(content)) == .wait)
        }
    }
}
