import Testing
import TidingsCore
import TidingsStorage
@testable import TidingsGateway

@Suite("Gateway state machines")
struct StateMachineTests {
    func push(_ seq: Int64) -> StoredPush {
        StoredPush(sequence: seq, push: NewPush(apnsID: "p\(seq)", token: "aa", deviceID: "d", bundleID: "b", topic: Topic(rawValue: "b")!, pushType: .alert,
                                                priority: .immediate, collapseID: nil, expiresAt: 1, payload: [], acceptedAt: 0), storedAt: 0)
    }

    func pushes(_ range: ClosedRange<Int64>) -> [StoredPush] { range.map(push) }

    typealias Page = DeviceDeliveryStateMachine.PageRequest

    @Test func backlogFirstThenHeldPushesWithoutDuplicates() {
        var m = DeviceDeliveryStateMachine(pageSize: 10)
        #expect(!m.isLive)
        let first = m.start()
        #expect(first == Page(after: 0, limit: 10, prepare: true))
        let again = m.start()
        #expect(again == nil, "the backlog is read once")
        // Committed while the (only) page is read: held.
        let r1 = m.committed([push(5), push(6)])
        #expect(r1.isEmpty)
        // The read saw 3, 4 and 5 (5 was committed before the read began): 5 goes once, then 6.
        let r2 = m.pageLoaded([push(3), push(4), push(5)])
        #expect(r2.send.map(\.sequence) == [3, 4, 5, 6])
        #expect(r2.read == nil)
        #expect(m.isLive)
        let r3 = m.committed([push(7)])
        #expect(r3.map(\.sequence) == [7])
        let r4 = m.committed([push(7)])
        #expect(r4.isEmpty, "never twice on one connection")
        let r5 = m.pageLoaded([push(9)])
        #expect(r5 == .init(), "no read was asked for")
    }

    @Test func acknowledgementsOnlyForPushesInFlight() {
        var m = DeviceDeliveryStateMachine(pageSize: 10)
        _ = m.start()
        _ = m.pageLoaded([push(1)])
        _ = m.committed([push(2)])
        let r6 = m.acknowledged(2)
        #expect(r6.accepted && r6.read == nil)
        let r7 = m.acknowledged(2)
        #expect(!r7.accepted, "twice")
        let r8 = m.acknowledged(99)
        #expect(!r8.accepted, "never sent here")
        let r9 = m.acknowledged(1)
        #expect(r9.accepted)
        #expect(m.inFlight.isEmpty)
    }

    @Test func pagesAreReadAsAcknowledgementsMakeRoom() {
        // Pages of 3, at most 2 pages (6 pushes) unacknowledged.
        var m = DeviceDeliveryStateMachine(pageSize: 3, pagesInFlight: 2)
        let first = m.start()
        #expect(first == Page(after: 0, limit: 3, prepare: true))
        // A full page: sent, and the next read at once (3 in flight, room for 3 more).
        let a = m.pageLoaded(pushes(1...3))
        #expect(a.send.map(\.sequence) == [1, 2, 3])
        #expect(a.read == Page(after: 3, limit: 3, prepare: false))
        // Acknowledgements while that read runs ask for nothing more.
        let ack1 = m.acknowledged(1)
        #expect(ack1.accepted && ack1.read == nil)
        let b = m.pageLoaded(pushes(4...6))
        #expect(b.send.map(\.sequence) == [4, 5, 6])
        #expect(b.read == nil, "5 in flight: no room for a page of 3")
        let ack2 = m.acknowledged(2)
        #expect(ack2.accepted && ack2.read == nil, "4 in flight: still no room")
        let ack3 = m.acknowledged(3)
        #expect(ack3.accepted && ack3.read == Page(after: 6, limit: 3, prepare: false), "3 in flight: room for a page")
        let ack5 = m.acknowledged(5)
        #expect(ack5.accepted && ack5.read == nil, "one read at a time")
        // A short page is the last: live from here.
        let c = m.pageLoaded(pushes(7...8))
        #expect(c.send.map(\.sequence) == [7, 8])
        #expect(c.read == nil)
        #expect(m.isLive)
        #expect(m.inFlight == [4, 6, 7, 8])
        let ack4 = m.acknowledged(4)
        #expect(ack4.accepted && ack4.read == nil, "live: nothing more to read")
    }

    @Test func anEmptyBacklogTurnsLiveAndAFullLastPageCostsOneEmptyRead() {
        var m = DeviceDeliveryStateMachine(pageSize: 2)
        _ = m.start()
        let a = m.pageLoaded([])
        #expect(a == .init())
        #expect(m.isLive)
        var n = DeviceDeliveryStateMachine(pageSize: 2)
        _ = n.start()
        let b = n.pageLoaded(pushes(1...2))
        #expect(b.read == Page(after: 2, limit: 2, prepare: false))
        let c = n.pageLoaded([])
        #expect(c.send.isEmpty && c.read == nil)
        #expect(n.isLive)
    }

