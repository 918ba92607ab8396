import Foundation
import GRDB
import Synchronization
import Testing
import TidingsSQLite
import TidingsTesting

@Suite("SQLite batch writer")
struct BatchWriterTests {
    private func writer() throws -> BatchWriter {
        let path = TemporaryDirectories.databasePath(prefix: "batch-")
        let writer = BatchWriter(database: try BatchWriter.open(path: path))
        try writer.database.write { db in try db.execute(sql: "CREATE TABLE t (v INTEGER PRIMARY KEY)") }
        return writer
    }

    @Test("in one batch, operations that fail change nothing and fail alone; the others commit once, applied completed once")
    func failuresInOneBatch() async throws {
        let writer = try writer()
        // Hold the writer so the next operations queue up as one batch.
        let gate = DispatchSemaphore(value: 0)
        // Signalled again at once: a rerun of the batch (after a failure) passes through too.
        let held = writer.submit { _ in gate.wait(); gate.signal() }
        let runs = RunCounts()
        func insert(_ values: [Int], thenFail: Bool) -> (applied: StoreTicketProbe, durable: StoreTicketProbe) {
            let tickets = writer.submitApplied { db -> Int in
                runs.count(values[0])
                for v in values { try db.execute(sql: "INSERT INTO t (v) VALUES (?)", arguments: [v]) }
                if thenFail { throw DatabaseError(message: "refused \(values)") }
                return values.count
            }
            return (StoreTicketProbe { try await tickets.applied.value }, StoreTicketProbe { try await tickets.durable.value })
        }
        let a = insert([1], thenFail: false)
        let b = insert([2, 3], thenFail: true)        // writes, then throws
        let c = insert([4], thenFail: false)
        let d = insert([5], thenFail: false)
        let e = insert([4], thenFail: false)          // primary key conflict with c
        let f = insert([6, 7], thenFail: true)
        let g = insert([8], thenFail: false)
        gate.signal()
        try await held.value
        for ok in [a, c, d, g] {
            #expect(try await ok.applied.run() == 1)
            #expect(try await ok.durable.run() == 1)
        }
        for bad in [b, e, f] {
            await #expect(throws: (any Error).self) { try await bad.applied.run() }
            await #expect(throws: (any Error).self) { try await bad.durable.run() }
        }
        let stored = try await writer.database.read { db in try Int.fetchAll(db, sql: "SELECT v FROM t ORDER BY v") }
        #expect(stored == [1, 4, 5, 8])
        // A failing operation is not run again; those before the first failure run at most twice.
        let counts = runs.counts
        #expect(counts[2] == 1)
        #expect(counts[6] == 1)
        #expect((counts[1] ?? 0) <= 2)
    }

    @Test("a batch without failures commits every operation")
    func batchWithoutFailures() async throws {
        let writer = try writer()
        let tickets = (0..<100).map { (v: Int) in writer.submit { db in try db.execute(sql: "INSERT INTO t (v) VALUES (?)", arguments: [v]) } }
        for ticket in tickets { try await ticket.value }
        let count = try await writer.database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") }
        #expect(count == 100)
    }
}

/// A ticket's result, awaited later (tickets of different value types in one list).
struct StoreTicketProbe: Sendable {
    let run: @Sendable () async throws -> Int
    init(_ run: @escaping @Sendable () async throws -> Int) { self.run = run }
}

/// How many times each operation's body ran, keyed by its first value.
final class RunCounts: Sendable {
    private let state = Mutex<[Int: Int]>([:])
    func count(_ key: Int) { state.withLock { $0[key, default: 0] += 1 } }
    var counts: [Int: Int] { state.withLock { $0 } }
}
