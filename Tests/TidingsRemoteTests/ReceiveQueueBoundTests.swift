import Foundation
import Synchronization
import Testing
import TidingsCore
@testable import TidingsDaemon
import TidingsDevice
import TidingsEngine
import TidingsStorage
import TidingsTesting
@_spi(Tidings) import UserNotifications

/// Which of the link's bounds a test reaches.
enum QueueBound: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case count, payloadBytes
    var testDescription: String { rawValue }
}

/// Nothing unbounded on the device's receive path: what the link has acknowledged and not yet
/// handed to the engine is bounded (`maximumQueuedPushes`, `maximumQueuedPayloadBytes`); at the
/// bound it takes nothing more from the connection (which stops reading) until hand-offs
/// drain, and nothing acknowledged is lost or reordered. Recovery after a restart pages the
/// inbox within the same bound.
@Suite("Remote receive queue bound", .serialized)
struct ReceiveQueueBoundTests {
    /// A backlog of 40 (past the bound of 5) while hand-offs are held up (the processed mark of
    /// the first hand-off waits): the link takes exactly 5, acknowledges those, and waits; the
    /// rest stay unacknowledged at the gateway. Released, all 40 are shown once, in order, and
    /// the queue never held more than 5.
    @Test(arguments: QueueBound.allCases)
    @MainActor func aBurstPastTheBoundIsTakenAsHandOffsDrain(_ bound: QueueBound) async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        let (app, token) = try await h.offlineApp()
        let ids = RemoteHarness.apnsIDs(0xd000, 40)
        let body = #"{"aps":{"alert":"same size"}}"#
        for id in ids { #expect(try await h.push(token: token, body: body, apnsID: id).status == 200) }
        let gate = MarkTurnstile()
        let inbox = CountingInbox(InMemoryRemoteInbox(), beforeMark: gate.wait)
        let link = try await h.startLink(inbox: inbox) { configuration in
            switch bound {
            case .count: configuration.maximumQueuedPushes = 5
            // Room for 5 payloads and not a byte more: the sixth does not fit.
            case .payloadBytes: configuration.maximumQueuedPayloadBytes = 5 * body.utf8.count + body.utf8.count - 1
            }
        }
        #expect(await eventually { await link.isWaitingForRoom && gate.waiting == 1 })
        #expect(inbox.counts.receivedPushes == 5, "taken up to the bound, not past it")
        #expect(await link.mostQueued.pushes == 5)
        #expect(await link.mostQueued.payloadBytes == 5 * body.utf8.count)
        #expect(await eventually { (try? await h.status(ids[4]).first?.deliveredAt) != nil }, "the five taken are acknowledged")
        #expect(try await h.status(ids[5]).first?.deliveredAt == nil, "the rest are not: the gateway keeps them")
        gate.open()
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids, "every push once, in the order sent")
        #expect(await eventually { inbox.counts.processedPushes == ids.count })
        #expect(await link.mostQueued.pushes == 5, "never more than the bound queued")
        #expect(await link.mostQueued.payloadBytes <= 5 * body.utf8.count)
        withExtendedLifetime(app) {}
    }

    /// Presented events the gateway has not confirmed bound receipt as well: the inbox keeps at
    /// most `maximumPendingEvents` (here 10) and drops the oldest past it, so a device that
    /// presented faster than its events reached the gateway lost events (a 100,000 backlog lost
    /// 44 % of its `presented` records). With the event sender held, the link takes 10 pushes,
    /// shows them and waits; the other 30 stay at the gateway. Released, all 40 are shown once,
    /// in order, and the gateway has every one's `presented` event.
    @Test @MainActor func unconfirmedEventsBoundReceiptAndNoneIsDropped() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        let ids = RemoteHarness.apnsIDs(0xd100, 40)
        let (app, _) = try await h.offlineApp(storing: ids)
        // The link reads the inbox's events when it starts and again on each connection: the
        // first read passes, the connection's is held — and with it every send.
        let gate = MarkTurnstile()
        gate.allow(1)
        let inbox = CountingInbox(InMemoryRemoteInbox(maximumPendingEvents: 10), beforeEventRead: gate.wait)
        let link = try await h.startLink(inbox: inbox) { $0.maximumUnconfirmedEvents = 10 }
        #expect(await eventually { await link.isWaitingForRoom && h.system.presenter.presentedIdentifiers.count == 10 })
        #expect(inbox.counts.receivedPushes == 10, "taken up to the events' bound, not past it")
        #expect(try await h.status(ids[10]).first?.deliveredAt == nil, "the rest wait at the gateway")
        gate.open()
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids, "every push once, in the order sent")
        for id in ids {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id): its presented event reached the gateway")
        }
        withExtendedLifetime(app) {}
    }

    /// Events a previous run left in the inbox count against the bound too: the link reads
    /// them when it starts (session 12; before, the count started at 0 after a restart). Eight leftover
    /// events, which the gateway refuses (it takes fewer than 3 waiting: a message of 8 is
    /// refused whole, and they wait an hour for their retry), and a bound of 10: receipt takes
    /// at most 2 pushes at a time — each pair's `presented` events are confirmed, then the
    /// next pair — never the 10 it took when the leftovers were not counted.
    @Test @MainActor func eventsLeftByAPreviousRunCountAgainstTheBound() async throws {
        let h = try await RemoteHarness.start { $0.deviceMaximumPendingEvents = 3 }
        defer { Task { await h.stop() } }
        let ids = RemoteHarness.apnsIDs(0xd300, 12)
        let (app, _) = try await h.offlineApp(storing: ids)
        let base = InMemoryRemoteInbox()
        let leftovers = RemoteHarness.apnsIDs(0xd400, 8).enumerated().map {
            PendingDeliveryEvent(event: "presented", apnsID: $1, sequence: Int64(900 + $0))
        }
        try await base.addPendingEvents(leftovers)
        let inbox = CountingInbox(base)
        let link = try await h.startLink(inbox: inbox) {
            $0.maximumUnconfirmedEvents = 10
            $0.eventRetryInterval = .seconds(3600)
        }
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids, "every push once, in order")
        let most = await link.mostQueued.pushes
        #expect(most <= 2, "the 8 left over counted: at most 2 taken at a time (\(most))")
        for id in ids {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id): its presented event reached the gateway")
        }
        // A pair's events leave when shown; one its mark kept before the gateway's confirmation
        // came is forgotten just after: the inbox ends with the leftovers alone.
        #expect(await eventually { (try? await base.pendingEvents(limit: 100).count) == leftovers.count }, "the refused leftovers kept for their retry")
        withExtendedLifetime(app) {}
    }

    /// Events waiting keep counting while a connection reads them back from the inbox (each
    /// connection does, for what the last one had in flight): that read used to empty the
    /// outbox first, so for as long as it took receipt saw no events waiting — a full run under
    /// load once took a whole bound of 10 pushes with 8 events left over (session 13). Here
    /// the connection's read is held: receipt takes the 2 the bound leaves, shows them and
    /// waits; once the read is let through, every event goes and all 12 are shown.
    @Test @MainActor func eventsWaitingCountWhileAConnectionReadsThemBack() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        let ids = RemoteHarness.apnsIDs(0xd500, 12)
        let (app, _) = try await h.offlineApp(storing: ids)
        let base = InMemoryRemoteInbox()
        try await base.addPendingEvents(RemoteHarness.apnsIDs(0xd600, 8).enumerated().map {
            PendingDeliveryEvent(event: "presented", apnsID: $1, sequence: Int64(900 + $0))
        })
        // The read when the link starts passes; the connection's is held.
        let gate = MarkTurnstile()
        gate.allow(1)
        let link = try await h.startLink(inbox: CountingInbox(base, beforeEventRead: gate.wait)) { $0.maximumUnconfirmedEvents = 10 }
        #expect(await eventually {
            let waitingForRoom = await link.isWaitingForRoom
            return gate.waiting == 1 && h.system.presenter.presentedIdentifiers.count == 2 && waitingForRoom
        })
        #expect(await link.mostQueued.pushes <= 2, "the 8 waiting counted while the connection reads them back")
        #expect(h.system.presenter.presentedIdentifiers == Array(ids.prefix(2)))
        gate.open()
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids, "every push once, in order")
        #expect(await link.mostQueued.pushes <= 10)
        for id in ids {
            #expect(await eventually { (try? await h.status(id).first?.presentedAt) != nil }, "\(id): its presented event reached the gateway")
        }
        withExtendedLifetime(app) {}
    }

    /// A restart with 30 pushes left unprocessed (acknowledged before a crash) and a bound of 5:
    /// the inbox is read back in pages as the queue has room, never all at once; all 30 are
    /// shown once, in order.
    @Test @MainActor func recoveryReadsTheInboxInPagesWithinTheBound() async throws {
        let h = try await RemoteHarness.start(connect: false)
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let app = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let ids = RemoteHarness.apnsIDs(0xe000, 30)
        let now = Int64(h.clock.now.timeIntervalSince1970 * 1000)
        let base = InMemoryRemoteInbox()
        let pushes = ids.enumerated().map { n, id in
            RemotePush(apnsID: id, sequence: Int64(n + 1), bundleIdentifier: RemoteHarness.bundleID, expiresAt: now + 3_600_000,
                       acceptedAt: now, payload: Array(#"{"aps":{"alert":"n\#(n)"}}"#.utf8))!
        }
        _ = try await base.receive(pushes, at: h.clock.now)
        let inbox = CountingInbox(base)
        let link = try await h.startLink(inbox: inbox) { $0.maximumQueuedPushes = 5 }
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == ids.count })
        #expect(h.system.presenter.presentedIdentifiers == ids, "every push once, in the order received")
        #expect(await link.mostQueued.pushes <= 5)
        #expect(inbox.counts.unprocessedReads >= 6, "read in pages of at most 5 (\(inbox.counts.unprocessedReads) reads)")
        #expect(await eventually { (try? await base.unprocessed().isEmpty) == true })
        withExtendedLifetime(app) {}
    }
}
