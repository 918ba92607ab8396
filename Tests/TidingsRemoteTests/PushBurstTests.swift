import Foundation
import Synchronization
import Testing
import TidingsCore
@testable import TidingsDaemon
@testable import TidingsDevice
import TidingsEngine
import TidingsSQLite
import TidingsStorage
import TidingsTestSupport
import TidingsTesting
@_spi(Tidings) import UserNotifications

/// Bursts stay bursts on the device's remote path: what the device channel read together is
/// taken together, made durable in one inbox transaction, acknowledged together, handed to the
/// engine together and recorded in one group commit, in order per app, without reading the
/// inbox back.
@Suite("Remote receipt bursts", .serialized)
struct PushBurstTests {
    static func push(_ n: Int64) -> DevicePush {
        DevicePush(sequence: n, apnsID: "00000000-0000-4000-8000-\(String(format: "%012d", n))", token: "ab", topic: "com.example.app",
                   pushType: .alert, priority: .immediate, collapseID: nil, expiresAt: 0, acceptedAt: 1,
                   payload: Array(#"{"aps":{"alert":"n\#(n)"}}"#.utf8))
    }

    @Test func burstsAreTakenAsTheyArrivedInOrder() async throws {
        let buffer = DevicePushBuffer()
        var bursts = DevicePushes(buffer: buffer).bursts.makeAsyncIterator()
        buffer.append([Self.push(1)])
        #expect(try await bursts.next()?.map(\.sequence) == [1])
        // Two reads while the consumer was busy (committing the previous burst): one burst.
        buffer.append([Self.push(2), Self.push(3)])
        buffer.append([Self.push(4), Self.push(5)])
        #expect(try await bursts.next()?.map(\.sequence) == [2, 3, 4, 5])
        // A consumer waiting is woken by the next read (the iterator keeps no state of its own).
        let waiting = Task {
            var waiter = DevicePushes(buffer: buffer).bursts.makeAsyncIterator()
            return try await waiter.next()?.map(\.sequence)
        }
        buffer.append([Self.push(6)])
        #expect(try await waiting.value == [6])
        buffer.append([Self.push(7)])
        buffer.finish(nil)
        #expect(try await bursts.next()?.map(\.sequence) == [7], "what arrived before the end is still taken")
        #expect(try await bursts.next() == nil)
    }

    /// A backlog of 40 stored pushes reaches the daemon as bursts: fewer inbox transactions and
    /// processed marks than pushes, the inbox read back once (at start, for recovery) and never
    /// while running, every push shown once, in the order the provider sent them.
    @Test @MainActor func aBacklogIsStoredAndHandedOverInBurstsWithoutReadingTheInboxBack() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        let (app, token) = try await h.offlineApp()
        let ids = RemoteHarness.apnsIDs(0xb000, 40)
        for (n, id) in ids.enumerated() {
            #expect(try await h.push(token: token, body: #"{"aps":{"alert":"n\#(n)"}}"#, apnsID: id).status == 200)
        }
        let inbox = CountingInbox(InMemoryRemoteInbox())
        try await h.startLink(inbox: inbox)
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids, "in the order sent, each once")
        #expect(await eventually { inbox.counts.processedPushes == ids.count })
        let counts = inbox.counts
        #expect(counts.unprocessedReads == 1, "read back once, at start, never while running")
        #expect(counts.receivedPushes == ids.count)
        #expect(counts.receives < ids.count, "bursts are made durable together (\(counts.receives) transactions)")
        #expect(counts.marks < ids.count, "and marked processed together (\(counts.marks) writes)")
        #expect(await eventually { (try? await h.status(ids.last!).first?.deliveredAt) != nil }, "acknowledged")
        withExtendedLifetime(app) {}
    }

