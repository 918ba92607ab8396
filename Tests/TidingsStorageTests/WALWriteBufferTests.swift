import Foundation
import GRDB
import Testing
@testable import TidingsSQLite

/// `WALWriteBuffer`: what a commit wrote is in the WAL file when the commit returns, with or
/// without a sync — also the frame headers SQLite rewrites after the commit frame (its
/// checksum rewrite when a transaction overwrote one of its own frames in place: a page cache
/// that spilled). Checked as a crash would: the database and WAL files copied as they are on
/// disk, while the writer stays open, and opened elsewhere — SQLite's recovery keeps a
/// transaction only if every one of its frames' checksums holds.
@Suite struct WALWriteBufferTests {
    /// A writer through the buffer on `path` with `synchronous` and a page cache of `cachePages`.
    static func writer(_ path: String, synchronous: String, cachePages: Int) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.journalMode = .wal
        let queue = try DatabaseQueue(path: try #require(WALWriteBuffer.uri(for: path)), configuration: configuration)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous); PRAGMA cache_size = \(cachePages); PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            #expect(try WALWriteBuffer.enable(on: db))
        }
        return queue
    }

    /// The rows a copy of the files as they are on disk now holds after recovery.
    static func rowsAfterACrash(_ path: String) throws -> Int {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("walbuf-copy-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) } }
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
        return try DatabaseQueue(path: copy).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") ?? -1 }
    }

    @Test(arguments: ["NORMAL", "FULL"])
    func aCommitIsInTheFileWhenItReturnsEvenAfterItsFramesWereRewritten(synchronous: String) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("walbuf-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let queue = try Self.writer(path, synchronous: synchronous, cachePages: 10)
        let body = Data(repeating: 7, count: 900)
        var rows = 0
        for round in 0..<3 {
            // A small transaction: its frames appended, the commit frame last.
            try queue.write { db in try db.execute(sql: "INSERT INTO t (body) VALUES (?)", arguments: [body]) }
            rows += 1
            #expect(try Self.rowsAfterACrash(path) == rows, "round \(round), small")
            // One larger than the page cache (10 pages): it spills, then writes some pages
            // again in place, and SQLite rewrites the checksums after the commit frame.
            try queue.write { db in
                for _ in 0..<200 { try db.execute(sql: "INSERT INTO t (body) VALUES (?)", arguments: [body]) }
                try db.execute(sql: "UPDATE t SET body = ? WHERE id % 7 = 0", arguments: [Data(repeating: 9, count: 900)])
            }
            rows += 200
            #expect(try Self.rowsAfterACrash(path) == rows, "round \(round), spilled")
        }
    }
}