    @Test func pushesCommittedWhileWaitingForAcknowledgementsComeFromLaterPages() {
        var m = DeviceDeliveryStateMachine(pageSize: 2, pagesInFlight: 1)
        _ = m.start()
        _ = m.pageLoaded(pushes(1...2))
        #expect(!m.isReadingPage)
        // Committed while no read runs: durable, so the next read (which starts later) has them.
        let r = m.committed([push(10), push(11)])
        #expect(r.isEmpty)
        _ = m.acknowledged(1)
        let ack = m.acknowledged(2)
        #expect(ack.read == Page(after: 2, limit: 2, prepare: false))
        // Held during this full page: 12 is above it, so a later read has it: dropped here.
        let held = m.committed([push(12)])
        #expect(held.isEmpty)
        let page = m.pageLoaded(pushes(3...4))
        #expect(page.send.map(\.sequence) == [3, 4])
        #expect(page.read == nil)
        _ = m.acknowledged(3)
        let next = m.acknowledged(4)
        #expect(next.read == Page(after: 4, limit: 2, prepare: false))
        let page2 = m.pageLoaded([push(10), push(11)])
        #expect(page2.send.map(\.sequence) == [10, 11])
        _ = m.acknowledged(10)
        let next2 = m.acknowledged(11)
        #expect(next2.read == Page(after: 11, limit: 2, prepare: false))
        // Held during the last (short) read: 13 committed after the read's snapshot, so the
        // store returns only [12]; 13 follows it from the hold.
        _ = m.committed([push(13)])
        let last = m.pageLoaded([push(12)])
        #expect(last.send.map(\.sequence) == [12, 13])
        #expect(last.read == nil)
        #expect(m.isLive)
        _ = m.acknowledged(12)  // room in the window of 2 (`aLiveConnectionAWindowBehindGoesBackToPaging`: without it)
        let live = m.committed([push(12), push(13), push(14)])
        #expect(live.map(\.sequence) == [14], "nothing at or below what was sent")
        #expect(m.inFlight == [13, 14])
    }

    @Test func heldPushesAlreadyInTheLastPageGoOnceInOrder() {
        var m = DeviceDeliveryStateMachine(pageSize: 5)
        _ = m.start()
        // Arrive out of the page's knowledge: 7 and 8 before the read's snapshot, 9 after.
        _ = m.committed([push(7), push(8)])
        _ = m.committed([push(9)])
        let r = m.pageLoaded([push(2), push(7), push(8)])
        #expect(r.send.map(\.sequence) == [2, 7, 8, 9])
        #expect(Set(r.send.map(\.sequence)).count == r.send.count)
    }

    /// Live, a device a window behind (here 4 unacknowledged) gets no more as they commit: the
    /// connection goes back to paging from the store, and turns live again after a short page.
    @Test func aLiveConnectionAWindowBehindGoesBackToPaging() {
        var m = DeviceDeliveryStateMachine(pageSize: 2, pagesInFlight: 2)
        _ = m.start()
        _ = m.pageLoaded([])
        #expect(m.isLive)
        let sent = m.committed(pushes(1...6))
        #expect(sent.map(\.sequence) == [1, 2, 3, 4], "the window, not more")
        #expect(!m.isLive)
        #expect(m.committed(pushes(7...7)).isEmpty, "paging: from the store")
        let ack1 = m.acknowledged(1)
        #expect(ack1.accepted && ack1.read == nil, "3 in flight: no room for a page of 2")
        let ack2 = m.acknowledged(2)
        #expect(ack2.read == Page(after: 4, limit: 2, prepare: false))
        let page = m.pageLoaded(pushes(5...6))
        #expect(page.send.map(\.sequence) == [5, 6])
        #expect(page.read == nil)
        _ = m.acknowledged(3)
        let ack4 = m.acknowledged(4)
        #expect(ack4.read == Page(after: 6, limit: 2, prepare: false))
        // The last page, with pushes committed during its read beyond the window: only up to it.
        _ = m.committed(pushes(8...12))
        let last = m.pageLoaded(pushes(7...7))
        #expect(last.send.map(\.sequence) == [7, 8], "4 in flight: 5, 6, 7, 8")
        #expect(!m.isLive, "9 to 12 come from the next pages")
        _ = m.acknowledged(5)
        let more = m.acknowledged(6)
        #expect(more.read == Page(after: 8, limit: 2, prepare: false))
        #expect(m.inFlight.count <= 4)
    }

