import Foundation
import GRDB
import Synchronization
import TidingsStorage

/// Group commit for SQLite: operations queue up in submission order and a single writer
/// runs everything queued in one transaction, then completes their tickets.
///
/// An operation that fails changes nothing and fails alone. A batch first runs without a
/// savepoint per operation (three statements each, measurable at tens of thousands of
/// operations a second); when an operation throws, the whole transaction is rolled back and
/// the batch runs again with that operation left out (failed with its first error) and a
/// savepoint around each operation after it. Operations read and write only the database,
/// so the ones before it produce the same results again (their `applied` tickets are already
/// complete, and a ticket completes once).
///
/// Latency stays that of one commit while the writer is idle; under load, a batch grows to
/// whatever arrived during the previous commit, so throughput is not one fsync per operation.
public final class BatchWriter: Sendable {
    struct Operation: Sendable {
        /// Runs inside the batch's transaction and completes the `applied` ticket; returns
        /// what completes the durable ticket after the commit.
        let execute: @Sendable (Database) throws -> @Sendable () -> Void
        /// Completes both tickets with a failure (tickets ignore a second completion).
        let fail: @Sendable (any Error) -> Void
    }

    private struct State {
        var queue: [Operation] = []
        var running = false
    }

    public let database: DatabaseQueue
    private let state = Mutex(State())
    private let dispatch = DispatchQueue(label: "tidings.sqlite.writer")

    public init(database: DatabaseQueue) {
        self.database = database
    }

    /// SQLite's page cache per connection of the daemon's databases (the device store, the
    /// remote inbox), in KiB, at most: SQLite's default is 2,000 KiB, and a delivered list or
    /// inbox of 100,000 entries keyed by random identifiers (apns-ids) outgrows it — every
    /// insert then read its index pages back from the file (docs/benchmarks.md, "Events by
    /// sequence"). Filled only as the database is used.
    public static let pageCacheKiB = 16_384

    /// Opens (creating) a database file in WAL mode with `synchronous = FULL`, read back to be
    /// sure, and the daemon's page cache (`pageCacheKiB`); a statement waits `busyTimeout`
    /// seconds for another connection's lock.
    public static func open(path: String, busyTimeout: TimeInterval = 5) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(busyTimeout)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        // GRDB sets synchronous=NORMAL for WAL after prepareDatabase; set FULL afterwards.
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA cache_size = -\(pageCacheKiB)")
            let value = try Int.fetchOne(db, sql: "PRAGMA synchronous")
            guard value == 2 else { throw DatabaseError(message: "PRAGMA synchronous is \(value ?? -1), expected FULL (2)") }
        }
        return queue
    }

    /// Queues `body`; its ticket completes after the transaction that ran it committed.
    public func submit<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) -> StoreTicket<T> {
        let (ticket, complete) = StoreTicket<T>.make()
        enqueue(body, applied: nil, durable: complete)
        return ticket
    }

    /// Queues `body` and returns two tickets: `applied` completes as soon as `body` has run
    /// in its place in the order (its effects visible to every later operation, not yet
    /// durable); `durable` after the commit. If the commit fails, `applied` has already
    /// succeeded and `durable` fails.
    public func submitApplied<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) -> (applied: StoreTicket<T>, durable: StoreTicket<T>) {
        let (applied, completeApplied) = StoreTicket<T>.make()
        let (durable, completeDurable) = StoreTicket<T>.make()
        enqueue(body, applied: completeApplied, durable: completeDurable)
        return (applied, durable)
    }

    private func enqueue<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T,
                                      applied: (@Sendable (Result<T, any Error>) -> Void)?,
                                      durable complete: @escaping @Sendable (Result<T, any Error>) -> Void) {
        let operation = Operation(
            execute: { db in
                let value = try body(db)
                applied?(.success(value))
                return { complete(.success(value)) }
            },
            fail: { error in
                applied?(.failure(error))
                complete(.failure(error))
            })
        let start = state.withLock { state -> Bool in
            state.queue.append(operation)
            guard !state.running else { return false }
            state.running = true
            return true
        }
        if start { dispatch.async { self.drain() } }
    }

    private func drain() {
        while true {
            let batch = state.withLock { state -> [Operation] in
                if state.queue.isEmpty {
                    state.running = false
                    return []
                }
                defer { state.queue.removeAll(keepingCapacity: true) }
                return state.queue
            }
            if batch.isEmpty { return }
            run(batch)
        }
    }

    /// One transaction for `batch`, rerun as the type's comment says when an operation throws.
    private func run(_ batch: [Operation]) {
        // Operations that threw, with their errors; left out of every later run.
        var failed: [Int: any Error] = [:]
        // Operations from this index on run in savepoints.
        var isolateFrom = batch.count
        while true {
            var finishers: [@Sendable () -> Void] = []
            finishers.reserveCapacity(batch.count)
            var threw: (index: Int, error: any Error)?
            do {
                try database.writeWithoutTransaction { db in
                    try db.inTransaction(.immediate) {
                        for (index, operation) in batch.enumerated() {
                            if let error = failed[index] {
                                finishers.append { operation.fail(error) }
                                continue
                            }
                            if index < isolateFrom {
                                do {
                                    finishers.append(try operation.execute(db))
                                } catch {
                                    threw = (index, error)
                                    return .rollback
                                }
                            } else {
                                finishers.append(try Self.isolated(operation, db))
                            }
                        }
                        return .commit
                    }
                }
            } catch {
                for (index, operation) in batch.enumerated() { operation.fail(failed[index] ?? error) }
                return
            }
            if let threw {
                failed[threw.index] = threw.error
                batch[threw.index].fail(threw.error)  // it changed nothing: fail it now
                isolateFrom = threw.index + 1
                continue
            }
            for finish in finishers { finish() }
            return
        }
    }

    /// Runs `operation` in a savepoint (cached statements: GRDB's `inSavepoint` prepares its
    /// SQL anew each time, which cost as much as the operation); a failure rolls back to it.
    private static func isolated(_ operation: Operation, _ db: Database) throws -> @Sendable () -> Void {
        try db.cachedStatement(sql: "SAVEPOINT op").execute()
        do {
            let finish = try operation.execute(db)
            try db.cachedStatement(sql: "RELEASE SAVEPOINT op").execute()
            return finish
        } catch {
            try? db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT op").execute()
            try? db.cachedStatement(sql: "RELEASE SAVEPOINT op").execute()
            operation.fail(error)
            return {}
        }
    }
}
