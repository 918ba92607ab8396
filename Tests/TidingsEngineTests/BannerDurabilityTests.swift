import Foundation
import Synchronization
import Testing
import TidingsCore
import TidingsEngine
import TidingsSQLite
import TidingsTesting

/// A presenter that stops in the middle of `present`, as a process killed there would: it
/// records that it was asked, and (if told so) that the banner was shown, then waits until
/// the test lets it go. An engine whose presenter waits there is a crashed engine: the test
/// starts a second engine on the same database, as the daemon starts again after `kill -9`.
final class StalledPresenter: Presenter {
    enum Stall: Sendable { case beforeShowing, afterShowing }
    private struct State {
        var asked: [String] = []
        var shown: [String] = []
        var waiting: [CheckedContinuation<Void, Never>] = []
        var released = false
    }
    private let state = Mutex(State())
    let stall: Stall

    init(_ stall: Stall) { self.stall = stall }

    var asked: [String] { state.withLock { $0.asked } }
    var shown: [String] { state.withLock { $0.shown } }

    func present(_ notification: PresentedNotification) async {
        let identifier = notification.notification.request.identifier
        state.withLock {
            $0.asked.append(identifier)
            if stall == .afterShowing { $0.shown.append(identifier) }
        }
        await withCheckedContinuation { continuation in
            let go = state.withLock { state -> Bool in
                if state.released { return true }
                state.waiting.append(continuation)
                return false
            }
            if go { continuation.resume() }
        }
    }

    /// Lets the stalled engine go on (at the end of a test, to clean up).
    func release() {
        let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.released = true
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

@Suite("Banners at least once across a crash")
struct BannerDurabilityTests {
    /// Starts an engine with a stalled presenter, adds an immediate and a timed request, and
    /// "crashes" it in `present`, after the fires committed (the delivered list has both).
    func crashWhilePresenting(_ stall: StalledPresenter.Stall, directory: URL) async throws -> (StalledPresenter, EngineUnderTest) {
        let presenter = StalledPresenter(stall)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try SQLiteDeviceStore(path: directory.appendingPathComponent("device.sqlite").path)
        let system = try await EngineUnderTest.start(clock: TestWallClock(), store: store, directory: directory, presenters: [presenter])
        let app = try await EngineUnderTest.connect(system.engine, "com.example.banners", directory: directory)
        _ = await app.request(.requestAuthorization([.alert, .sound]))
        #expect(await app.add("now", trigger: nil).isSuccess)
        #expect(await eventually { presenter.asked == ["now"] })
        #expect(await app.deliveredIdentifiers() == ["now"], "the fire committed")
        return (presenter, system)
    }

    @Test("a crash after the fire's commit and before the presenters showed it: the banner is shown at the next start")
    func crashBeforePresenting() async throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-banner-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (stalled, crashed) = try await crashWhilePresenting(.beforeShowing, directory: directory)
        #expect(stalled.shown.isEmpty)

        let restarted = try await NotificationTestSystem.start(storage: .sqlite, directory: directory)
        await restarted.settle()
        #expect(restarted.presenter.presentedIdentifiers == ["now"], "delivered but never shown: shown now")
        #expect(restarted.presenter.presented.first?.presentation.banner == true)
        let app = try await restarted.connect("com.example.banners", state: .background)
        #expect(await app.deliveredIdentifiers() == ["now"], "still listed once")
        let store = await restarted.engine.configuration.store
        #expect(await eventually { (try? await store.unpresented().value)?.isEmpty == true })
        await restarted.shutdown(removeFiles: false)

        // Once shown and marked, never again.
        let third = try await NotificationTestSystem.start(storage: .sqlite, directory: directory)
        await third.settle()
        #expect(third.presenter.presented.isEmpty)
        await third.shutdown(removeFiles: false)
        stalled.release()
        await crashed.stop()
    }

    @Test("a crash after the presenters showed it and before the mark: at most one extra banner")
    func crashBeforeTheMark() async throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-banner-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (stalled, crashed) = try await crashWhilePresenting(.afterShowing, directory: directory)
        #expect(stalled.shown == ["now"])

        let restarted = try await NotificationTestSystem.start(storage: .sqlite, directory: directory)
        await restarted.settle()
        #expect(restarted.presenter.presentedIdentifiers == ["now"], "the one extra banner")
        let store = await restarted.engine.configuration.store
        #expect(await eventually { (try? await store.unpresented().value)?.isEmpty == true })
        await restarted.shutdown(removeFiles: false)

        let third = try await NotificationTestSystem.start(storage: .sqlite, directory: directory)
        await third.settle()
        #expect(third.presenter.presented.isEmpty, "no second extra")
        await third.shutdown(removeFiles: false)
        stalled.release()
        await crashed.stop()
    }

