import Testing
import TidingsCore
@testable import TidingsGateway
import TidingsStorage

/// Several gateway nodes: a live connection learns of pushes by wake-ups and reads them from
/// the log after the highest sequence it sent (DeviceDeliveryStateMachine.woken/caughtUp).
@Suite("Delivery state machine with several nodes")
struct NodeWakeStateMachineTests {
    func stored(_ seq: Int64) -> StoredPush {
        StoredPush(sequence: seq, push: NewPush(apnsID: "p\(seq)", token: "aa", deviceID: "d", bundleID: "b", topic: Topic(rawValue: "b")!, pushType: .alert,
                                                priority: .immediate, collapseID: nil, expiresAt: 1_000, payload: [], acceptedAt: 0), storedAt: 0)
    }

    func live() -> DeviceDeliveryStateMachine {
        var m = DeviceDeliveryStateMachine(pageSize: 3, pagesInFlight: 2)
        _ = m.start()
        _ = m.pageLoaded([stored(1)])
        return m
    }

    /// A push of another node with a smaller sequence than one this node committed is still
    /// sent: reads start after what was sent, never after what was committed locally.
    @Test func catchUpReadsAfterTheHighestSentAndSendsInOrder() {
        var m = live()
        let read = m.woken()
        #expect(read == .init(after: 1, limit: 3, prepare: false, catchUp: true))
        #expect(m.woken() == nil, "one read at a time")
        // Both nodes committed 2 and 3 meanwhile; the read has them in order, then one more
        // read follows (a wake-up came while it ran).
        let actions = m.caughtUp([stored(2), stored(3)])
        #expect(actions.send.map(\.sequence) == [2, 3])
        #expect(actions.read == .init(after: 3, limit: 3, prepare: false, catchUp: true))
        // Nothing new, no wake-up meanwhile: done.
        #expect(m.caughtUp([]) == .init())
        #expect(m.woken() == .init(after: 3, limit: 3, prepare: false, catchUp: true))
    }

    @Test func aFullPageReadsOnAndAFailedReadWaitsForTheNextWakeUp() {
        var m = live()
        _ = m.woken()
        let full = m.caughtUp([stored(2), stored(3), stored(4)])
        #expect(full.read == .init(after: 4, limit: 3, prepare: false, catchUp: true))
        m.catchUpFailed()
        #expect(m.woken() == .init(after: 4, limit: 3, prepare: false, catchUp: true))
    }

    /// A wake-up during the backlog is kept: the last page is followed by a catch-up read
    /// (a push committed on another node during the backlog read is not lost).
    @Test func aWakeUpDuringTheBacklogIsFollowedByACatchUpRead() {
        var m = DeviceDeliveryStateMachine(pageSize: 3, pagesInFlight: 2)
        _ = m.start()
        #expect(m.woken() == nil)
        let actions = m.pageLoaded([stored(1)])
        #expect(actions.send.map(\.sequence) == [1])
        #expect(actions.read == .init(after: 1, limit: 3, prepare: false, catchUp: true))
    }
}
