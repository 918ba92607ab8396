import Foundation
import GRDB
import Testing
import TidingsCore
import TidingsSQLite
import TidingsStorage

/// What only the SQLite gateway store does: sequences it issues itself (never twice), its WAL
/// write buffer, the page size of new databases.
@Suite("SQLite gateway store")
struct SQLiteGatewayStoreTests {
    static func push(_ id: String, device: String = "d1", token: String = "t1") -> NewPush {
        NewPush(apnsID: id, token: token, deviceID: device, bundleID: "com.a", topic: Topic(rawValue: "com.a")!, pushType: .alert,
                priority: .immediate, collapseID: nil, expiresAt: 10_000, payload: Array("{}".utf8), acceptedAt: 100)
    }

    /// Devices dedupe by sequence, so a sequence is never issued twice: not after the newest
    /// pushes were pruned (the log empty), not after the store was reopened without closing
    /// the old one (as after `kill -9`), not after a batch larger than the reservation.
    @Test func sequencesAreNeverReusedAfterPruningAndReopening() throws {
        let path = try GatewayStoreConformanceTests.freshDatabasePath()
        var issued: [Int64] = []
        func commitAndPrune(_ store: SQLiteGatewayStore, count: Int) throws {
            let stored = try store.commit(pushes: (0..<count).map { Self.push("s\(issued.count + $0)") }, acknowledged: [], at: 200)
            #expect(stored.count == count)
            issued += stored.map(\.sequence)
            _ = try store.commit(pushes: [], acknowledged: stored.map(\.sequence), at: 300)
            #expect(try store.prunePushes(finishedBefore: 1_000, limit: 100_000) == count)
            #expect(try store.status(apnsID: "s0").isEmpty)
        }
        // Several stores on the file at once, none closed before the next opens: nothing
        // depends on a clean shutdown.
        var stores: [SQLiteGatewayStore] = []
        for count in [3, 1, 5_000, 1, 2] {
            let store = try SQLiteGatewayStore(path: path)
            stores.append(store)
            try commitAndPrune(store, count: count)
            try commitAndPrune(store, count: 1)
        }
        #expect(Set(issued).count == issued.count)
        #expect(issued == issued.sorted())
        #expect(try stores[0].backlog(deviceID: "d1", now: 400).isEmpty)
    }

    /// A new database file gets 8 KiB pages; a database written with 4 KiB pages keeps them.
    @Test func newDatabasesUseTheLargerPageSize() throws {
        let fresh = try GatewayStoreConformanceTests.freshDatabasePath()
        _ = try SQLiteGatewayStore(path: fresh)
        let old = try GatewayStoreConformanceTests.freshDatabasePath()
        try GatewayStoreMigrationTests.writeV2Database(at: old)
        let store = try SQLiteGatewayStore(path: old)
        #expect(try store.backlog(deviceID: GatewayStoreMigrationTests.d1, now: 1_000).map(\.push.apnsID) == ["p2", "p4"])
        func pageSize(_ path: String) throws -> Int? {
            try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") }
        }
        #expect(try pageSize(fresh) == SQLiteGatewayStore.newDatabasePageSize)
        #expect(try pageSize(old) == 4_096)
    }

    /// The store opens through the buffer's VFS by URI: a path with characters a URI gives a
    /// meaning to still names its own file, also one that starts with "//", also a relative one.
    @Test(arguments: ["a dir%20with ?query#frag%", "semi;colon&vfs=unix"])
    func pathsWithURICharactersOpenTheirOwnFile(name: String) throws {
        let parent = URL(fileURLWithPath: try GatewayStoreConformanceTests.freshDatabasePath()).deletingLastPathComponent()
        let dir = parent.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.path + "/gateway.sqlite"
        #expect(path.hasPrefix("/"))
        let store = try SQLiteGatewayStore(path: "/" + path)
        #expect(store.walWritesBuffered)
        _ = try store.commit(pushes: [Self.push("u1")], acknowledged: [], at: 200)
        #expect(try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM gw_pushes") } == 1)
        let up = FileManager.default.currentDirectoryPath.split(separator: "/").map { _ in ".." }.joined(separator: "/")
        let relative = try SQLiteGatewayStore(path: up + path)
        #expect(relative.walWritesBuffered)
        #expect(try relative.status(apnsID: "u1").count == 1)
    }