    @Test("a banner the delivered list does not keep, shown again after a crash: its attachment files go once shown")
    func replayedBannerReleasesItsFiles() async throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-banner-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let presenter = StalledPresenter(.beforeShowing)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try SQLiteDeviceStore(path: directory.appendingPathComponent("device.sqlite").path)
        let crashed = try await EngineUnderTest.start(clock: TestWallClock(), store: store, directory: directory, presenters: [presenter])
        let bundle = "com.example.banners"
        let app = try await EngineUnderTest.connect(crashed.engine, bundle, directory: directory)
        _ = await app.request(.requestAuthorization([.alert]))
        // A banner, not kept in the notification center's list.
        _ = try await crashed.engine.updateSettings(bundle) { $0.notificationCenterSetting = .disabled }
        let source = directory.appendingPathComponent("photo.png").path
        try Data(AttachmentStoreTests.png).write(to: URL(fileURLWithPath: source))
        var content = NotificationContentValue()
        content.title = "With a picture"
        content.attachments = [AttachmentValue(identifier: "p", path: source, type: "")]
        guard case .added(let added) = await app.request(.add(NotificationRequestValue(identifier: "now", content: content, trigger: nil))) else {
            Issue.record("the add failed")
            return
        }
        let stored = try #require(added.content.attachments.first?.path)
        #expect(await eventually { presenter.asked == ["now"] })
        #expect(await app.deliveredIdentifiers().isEmpty, "not in the list")
        #expect(FileManager.default.fileExists(atPath: stored), "the crashed engine never showed it")

        let restarted = try await NotificationTestSystem.start(storage: .sqlite, directory: directory)
        await restarted.settle()
        #expect(restarted.presenter.presentedIdentifiers == ["now"], "shown at the next start")
        #expect(await eventually(within: 10) { !FileManager.default.fileExists(atPath: stored) }, "nothing refers to the file any more")
        await restarted.shutdown(removeFiles: false)
        presenter.release()
        await crashed.stop()
    }

    @Test("a timed and a delegate-asked fire are presented only after their commit, and their records go once shown", arguments: [NotificationTestSystem.Storage.memory, .sqlite])
    func recordsGoOnceShown(storage: NotificationTestSystem.Storage) async throws {
        let system = try await NotificationTestSystem.start(storage: storage)
        let background = try await system.connect("com.example.timed", state: .background)
        _ = await background.request(.requestAuthorization([.alert]))
        #expect(await background.add("timed", trigger: .timeInterval(seconds: 60, repeats: true)).isSuccess)
        let foreground = try await system.connect("com.example.asked", state: .active)
        _ = await foreground.request(.requestAuthorization([.alert]))
        let asked = ScriptedApp(foreground, presentationOptions: [.banner, .list])
        _ = await foreground.request(.setDelegate(true))
        #expect(await foreground.add("asked", trigger: .timeInterval(seconds: 60, repeats: false)).isSuccess)
        await system.advance(by: 60)
        #expect(Set(system.presenter.presentedIdentifiers) == ["timed", "asked"])
        #expect(asked.willPresentCount == 1)
        let store = await system.engine.configuration.store
        #expect(await eventually { (try? await store.unpresented().value)?.isEmpty == true }, "marked once shown")
        await system.shutdown()
    }
}
