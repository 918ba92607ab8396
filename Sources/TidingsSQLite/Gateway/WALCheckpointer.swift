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
///
/// With `catchUpPages` set, a writer that commits all the time still gets its WAL restarted.
/// SQLite restarts the WAL at a write transaction's start only when every frame has been
/// copied; a background checkpoint copies the frames that were there when it started, and
/// the writer appends more meanwhile, so without it each commit past `checkpointPages` woke
/// another background checkpoint for the few new frames — two fsyncs each, more checkpoints
/// than commits (the device store: 4,846 for 3,125 commits of 32 notifications), until the
/// WAL reached `walPageLimit` and the writer checkpointed it. With it, the background thread
/// is not woken again while a checkpoint runs, and once one has finished with at most
/// `catchUpPages` frames left, the writer copies those itself after its commit (one small
/// `PASSIVE` checkpoint): its next transaction starts the WAL over.
final class WALCheckpointer: Sendable {
    /// The checkpointer's bookkeeping; what to do after a commit is `afterCommit`'s answer.
    struct State {
        var pending = false
        var running = false
        var stopping = false
        /// Frames of the current WAL copied by the last background checkpoint.
        var backfilled: CInt = 0
        var background = 0
        var writer = 0
        var catchUps = 0
        var finished = false

        enum Step: Equatable { case none, wake, catchUp }

        /// After a commit that left `pages` frames in the WAL (below the limit): wake the
        /// background thread, copy the last frames on the writer, or nothing. Without
        /// `catchUpPages` (the gateway's store) only the wake-up, also while a checkpoint runs.
        mutating func afterCommit(pages: CInt, checkpointPages: CInt, catchUpPages: CInt?) -> Step {
            guard let catchUpPages else {
                guard pages >= checkpointPages, !pending, !stopping else { return .none }
                pending = true
                return .wake
            }
            // Fewer frames than copied: the WAL started over.
            if pages < backfilled { backfilled = 0 }
            guard pages >= checkpointPages, !pending, !running, !stopping else { return .none }
            if backfilled > 0, pages - backfilled <= catchUpPages {
                backfilled = 0
                catchUps += 1
                return .catchUp
            }
            pending = true
            return .wake
        }

        /// The background thread takes the wake-up; false when it is to stop.
        mutating func backgroundStarts() -> Bool {
            pending = false
            running = true
            return !stopping
        }

        /// A background checkpoint returned; `copied`: the frames it left copied (SQLite's `pnCkpt`).
        mutating func backgroundFinished(succeeded: Bool, copied: CInt) {
            running = false
            if succeeded {
                background += 1
                backfilled = max(0, copied)
            }
        }
    }

    let checkpointPages: CInt
    let walPageLimit: CInt
    let catchUpPages: CInt?
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private nonisolated(unsafe) let connection: OpaquePointer

    init(path: String, checkpointPages: Int, walPageLimit: Int, catchUpPages: Int? = nil) throws {
        self.checkpointPages = CInt(clamping: checkpointPages)
        self.walPageLimit = CInt(clamping: walPageLimit)
        self.catchUpPages = catchUpPages.map { CInt(clamping: $0) }
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

    /// How many times the writer copied the last frames after a background checkpoint (`catchUpPages`).
    var catchUpCount: Int { state.withLock { $0.catchUps } }

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
        } else {
            switch state.withLock({ $0.afterCommit(pages: pages, checkpointPages: checkpointPages, catchUpPages: catchUpPages) }) {
            case .none: break
            case .wake: wake.signal()
            case .catchUp: sqlite3_wal_checkpoint_v2(connection, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            }
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
            guard state.withLock({ $0.backgroundStarts() }) else { break }
            // PASSIVE: copies what no reader still needs, never waits for a lock (a busy
            // result only means another checkpoint is running; the next commit wakes us again).
            var copied: CInt = 0
            let code = sqlite3_wal_checkpoint_v2(connection, "main", SQLITE_CHECKPOINT_PASSIVE, nil, &copied)
            state.withLock { $0.backgroundFinished(succeeded: code == SQLITE_OK, copied: copied) }
        }
        sqlite3_close(connection)
        state.withLock { $0.finished = true }
        finished.signal()
    }
}