    @Test func aFailedReadOrAClosedConnectionStopsEverything() {
        var m = DeviceDeliveryStateMachine(pageSize: 2)
        _ = m.start()
        let failed = m.pageFailed()
        #expect(failed, "close the connection with an error")
        let failedAgain = m.pageFailed()
        #expect(!failedAgain, "once")
        let late = m.pageLoaded(pushes(1...2))
        #expect(late == .init())
        let after = m.committed([push(3)])
        #expect(after.isEmpty)
        // A connection replaced by a newer one of the same device: its read returns late.
        var old = DeviceDeliveryStateMachine(pageSize: 2)
        _ = old.start()
        old.closed()
        let oldPage = old.pageLoaded(pushes(1...2))
        #expect(oldPage == .init())
        let oldFailed = old.pageFailed()
        #expect(!oldFailed, "already closed: no error to send")
        let oldCommitted = old.committed([push(3)])
        #expect(oldCommitted.isEmpty)
        let ack = old.acknowledged(1)
        #expect(!ack.accepted && ack.read == nil)
    }

    @Test func tokenBucket() {
        var b = TokenBucket(tokens: 2, updatedAt: 0)
        let r10 = b.take(now: 0, perSecond: 1, burst: 2)
        #expect(r10)
        let r11 = b.take(now: 0, perSecond: 1, burst: 2)
        #expect(r11)
        let r12 = b.take(now: 500, perSecond: 1, burst: 2)
        #expect(!r12)
        let r13 = b.take(now: 1000, perSecond: 1, burst: 2)
        #expect(r13)
        let r14 = b.take(now: 1000, perSecond: 1, burst: 2)
        #expect(!r14)
        // Refill is capped at the burst.
        let r15 = b.take(now: 100_000, perSecond: 1, burst: 2)
        #expect(r15)
        let r16 = b.take(now: 100_000, perSecond: 1, burst: 2)
        #expect(r16)
        let r17 = b.take(now: 100_000, perSecond: 1, burst: 2)
        #expect(!r17)
        // A clock that goes back refills nothing.
        let r18 = b.take(now: 50_000, perSecond: 1, burst: 2)
        #expect(!r18)
    }

    /// The limiter's table: past `maximumKeys` each bucket is refilled to now and the full ones
    /// dropped (before, a bucket's stored count was compared without refilling, so keys used
    /// once were never dropped and every later event filtered the whole table).
    @Test func rateLimiterDropsBucketsThatRefilled() {
        let limiter = DeviceRateLimiter(perSecond: 1, burst: 3, maximumKeys: 4)
        for key in ["a", "b", "c", "d"] {
            #expect(limiter.allow(key: key, now: 0))
            #expect(limiter.allow(key: key, now: 0))  // 1 token left: under `burst - 1`
        }
        #expect(limiter.keyCount == 4, "at the limit: kept")
        #expect(limiter.allow(key: "e", now: 10_000))  // past it, ten seconds on: all four are full again
        #expect(limiter.keyCount == 1)
        // Kept when not full: "e" has spent tokens; a sixth key finds four spent buckets.
        for key in ["f", "g", "h"] { #expect(limiter.allow(key: key, now: 10_000)) }
        #expect(limiter.keyCount == 4)
        #expect(limiter.allow(key: "i", now: 10_000))
        #expect(limiter.keyCount == 1, "more than half still spent: the table is dropped, not filtered again per event")
        // A known key past the limit is no reason to prune.
        for key in ["j", "k", "l"] { #expect(limiter.allow(key: key, now: 10_000)) }
        #expect(limiter.allow(key: "i", now: 10_000))
        #expect(limiter.keyCount == 4)
    }

    /// Two limits taken together: a refusal by either spends nothing of the other.
    @Test func rateLimiterPairTakesBothOrNeither() {
        let perSource = DeviceRateLimiter(perSecond: 1, burst: 2)
        let overall = DeviceRateLimiter(perSecond: 1, burst: 1)
        #expect(perSource.allow(key: "a", now: 0, and: overall, key: ""))
        #expect(!perSource.allow(key: "a", now: 0, and: overall, key: ""), "overall refuses")
        #expect(perSource.allow(key: "a", now: 0), "a's second token is still there")
        #expect(!perSource.allow(key: "a", now: 0))
        // The source refusing takes nothing overall.
        let source = DeviceRateLimiter(perSecond: 0.001, burst: 1)
        let all = DeviceRateLimiter(perSecond: 0.001, burst: 1)
        #expect(source.allow(key: "x", now: 0))
        #expect(!source.allow(key: "x", now: 0, and: all, key: ""))
        #expect(all.allow(key: "", now: 0), "the overall token was not spent")
    }

    @Test func expirationRules() throws {
        let limit: EpochMilliseconds = 30 * 24 * 3600 * 1000
        let now: EpochMilliseconds = 1_800_000_000_000
        func expires(_ header: String?) throws -> EpochMilliseconds {
            // GatewayCore.expiresAt without a gateway: same arithmetic.
            let e = try header.map { try Expiration(header: $0) }
            return expiresAt(e, now: now, limit: limit)
        }
        #expect(try expires(nil) == now + limit)
        #expect(try expires("0") == now)
        #expect(try expires("1800000060") == now + 60_000)
        #expect(try expires("1") == now, "already past: try once")
        #expect(try expires("99999999999") == now + limit, "capped at 30 days")
        #expect(try expires("9223372036854775807") == now + limit, "no overflow")
    }
}
