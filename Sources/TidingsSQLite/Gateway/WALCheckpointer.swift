import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// Checkpoints a WAL database from its own connection and thread, so that the writer's
/// commits never copy WAL frames into the database file themselves (SQLite's auto-checkpoint
/// runs inside the commit that crossed the threshold, fsync of the database file included).
///
/// `install(on:)` replaces the writer connection's WAL hook (which is what
/// `wal_autocheckpoint` uses): after each commit, with `n` frames in the WAL,
/// - `n ≥ checkpointPages` wakes the background thread, which runs a `PASSIVE` checkpoint
///   (it never blocks the writer or readers; the writer restarts the WAL from its start
///   at the next transaction once every frame has been copied);
/// - `n ≥ walPageLimit` (the background thread fell behind, or a long reader pinned old
///   frames) checkpoints on the writer right there, `PASSIVE` too, exactly as the default
///   auto-checkpoint does: the WAL never grows past the limit plus one transaction.
final class WALCheckpointer: Sendable {
    private struct State {
        var pending = false
        var stopping = false
        var background = 0
        var writer = 0
        var finished = false
    }

    let checkpointPages: CInt
    let walPageLimit: CInt
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private nonisolated(unsafe) let connection: OpaquePointer

    init(path: String, checkpointPages: Int, walPageLimit: Int) throws {
        self.checkpointPages = CInt(clamping: checkpointPages)
        self.walPageLimit = CInt(clamping: walPageLimit)
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "checkpointer: \(message)")
        }
        // The checkpoint's own fsyncs (WAL before copying, database file after) as with FULL.
        guard sqlite3_exec(handle, "PRAGMA synchronous = FULL", nil, nil, nil) == SQLITE_OK else {
            let message = String(cString: sqlite3_errmsg(handle))
            sqlite3_close(handle)
            throw DatabaseError(message: "checkpointer: \(message)")
        }
        connection = handle
        let thread = Thread { [self] in self.run() }
        thread.name = "tidings-sqlite-checkpoint"
        thread.start()
    }

    /// Whether the background thread still runs (until `stop()` has returned).
    var isRunning: Bool { state.withLock { !$0.finished } }

    /// How many checkpoints ran in the background and on the writer (at the limit).
    var counts: (background: Int, writer: Int) { state.withLock { ($0.background, $0.writer) } }

    /// Installs the WAL hook on the writer connection. The checkpointer must outlive the
    /// hook: call `uninstall(from:)` before releasing it.
    func install(on db: Database) {
        sqlite3_wal_hook(db.sqliteConnection, { context, connection, name, pages in
            guard let context else { return SQLITE_OK }
            let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue()
            checkpointer.committed(pages: pages, connection: connection, name: name)
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    func uninstall(from db: Database) {
        sqlite3_wal_hook(db.sqliteConnection, nil, nil)
    }

    private func committed(pages: CInt, connection: OpaquePointer?, name: UnsafePointer<CChar>?) {
        if pages >= walPageLimit {
            // On the writer, inside its commit: what SQLite's auto-checkpoint would do.
            sqlite3_wal_checkpoint_v2(connection, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            state.withLock { $0.writer += 1 }
        } else if pages >= checkpointPages {
            let signal = state.withLock { s in
                if s.pending || s.stopping { return false }
                s.pending = true
                return true
            }
            if signal { wake.signal() }
        }
    }

    /// Stops the thread and closes the connection; blocks until done.
    func stop() {
        let signal = state.withLock { s in
            if s.stopping { return false }
            s.stopping = true
            return true
        }
        guard signal else { return }
        wake.signal()
        finished.wait()
    }

    private func run() {
        while true {
            wake.wait()
            let stop = state.withLock { s in
                s.pending = false
                return s.stopping
            }
            if stop { break }
            // PASSIVE: copies what no reader still needs, never waits for a lock (a busy
            // result only means another checkpoint is running; the next commit wakes us again).
            if sqlite3_wal_checkpoint_v2(connection, "main", SQLITE_CHECKPOINT_PASSIVE, nil, nil) == SQLITE_OK {
                state.withLock { $0.background += 1 }
            }
        }
        sqlite3_close(connection)
        state.withLock { $0.finished = true }
        finished.signal()
    }
}
