import Testing
import TidingsCore
import TidingsStorage
@testable import TidingsGateway

@Suite("Gateway state machines")
struct StateMachineTests {
    func push(_ seq: Int64) -> StoredPush {
        StoredPush(sequence: seq, push: NewPush(apnsID: "p\(seq)", token: "aa", deviceID: "d", bundleID: "b", topic: "b", pushType: "alert",
                                                priority: 10, collapseID: nil, expiresAt: 1, payload: [], acceptedAt: 0), storedAt: 0)
    }

    @Test func backlogFirstThenHeldPushesWithoutDuplicates() {
        var m = DeviceDeliveryStateMachine()
        #expect(!m.isLive)
        // Committed while the backlog loads: held.
        let r1 = m.committed([push(5), push(6)])
        #expect(r1.isEmpty)
        // The backlog read saw 3, 4 and 5 (5 was committed before the read): 5 goes once.
        let r2 = m.backlogLoaded([push(4), push(3), push(5)])
        #expect(r2.map(\.sequence) == [3, 4, 5, 6])
        #expect(m.isLive)
        let r3 = m.committed([push(7)])
        #expect(r3.map(\.sequence) == [7])
        let r4 = m.committed([push(7)])
        #expect(r4.isEmpty, "never twice on one connection")
        let r5 = m.backlogLoaded([push(9)])
        #expect(r5.isEmpty, "the backlog loads once")
    }

    @Test func acknowledgementsOnlyForPushesInFlight() {
        var m = DeviceDeliveryStateMachine()
        _ = m.backlogLoaded([push(1)])
        _ = m.committed([push(2)])
        let r6 = m.acknowledged(2)
        #expect(r6)
        let r7 = m.acknowledged(2)
        #expect(!r7, "twice")
        let r8 = m.acknowledged(99)
        #expect(!r8, "never sent here")
        let r9 = m.acknowledged(1)
        #expect(r9)
        #expect(m.inFlight.isEmpty)
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