    /// A hand-off's `presented` events are kept in the inbox with its processed mark, in one
    /// write (both or neither), not in a write of their own: with the gateway holding its event
    /// writes (so none is confirmed before its mark), every push's event comes with a mark, and
    /// once the gateway takes them it records each one presented.
    @Test @MainActor func aHandOffsPresentedEventsAreKeptWithItsProcessedMarkInOneWrite() async throws {
        let (h, store) = try await RemoteHarness.startWithEventGate()
        defer { Task { store.releaseEvents(); await h.stop() } }
        let ids = RemoteHarness.apnsIDs(0xd000, 12)
        let (app, _) = try await h.offlineApp(storing: ids)
        let inbox = CountingInbox(InMemoryRemoteInbox())
        store.holdEvents()
        try await h.startLink(inbox: inbox, maximumHandOff: 5)
        #expect(await eventually { inbox.counts.processedPushes == ids.count })
        store.releaseEvents()
        #expect(h.system.presenter.presentedIdentifiers == ids)
        let counts = inbox.counts
        #expect(counts.eventWrites == 0, "no write for the events alone (\(counts.eventWrites))")
        #expect(counts.eventsWithMarks == ids.count, "each push's event kept with its mark")
        #expect(counts.marks >= 3)
        for id in ids {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "the gateway recorded \(id) presented")
        }
        withExtendedLifetime(app) {}
    }

    /// The event sender sends from memory — the inbox is read for events when the link starts
    /// and when a connection is made, never per message — and events kept in the inbox are
    /// forgotten once the gateway confirms them: by the next
    /// hand-off's write while one is under way, else in a write of their own. Hand-offs of at
    /// most 5; the gateway holds its event writes until the first mark is written, so that
    /// mark keeps the events it takes (none confirmed before it); the second mark is held
    /// until they are confirmed; a later hand-off's write (the second's or the third's,
    /// depending on whether the confirmations came before the second began its write) forgets
    /// them. Each kept event is forgotten once.
    @Test @MainActor func confirmedEventsAreForgottenWithTheNextHandOff() async throws {
        let (h, store) = try await RemoteHarness.startWithEventGate()
        defer { Task { store.releaseEvents(); await h.stop() } }
        let ids = RemoteHarness.apnsIDs(0xd200, 15)
        let (app, _) = try await h.offlineApp(storing: ids)
        let turnstile = MarkTurnstile()
        let base = InMemoryRemoteInbox()
        let inbox = CountingInbox(base, beforeMark: turnstile.wait)
        store.holdEvents()
        let link = try await h.startLink(inbox: inbox, maximumHandOff: 5)
        #expect(await eventually { inbox.counts.receivedPushes == ids.count }, "every hand-off queued")
        turnstile.allow(1)  // the first hand-off's mark: keeps its events, unconfirmed
        #expect(await eventually { inbox.counts.eventsWithMarks > 0 })
        let first = inbox.counts.eventsWithMarks  // 5, or more with the second's shown before the mark, or fewer if the first burst was smaller
        store.releaseEvents()
        for id in ids.prefix(first) {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id) recorded presented")
        }
        // Confirmed: waiting in the link, or taken by the next hand-off's mark (held at the turnstile).
        #expect(await eventually { await link.confirmedEventsNotForgotten + inbox.counts.clearedWithMarks == first })
        #expect(inbox.counts.clearWrites == 0, "hand-offs are under way: nothing forgotten in a write of its own")
        turnstile.allow(100)
        #expect(await eventually { inbox.counts.processedPushes == ids.count })
        #expect(inbox.counts.clearedWithMarks >= first, "the first hand-off's events forgotten with a later hand-off's mark")
        for id in ids {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id) recorded presented")
        }
        #expect(await eventually { (try? await base.pendingEvents(limit: 100).isEmpty) == true })
        #expect(await eventually { inbox.counts.clearedWithMarks + inbox.counts.clearedAlone == inbox.counts.eventsWithMarks },
                "each kept event forgotten once (\(inbox.counts))")
        #expect(inbox.counts.eventReads == 2, "the inbox read for events at the start and at the connection, never per message (\(inbox.counts.eventReads))")
        #expect(h.system.presenter.presentedIdentifiers == ids)
        withExtendedLifetime(app) {}
    }

    /// A `presented` event leaves when its push is shown, not after its hand-off's processed
    /// mark; one the gateway confirms before that mark is asked for is never written to the
    /// inbox. The first mark's write held, and the gateway's event writes until that mark is
    /// asked for (so it keeps what it takes: the first hand-off's events, and any of the
    /// second's shown by then): the first two hand-offs are shown and recorded presented at the
    /// gateway with no mark written (before: their events waited for the mark), and all
    /// confirmed — those the first mark keeps during its write, the rest before their mark.
    /// Then the gateway holds event writes again and the marks go: the second's keeps none of
    /// the second hand-off's events, later ones keep theirs; every kept event is forgotten once
    /// confirmed — with nothing queued, in a write of their own.
    @Test @MainActor func eventsLeaveBeforeTheirMarkAndConfirmedOnesAreNeverKept() async throws {
        let (h, store) = try await RemoteHarness.startWithEventGate()
        defer { Task { store.releaseEvents(); await h.stop() } }
        let ids = RemoteHarness.apnsIDs(0xd600, 15)
        let (app, _) = try await h.offlineApp(storing: ids)
        let turnstile = MarkTurnstile()
        let base = InMemoryRemoteInbox()
        let inbox = CountingInbox(base, beforeMark: turnstile.wait)
        store.holdEvents()
        let link = try await h.startLink(inbox: inbox, maximumHandOff: 5)
        #expect(await eventually { inbox.counts.markSizesAsked.count == 1 }, "the first hand-off's mark asked for")
        let first = inbox.counts.markSizesAsked[0], keptFirst = inbox.counts.markEventsAsked[0]
        #expect(keptFirst >= first, "none confirmed before the first mark")
        store.releaseEvents()
        for id in ids.prefix(first) {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id) recorded presented before its mark")
        }
        // Two hand-offs under way at most: the third waits for the first's mark. Every event of
        // what is shown confirmed, with no mark written.
        #expect(await eventually {
            let shown = h.system.presenter.presentedIdentifiers.count
            let confirmed = await link.eventsConfirmedBeforeTheirMark
            return shown > first && confirmed == shown
        }, "the shown pushes' events confirmed (\(h.system.presenter.presentedIdentifiers.count) shown)")
        let shown = h.system.presenter.presentedIdentifiers.count
        #expect(await eventually { inbox.counts.receivedPushes == ids.count })
        #expect(inbox.counts.marks == 0 && inbox.counts.eventWrites == 0, "nothing written to the inbox for them")
        store.holdEvents()
        turnstile.open()
        #expect(await eventually { inbox.counts.processedPushes == ids.count })
        #expect(inbox.counts.eventsWithMarks == keptFirst + (ids.count - shown),
                "the rest of the second hand-off's events not kept (\(inbox.counts.eventsWithMarks) kept, first mark \(keptFirst), \(shown) shown before)")
        #expect(await link.eventsConfirmedBeforeTheirMark == 0, "settled by their marks")
        store.releaseEvents()
        for id in ids {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id) recorded presented")
        }
        #expect(await eventually { (try? await base.pendingEvents(limit: 100).isEmpty) == true && inbox.counts.clearWrites >= 1 },
                "the kept ones forgotten in a write of their own: nothing queued")
        #expect(inbox.counts.clearedWithMarks + inbox.counts.clearedAlone == inbox.counts.eventsWithMarks, "each kept event forgotten once")
        #expect(h.system.presenter.presentedIdentifiers == ids)
        withExtendedLifetime(app) {}
    }

    /// A hand-off's processed mark is written while the next hand-off is with the engine, one
    /// mark at a time and in order: with the first mark held, the second hand-off is shown
    /// meanwhile and its mark waits for the first (the third hand-off waits behind it); once
    /// the marks go through, every push is shown once, in order, marked and recorded presented.
    @Test @MainActor func theNextHandOffIsShownWhileTheLastOneIsMarked() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        let ids = RemoteHarness.apnsIDs(0xd300, 15)
        let (app, _) = try await h.offlineApp(storing: ids)
        let turnstile = MarkTurnstile()
        let inbox = CountingInbox(InMemoryRemoteInbox(), beforeMark: turnstile.wait)
        try await h.startLink(inbox: inbox, maximumHandOff: 5)
        #expect(await eventually { inbox.counts.markSizesAsked.count == 1 }, "the first hand-off's mark asked for")
        let first = inbox.counts.markSizesAsked[0]
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count > first },
                "a second hand-off shown while the first's mark is held (\(h.system.presenter.presentedIdentifiers.count) shown, first mark \(first))")
        #expect(inbox.counts.markSizesAsked.count == 1 && inbox.counts.marks == 0, "the second mark waits for the first")
        turnstile.open()
        #expect(await eventually { inbox.counts.processedPushes == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids)
        for id in ids {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id) recorded presented")
        }
        withExtendedLifetime(app) {}
    }

    /// A hand-off's pushes stay in the delivered list through the next hand-offs' trims until
    /// their processed mark is written (`holdListed`): a `kill -9` before the mark finds them
    /// there and does not show them again. A limit of 3 and hand-offs of 5, every mark held:
    /// the second hand-off's trim leaves the first's pushes listed.
    @Test @MainActor func aHandOffsPushesStayListedUntilTheyAreMarked() async throws {
        let counting = StoreHolder()
        let h = try await RemoteHarness.start(deliveredLimit: 3, wrapStore: { base in
            let gated = GatedDeliverStore(base, open: true)
            counting.store.withLock { $0 = gated }
            return gated
        })
        defer { Task { await h.stop() } }
        let trims: @Sendable () -> Int = { counting.store.withLock { $0?.trims ?? 0 } }
        let ids = RemoteHarness.apnsIDs(0xd400, 15)
        let (app, _) = try await h.offlineApp(storing: ids)
        let turnstile = MarkTurnstile()
        let inbox = CountingInbox(InMemoryRemoteInbox(), beforeMark: turnstile.wait)
        try await h.startLink(inbox: inbox, maximumHandOff: 5)
        #expect(await eventually { inbox.counts.markSizesAsked.count == 1 })
        let first = inbox.counts.markSizesAsked[0]
        // Both hand-offs trimmed the list (each hand-off's growth reaches a tenth of the limit).
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count > first && trims() >= 2 }, "a second hand-off shown and trimmed")
        let listed = Set(try await h.system.engine.deliveredNotifications(RemoteHarness.bundleID).map(\.request.identifier))
        #expect(ids.prefix(first).allSatisfy { listed.contains($0) }, "the first hand-off's pushes still listed: \(listed.count) listed")
        turnstile.open()
        #expect(await eventually { inbox.counts.processedPushes == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids)
        withExtendedLifetime(app) {}
    }

    /// While an `events` message waits for its answer, the next events go in a second one
    /// (at most two part-full messages in flight) instead of waiting for the answer; a third
    /// waits. The gateway holds every event write: the first push's message waits there, the
    /// second push's goes, the third's waits in the link; released, all three are recorded.
    @Test @MainActor func eventsGoInASecondMessageWhileTheFirstWaits() async throws {
        let (h, store) = try await RemoteHarness.startWithEventGate()
        defer { Task { store.releaseEvents(); await h.stop() } }
        let (app, token) = try await h.offlineApp()
        let link = try await h.startLink()
        store.holdEvents()
        let ids = RemoteHarness.apnsIDs(0xd500, 3)
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"hi"}}"#, apnsID: ids[0]).status == 200)
        #expect(await eventually { store.eventWrites.load(ordering: .relaxed) >= 1 }, "the first message's write held at the gateway")
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"hi"}}"#, apnsID: ids[1]).status == 200)
        #expect(await eventually { await link.messagesInFlight == 2 }, "the second push's event sent while the first waits")
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"hi"}}"#, apnsID: ids[2]).status == 200)
        #expect(await eventually { h.system.presenter.presentedIdentifiers == ids })
        #expect(await link.messagesInFlight == 2, "a third part-full message waits for an answer")
        store.releaseEvents()
        for id in ids {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id) recorded presented")
        }
        #expect(await eventually { await link.messagesInFlight == 0 })
        withExtendedLifetime(app) {}
    }

    /// `maximumHandOff` bounds what one hand-off to the engine takes: a backlog of 7 with a
    /// limit of 3 goes in hand-offs of at most 3, in order.
    @Test @MainActor func aHandOffTakesAtMostTheConfiguredNumberOfPushes() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        let ids = RemoteHarness.apnsIDs(0xc000, 7)
        let (app, _) = try await h.offlineApp(storing: ids)
        let inbox = CountingInbox(InMemoryRemoteInbox())
        try await h.startLink(inbox: inbox, maximumHandOff: 3)
        #expect(await eventually { inbox.counts.processedPushes == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids)
        #expect(inbox.counts.largestMark <= 3)
        #expect(inbox.counts.marks >= 3)
        withExtendedLifetime(app) {}
    }

    /// An engine on `store` showing through `presenter`, one app installed and authorized, and
    /// `count` alert pushes for it, p1 … pN (the directory is the caller's to remove).
    static func engineWithPushes(_ count: Int, store: any DeviceStore, presenter: any Presenter) async throws
        -> (NotificationEngine, [RemotePush], String, URL) {
        let clock = TestWallClock(now: Date())
        let directory = TemporaryDirectories.make(prefix: "tidings-burst-")
        let engine = NotificationEngine(configuration: EngineConfiguration(
            clock: clock, store: store, attachments: AttachmentStore(root: directory.appendingPathComponent("attachments")),
            presenters: [presenter]))
        let bundle = "com.example.burst"
        try await engine.install(AppRecord(bundleIdentifier: bundle, displayName: "Burst", executable: "/bin/true",
                                           directory: directory.path, installedAt: clock.now))
        _ = try await engine.updateSettings(bundle) { $0 = .granted([.alert, .sound, .badge], provisional: false) }
        let now = Int64(clock.now.timeIntervalSince1970 * 1000)
        let pushes = (1...count).map { n in
            RemotePush(apnsID: "p\(n)", sequence: Int64(n), bundleIdentifier: bundle, expiresAt: now + 60_000, acceptedAt: now,
                       payload: Array(#"{"aps":{"alert":"n\#(n)"}}"#.utf8))!
        }
        return (engine, pushes, bundle, directory)
    }

    /// The engine queues every delivered-list write of a hand-off before the first is durable
    /// (one group commit, not one commit awaited per push), shows none before its write is
    /// durable, then shows them in order.
    @Test func aHandOffIsRecordedInOneGroupCommitAndShownWhenDurable() async throws {
        let gated = GatedDeliverStore(InMemoryDeviceStore())
        let presenter = RecordingPresenter()
        let (engine, pushes, bundle, directory) = try await Self.engineWithPushes(5, store: gated, presenter: presenter)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outcomes = Task { await engine.receiveRemote(pushes) }
        #expect(await eventually { gated.submitted == 5 }, "all five writes queued before any is durable (\(gated.submitted) were)")
        #expect(presenter.presentedIdentifiers.isEmpty, "nothing shown before it is durable")
        gated.open()
        #expect(await outcomes.value == Array(repeating: .delivered(presented: true, wake: nil), count: 5))
        #expect(presenter.presentedIdentifiers == pushes.map(\.apnsID))
        #expect(try await engine.deliveredNotifications(bundle).count == 5)
    }

    /// Hand-offs overlap in the engine and still show in order: the second is handed over
    /// once the first's writes are queued and its turn taken (`whenRecorded`), and records its
    /// writes while the first waits for them; nothing shows before it is durable; with the
    /// first held in the middle of showing (a presenter that waits at p3), the second does not
    /// show until the first is done.
    @Test func overlappingHandOffsAreRecordedBehindAndShownAfter() async throws {
        let gated = GatedDeliverStore(InMemoryDeviceStore())
        let presenter = HoldingPresenter(holding: "p3")
        let (engine, pushes, bundle, directory) = try await Self.engineWithPushes(10, store: gated, presenter: presenter)
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorded = HandOffProgress(), secondRecorded = HandOffProgress()
        let first = Task { await engine.receiveRemote(Array(pushes[0..<5]), whenRecorded: { recorded.reached(.recorded) }) }
        await recorded.wait(for: .recorded)
        #expect(gated.submitted == 5, "the first hand-off's writes queued before its turn is taken")
        let second = Task { await engine.receiveRemote(Array(pushes[5..<10]), whenRecorded: { secondRecorded.reached(.recorded) }) }
        await secondRecorded.wait(for: .recorded)
        #expect(gated.submitted == 10, "the second hand-off recorded while the first waits for its writes")
        #expect(presenter.shown.isEmpty, "nothing shown before it is durable")
        gated.open()
        #expect(await eventually { presenter.shown == ["p1", "p2"] && presenter.holdingNow }, "the first hand-off held at p3")
        #expect(presenter.shown == ["p1", "p2"], "the second does not show while the first is held (\(presenter.shown))")
        presenter.release()
        #expect(await first.value == Array(repeating: .delivered(presented: true, wake: nil), count: 5))
        #expect(await second.value == Array(repeating: .delivered(presented: true, wake: nil), count: 5))
        #expect(presenter.shown == pushes.map(\.apnsID))
        #expect(try await engine.deliveredNotifications(bundle).map(\.request.identifier) == pushes.map(\.apnsID))
    }

    /// The delivered list keeps the newest `deliveredLimit` per app: a burst past it drops the
    /// oldest from the list and from the presenters once the burst is shown, trimmed every
    /// tenth of the limit (so at most the limit plus a tenth between trims); a local
    /// notification counts the same; another app's list is its own.
    @Test(arguments: [false, true]) func theDeliveredListKeepsTheNewestUpToItsLimit(sqlite: Bool) async throws {
        let clock = TestWallClock(now: Date())
        let presenter = RecordingPresenter()
        let directory = TemporaryDirectories.make(prefix: "tidings-limit-")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store: any DeviceStore = sqlite ? try SQLiteDeviceStore(path: directory.appendingPathComponent("device.sqlite").path) : InMemoryDeviceStore()
        let engine = NotificationEngine(configuration: EngineConfiguration(
            clock: clock, store: store, attachments: AttachmentStore(root: directory.appendingPathComponent("attachments")),
            presenters: [presenter], deliveredLimit: 20))
        let bundle = "com.example.limit", other = "com.example.other"
        for app in [bundle, other] {
            try await engine.install(AppRecord(bundleIdentifier: app, displayName: "Limit", executable: "/bin/true",
                                               directory: directory.path, installedAt: clock.now))
            _ = try await engine.updateSettings(app) { $0 = .granted([.alert, .sound, .badge], provisional: false) }
        }
        let now = Int64(clock.now.timeIntervalSince1970 * 1000)
        func pushes(_ range: ClosedRange<Int>, to app: String = bundle) -> [RemotePush] {
            range.map { n in
                RemotePush(apnsID: "p\(n)", sequence: Int64(n), bundleIdentifier: app, expiresAt: now + 60_000, acceptedAt: now,
                           payload: Array(#"{"aps":{"alert":"n\#(n)"}}"#.utf8))!
            }
        }
        func listed(_ app: String = bundle) async throws -> [String] { try await engine.deliveredNotifications(app).map(\.request.identifier) }
        func withdrawn() -> [String] {
            presenter.events.flatMap { event -> [String] in
                guard case .withdrawn(let app, let ids) = event, app == bundle else { return [] }
                return ids
            }
        }

        _ = await engine.receiveRemote(pushes(1...20))
        #expect(try await listed() == pushes(1...20).map(\.apnsID), "at the limit nothing goes")
        #expect(withdrawn().isEmpty)
        _ = await engine.receiveRemote(pushes(21...25) + pushes(1...3, to: other))
        #expect(presenter.presentedIdentifiers.count == 28, "every push is shown, the ones trimmed after it too")
        #expect(try await listed() == pushes(6...25).map(\.apnsID), "past it the oldest go")
        #expect(withdrawn() == pushes(1...5).map(\.apnsID), "and leave the presenters")
        #expect(try await listed(other).count == 3)
        // Fewer than a tenth of the limit since the last trim: kept until the next one.
        _ = await engine.receiveRemote(pushes(26...26))
        #expect(try await listed().count == 21)
        _ = await engine.receiveRemote(pushes(27...27))
        #expect(try await listed() == pushes(8...27).map(\.apnsID))
        // A local notification delivered now counts the same.
        var content = NotificationContentValue()
        content.title = "local"
        await engine.deliverNow(NotificationRequestValue(identifier: "local-1", content: content, trigger: nil), bundle: bundle)
        await engine.deliverNow(NotificationRequestValue(identifier: "local-2", content: content, trigger: nil), bundle: bundle)
        #expect(try await listed() == pushes(10...27).map(\.apnsID) + ["local-1", "local-2"])
    }

    /// A trim never takes a push of the hand-off in progress (its processed mark is written
    /// after `receiveRemote` returns: taken before it, a `kill -9` there would show it again
    /// after the restart): a hand-off larger than the limit stays whole until the next trim.
    @Test func aTrimKeepsTheHandOffInProgress() async throws {
        let clock = TestWallClock(now: Date())
        let directory = TemporaryDirectories.make(prefix: "tidings-limit-")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let engine = NotificationEngine(configuration: EngineConfiguration(
            clock: clock, store: try SQLiteDeviceStore(path: directory.appendingPathComponent("device.sqlite").path),
            attachments: AttachmentStore(root: directory.appendingPathComponent("attachments")), deliveredLimit: 3))
        let bundle = "com.example.limit"
        try await engine.install(AppRecord(bundleIdentifier: bundle, displayName: "Limit", executable: "/bin/true",
                                           directory: directory.path, installedAt: clock.now))
        _ = try await engine.updateSettings(bundle) { $0 = .granted([.alert], provisional: false) }
        let now = Int64(clock.now.timeIntervalSince1970 * 1000)
        let pushes = (1...6).map { n in
            RemotePush(apnsID: "p\(n)", sequence: Int64(n), bundleIdentifier: bundle, expiresAt: now + 60_000, acceptedAt: now,
                       payload: Array(#"{"aps":{"alert":"n\#(n)"}}"#.utf8))!
        }
        _ = await engine.receiveRemote(Array(pushes[0..<5]))
        #expect(try await engine.deliveredNotifications(bundle).map(\.request.identifier) == ["p1", "p2", "p3", "p4", "p5"])
        _ = await engine.receiveRemote([pushes[5]])
        #expect(try await engine.deliveredNotifications(bundle).map(\.request.identifier) == ["p4", "p5", "p6"])
    }
}

/// An inbox that counts what the gateway link asks of it; `beforeMark` runs before each
/// processed mark reaches the base (a `MarkTurnstile` holds them there).
final class CountingInbox: RemoteInboxStore {
    struct Counts { var receives = 0, receivedPushes = 0, unprocessedReads = 0, marks = 0, processedPushes = 0, largestMark = 0,
                    eventWrites = 0, eventsWithMarks = 0, clearedWithMarks = 0, clearWrites = 0, clearedAlone = 0, eventReads = 0
                    /// The size of each mark asked for, and the events it keeps, before `beforeMark`.
                    var markSizesAsked: [Int] = [], markEventsAsked: [Int] = [] }
    private let base: any RemoteInboxStore
    private let state = Mutex(Counts())
    private let beforeMark: @Sendable () async -> Void
    private let beforeEventRead: @Sendable () async -> Void
    init(_ base: any RemoteInboxStore, beforeMark: @escaping @Sendable () async -> Void = {},
         beforeEventRead: @escaping @Sendable () async -> Void = {}) {
        self.base = base
        self.beforeMark = beforeMark
        self.beforeEventRead = beforeEventRead
    }
    var counts: Counts { state.withLock { $0 } }
    /// Set: every processed mark fails (as if the daemon died before it), nothing written.
    let failMarks = Atomic<Bool>(false)
    struct DatabaseFull: Error {}

    func receive(_ pushes: [RemotePush], at date: Date) async throws -> [Bool] {
        state.withLock { $0.receives += 1; $0.receivedPushes += pushes.count }
        return try await base.receive(pushes, at: date)
    }
    func unprocessed(after position: RemoteInboxPosition?, limit: Int) async throws -> [(position: RemoteInboxPosition, push: RemotePush)] {
        state.withLock { $0.unprocessedReads += 1 }
        return try await base.unprocessed(after: position, limit: limit)
    }
    func markProcessed(_ pushes: [RemotePush], keeping events: [PendingDeliveryEvent], clearing confirmed: [PendingDeliveryEvent]) async throws {
        state.withLock {  // counted as the mark is asked for, before a gate
            $0.clearedWithMarks += confirmed.count; $0.markSizesAsked.append(pushes.count); $0.markEventsAsked.append(events.count)
        }
        await beforeMark()
        if failMarks.load(ordering: .relaxed) { throw DatabaseFull() }
        state.withLock {
            $0.marks += 1; $0.processedPushes += pushes.count; $0.largestMark = max($0.largestMark, pushes.count)
            $0.eventsWithMarks += events.count
        }
        try await base.markProcessed(pushes, keeping: events, clearing: confirmed)
    }
    func prune(before date: Date, limit: Int) async throws -> Int { try await base.prune(before: date, limit: limit) }
    func count() async throws -> Int { try await base.count() }
    func addPendingEvents(_ events: [PendingDeliveryEvent]) async throws {
        state.withLock { $0.eventWrites += 1 }
        try await base.addPendingEvents(events)
    }
    func pendingEvents(limit: Int) async throws -> [PendingDeliveryEvent] {
        state.withLock { $0.eventReads += 1 }
        await beforeEventRead()
        return try await base.pendingEvents(limit: limit)
    }
    func clearEvents(_ events: [PendingDeliveryEvent]) async throws {
        state.withLock { $0.clearWrites += 1; $0.clearedAlone += events.count }
        try await base.clearEvents(events)
    }
    func addRemoval(_ bundle: String) async throws { try await base.addRemoval(bundle) }
    func removals() async throws -> [String] { try await base.removals() }
    func clearRemoval(_ bundle: String) async throws { try await base.clearRemoval(bundle) }
}

/// A device store whose delivered-list writes become durable only when the test says so
/// (or at once when made `open`): it sees how many were queued before the first was
/// durable, and counts the trims done.
final class GatedDeliverStore: DeviceStore {
    private let base: any DeviceStore
    private let state = Mutex<(submitted: Int, open: Bool, waiting: [@Sendable () -> Void], trims: Int)>((0, false, [], 0))
    init(_ base: any DeviceStore, open: Bool = false) {
        self.base = base
        state.withLock { $0.open = open }
    }

    var submitted: Int { state.withLock { $0.submitted } }
    var trims: Int { state.withLock { $0.trims } }

    func open() {
        let waiting = state.withLock { s in
            s.open = true
            defer { s.waiting = [] }
            return s.waiting
        }
        for release in waiting { release() }
    }

    func deliver(_ notification: DeliveredNotificationValue, for bundleIdentifier: String, push: String?) -> StoreTicket<DeliveredNotificationValue?> {
        let inner = base.deliver(notification, for: bundleIdentifier, push: push)
        let (ticket, complete) = StoreTicket<DeliveredNotificationValue?>.make()
        let release: @Sendable () -> Void = { inner.whenComplete(complete) }
        let now = state.withLock { s -> Bool in
            s.submitted += 1
            if s.open { return true }
            s.waiting.append(release)
            return false
        }
        if now { release() }
        return ticket
    }

    func upsertApp(_ app: AppRecord) -> StoreTicket<Void> { base.upsertApp(app) }
    func app(_ bundleIdentifier: String) -> StoreTicket<AppRecord?> { base.app(bundleIdentifier) }
    func apps() -> StoreTicket<[AppRecord]> { base.apps() }
    func removeApp(_ bundleIdentifier: String) -> StoreTicket<[AttachmentValue]> { base.removeApp(bundleIdentifier) }
    func settings(_ bundleIdentifier: String) -> StoreTicket<NotificationSettingsValue?> { base.settings(bundleIdentifier) }
    func setSettings(_ settings: NotificationSettingsValue, for bundleIdentifier: String) -> StoreTicket<Void> { base.setSettings(settings, for: bundleIdentifier) }
    func categories(_ bundleIdentifier: String) -> StoreTicket<[CategoryValue]> { base.categories(bundleIdentifier) }
    func setCategories(_ categories: [CategoryValue], for bundleIdentifier: String) -> StoreTicket<Void> { base.setCategories(categories, for: bundleIdentifier) }
    func addPending(_ request: NotificationRequestValue, encoded: Data?, for bundleIdentifier: String, nextFire: Date?, limit: Int?) -> StoreTicket<PendingReplacement> {
        base.addPending(request, encoded: encoded, for: bundleIdentifier, nextFire: nextFire, limit: limit)
    }
    func pending(_ bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> { base.pending(bundleIdentifier) }
    func pendingRecords(_ bundleIdentifier: String) -> StoreTicket<[PendingRecord]> { base.pendingRecords(bundleIdentifier) }
    func pendingRecord(key: Int64) -> StoreTicket<PendingRecord?> { base.pendingRecord(key: key) }
    func pendingRequest(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<NotificationRequestValue?> { base.pendingRequest(identifier, for: bundleIdentifier) }
    func removePending(_ identifiers: [String], for bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> { base.removePending(identifiers, for: bundleIdentifier) }
    func removeAllPending(_ bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> { base.removeAllPending(bundleIdentifier) }
    func schedule() -> StoreTicket<[ScheduleEntry]> { base.schedule() }
    func locationPending() -> StoreTicket<[PendingRecord]> { base.locationPending() }
    func fireApplied(key: Int64, at date: Date, nextFire: Date?, keepPending: Bool, deliver: Bool, present: UInt8) -> (applied: StoreTicket<FireOutcome?>, durable: StoreTicket<FireOutcome?>) {
        base.fireApplied(key: key, at: date, nextFire: nextFire, keepPending: keepPending, deliver: deliver, present: present)
    }
    func fireDue(key: Int64, due: Date, at date: Date, decide: @escaping @Sendable (PendingRecord) -> FireWrite?) -> (applied: StoreTicket<DueFire?>, durable: StoreTicket<DueFire?>) {
        base.fireDue(key: key, due: due, at: date, decide: decide)
    }
    func presented(_ ids: [Int64]) -> StoreTicket<Void> { base.presented(ids) }
    func unpresented() -> StoreTicket<[UnpresentedNotification]> { base.unpresented() }
    func deliveredPush(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<String?> { base.deliveredPush(identifier, for: bundleIdentifier) }
    func delivered(_ bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> { base.delivered(bundleIdentifier) }
    func deliveredNotification(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<DeliveredNotificationValue?> { base.deliveredNotification(identifier, for: bundleIdentifier) }
    func removeDelivered(_ identifiers: [String], for bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> { base.removeDelivered(identifiers, for: bundleIdentifier) }
    func removeAllDelivered(_ bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> { base.removeAllDelivered(bundleIdentifier) }
    func trimDelivered(_ bundleIdentifier: String, keeping: Int) -> StoreTicket<DeliveredTrim> {
        let ticket = base.trimDelivered(bundleIdentifier, keeping: keeping)
        ticket.whenComplete { _ in self.state.withLock { $0.trims += 1 } }
        return ticket
    }
    func badge(_ bundleIdentifier: String) -> StoreTicket<Int> { base.badge(bundleIdentifier) }
    func setBadge(_ count: Int, for bundleIdentifier: String) -> StoreTicket<Void> { base.setBadge(count, for: bundleIdentifier) }
    func holdResponse(_ response: ResponseValue, for bundleIdentifier: String) -> StoreTicket<Int64> { base.holdResponse(response, for: bundleIdentifier) }
    func heldResponses(_ bundleIdentifier: String) -> StoreTicket<[HeldResponse]> { base.heldResponses(bundleIdentifier) }
    func releaseResponse(id: Int64) -> StoreTicket<Void> { base.releaseResponse(id: id) }
}

/// The store a test system was made with, for the test to look at.
final class StoreHolder: Sendable {
    let store = Mutex<GatedDeliverStore?>(nil)
}

/// A presenter that records what it shows and holds the one named `holding` until `release()`.
final class HoldingPresenter: Presenter {
    private let state = Mutex<(shown: [String], holdingNow: Bool, released: Bool, waiter: CheckedContinuation<Void, Never>?)>(([], false, false, nil))
    private let holding: String
    init(holding: String) { self.holding = holding }

    var shown: [String] { state.withLock { $0.shown } }
    var holdingNow: Bool { state.withLock { $0.holdingNow } }

    func present(_ notification: PresentedNotification) async {
        let identifier = notification.notification.request.identifier
        if identifier == holding {
            await withCheckedContinuation { c in
                let go = state.withLock { s -> Bool in
                    if s.released { return true }
                    s.holdingNow = true
                    s.waiter = c
                    return false
                }
                if go { c.resume() }
            }
        }
        state.withLock { $0.shown.append(identifier) }
    }

    func release() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.released = true
            s.holdingNow = false
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }
}

/// The device key is made once, mode 0600 from the moment it exists, and read back after.
@Test func deviceKeyFileIsPrivateAndReused() throws {
    let directory = TemporaryDirectories.make(prefix: "tidings-key-")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("device-key.pem").path
    let made = try DeviceKeyFile.loadOrCreate(path: path)
    let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
    #expect(mode == 0o600)
    #expect(try DeviceKeyFile.loadOrCreate(path: path).rawRepresentation == made.rawRepresentation)
    #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
}

/// Lets through as many waiters as the test allows, in order, or all of them once opened:
/// `CountingInbox(base, beforeMark: turnstile.wait)` holds processed marks (a hand-off held up
/// in the middle, as a slow engine or service extension would hold it), one by one if need be.
final class MarkTurnstile: Sendable {
    private let state = Mutex<(allowed: Int, open: Bool, waiting: [CheckedContinuation<Void, Never>])>((0, false, []))

    /// How many wait now.
    var waiting: Int { state.withLock { $0.waiting.count } }

    func wait() async {
        await withCheckedContinuation { c in
            let go = state.withLock { s in
                if s.open { return true }
                if s.allowed > 0 { s.allowed -= 1; return true }
                s.waiting.append(c)
                return false
            }
            if go { c.resume() }
        }
    }

    /// Lets `n` more through.
    func allow(_ n: Int) {
        let resumed = state.withLock { s in
            s.allowed += n
            var resumed: [CheckedContinuation<Void, Never>] = []
            while s.allowed > 0, !s.waiting.isEmpty {
                s.allowed -= 1
                resumed.append(s.waiting.removeFirst())
            }
            return resumed
        }
        for c in resumed { c.resume() }
    }

    /// Lets every one through, now and from now on.
    func open() {
        let resumed = state.withLock { s in
            s.open = true
            defer { s.waiting = [] }
            return s.waiting
        }
        for c in resumed { c.resume() }
    }
}