    /// A stored push comes back typed as it was accepted (`PushType`, `Priority`, `Topic`,
    /// `CollapseID`); a row changed behind the store's back so that it no longer types is an
    /// error for the page, never a push sent with a guessed type.
    @Test func aStoredPushComesBackTypedAndARowThatDoesNotTypeIsAnError() throws {
        let path = try GatewayStoreConformanceTests.freshDatabasePath()
        let store = try SQLiteGatewayStore(path: path)
        var voip = Self.push("v1")
        voip.topic = Topic(rawValue: "com.a.voip")!
        voip.pushType = .voip
        voip.priority = .considerPower
        voip.collapseID = CollapseID(rawValue: "call")
        _ = try store.commit(pushes: [voip], acknowledged: [], at: 200)
        let page = try store.pendingPushes(deviceID: "d1", after: 0, limit: 10)
        #expect(page.map(\.push) == [voip])
        try DatabaseQueue(path: path).write { db in try db.execute(sql: "UPDATE gw_pushes SET push_type = 'fax'") }
        #expect(throws: GatewayStoreError.self) { try store.pendingPushes(deviceID: "d1", after: 0, limit: 10) }
    }

    /// The group commit with delivery events (`GroupCommitsEvents`): new pushes, acknowledgements
    /// and each device's events in one transaction, each event recorded as `recordEvents` would
    /// (on its push by sequence when the apns-id and device match; nothing for another device's
    /// push), all of it in the file when the commit returns.
    @Test func aGroupCommitRecordsDeliveryEventsWithThePushes() throws {
        let path = try GatewayStoreConformanceTests.freshDatabasePath()
        let store = try SQLiteGatewayStore(path: path)
        let first = try store.commit(pushes: [Self.push("e1"), Self.push("e2"), Self.push("x1", device: "d2")], acknowledged: [], at: 200)
        let (s1, s2, x1) = (first[0].sequence, first[1].sequence, first[2].sequence)
        let stored = try store.commit(pushes: [Self.push("e3")], acknowledged: [s1, s2], events: [
            DeviceEventBatch(deviceID: "d1", events: [.init(.presented, apnsID: "e1", sequence: s1), .init(.answered, apnsID: "e2", sequence: s2),
                                                      .init(.presented, apnsID: "x1", sequence: x1)]),
            DeviceEventBatch(deviceID: "d2", events: [.init(.presented, apnsID: "x1", sequence: x1)]),
        ], at: 300)
        #expect(stored.map(\.push.apnsID) == ["e3"])
        let other = try DatabaseQueue(path: path)
        let rows = try other.read { db in
            try Row.fetchAll(db, sql: "SELECT apns_id, delivered_at, presented_at, answered_at FROM gw_pushes ORDER BY seq")
                .map { [$0[0] as String, "\($0[1] as Int64?)", "\($0[2] as Int64?)", "\($0[3] as Int64?)"] }
        }
        #expect(rows == [["e1", "Optional(300)", "Optional(300)", "nil"],
                         ["e2", "Optional(300)", "nil", "Optional(300)"],
                         ["x1", "Optional(300)", "Optional(300)", "nil"],
                         ["e3", "nil", "nil", "nil"]], "d1's event for d2's push recorded nothing; d2's did")
    }

    /// The writer's WAL writes go through the buffer, and what a commit wrote is in the file
    /// when the commit returns: a connection of its own (default VFS, its own file handle)
    /// reads every push and acknowledgement, also of a commit several buffers long.
    @Test func bufferedWALWritesAreInTheFileWhenACommitReturns() throws {
        let path = try GatewayStoreConformanceTests.freshDatabasePath()
        let store = try SQLiteGatewayStore(path: path)
        #expect(store.walWritesBuffered)
        let other = try DatabaseQueue(path: path)
        func read(_ seq: Int64) throws -> (count: Int, bytes: Int, delivered: Int64?) {
            try other.read { db in
                let row = try #require(try Row.fetchOne(db, sql: "SELECT COUNT(*), TOTAL(length(payload)) FROM gw_pushes"))
                let delivered = try Int64.fetchOne(db, sql: "SELECT delivered_at FROM gw_pushes WHERE seq = ?", arguments: [seq])
                return (row[0], Int(row[1] as Double), delivered)
            }
        }
        let big = Array(repeating: UInt8(ascii: "z"), count: 1_500)
        var expectedBytes = 0
        var count = 0
        for round in 0..<3 {
            // ≈ 600 KB in one commit: several buffers of 128 KiB, then a small commit.
            let pushes = (0..<400).map { i -> NewPush in
                var p = Self.push("w\(round)-\(i)")
                p.payload = big
                return p
            }
            let stored = try store.commit(pushes: pushes, acknowledged: [], at: 200)
            expectedBytes += 400 * big.count
            count += 400
            #expect(try read(stored[0].sequence) == (count, expectedBytes, nil))
            _ = try store.commit(pushes: [Self.push("s\(round)")], acknowledged: [stored[0].sequence], at: 300)
            expectedBytes += 2
            count += 1
            #expect(try read(stored[0].sequence) == (count, expectedBytes, 300))
        }
        #expect(try store.status(apnsID: "w2-399").first?.storedAt == 200)
    }
}
