import Foundation
import GRDB
import GRDBSQLite

/// A VFS over SQLite's default one that can gather a connection's WAL writes into few
/// `pwrite`s. SQLite writes every WAL frame as two writes (its 24-byte header, then the
/// page), so a group commit of N pages costs 2N system calls before its `fdatasync`. With the
/// buffer on, consecutive writes to the WAL file are copied into one buffer of up to 128 KiB
/// (the most the unix VFS writes at once) and written when the next write is not adjacent,
/// the buffer is full, or before anything that needs the file as written: sync, read, size,
/// truncate, memory map, close. The data reaches the disk before the sync returns, exactly as
/// without the buffer.
///
/// The buffer is also written out at a transaction's commit frame (the frame whose header
/// carries the database's size after the commit): once its header is in it, and again once
/// its page is — before SQLite publishes the new frames to other connections (the WAL index)
/// and whether or not the commit syncs. So a commit without a sync (`synchronous=NORMAL`, as
/// the inbox's marks) is in the file, and survives the process's death, when it returns,
/// exactly as without the buffer (`WALWriteBufferTests`: the files copied as they are on disk
/// after each commit recover every committed row, also after SQLite rewrote a spilled
/// transaction's headers); no reader can look for a frame that is still in the buffer. What
/// the buffer gathers is the frames of one transaction: two `pwrite`s per commit. `enable(on:)` turns it on for one connection's WAL file; every other
/// file opened through this VFS (the database file, other connections' WAL files) passes
/// each call straight through.
enum WALWriteBuffer {
    static let vfsName = "tidings-wal-buffer"
    /// The unix VFS writes at most `0x1ffff` bytes per `pwrite` (and reports a full disk past it).
    static let capacity: Int32 = 0x1ffff

    private struct State {
        var isWAL: Bool
        var buffer: UnsafeMutableRawPointer?
        var offset: sqlite3_int64 = 0
        var length: Int32 = 0
        /// Where the page of a commit frame whose header was just written goes: the buffer is
        /// written out once that page is in it.
        var commitPageOffset: sqlite3_int64?
    }

    /// SQLite writes a WAL frame as its 24-byte header, then its page; bytes 4–7 of the header
    /// (big-endian) are the database's size in pages after the commit for a commit frame, 0
    /// for any other. (The WAL's own header is 32 bytes.)
    static let frameHeaderSize: Int32 = 24

    /// Whether `header` (a frame header's bytes) is a commit frame's.
    static func isCommitFrameHeader(_ header: UnsafeRawPointer) -> Bool {
        header.loadUnaligned(fromByteOffset: 4, as: UInt32.self) != 0
    }

    /// A file of this VFS: SQLite's `sqlite3_file` (our methods), the state, then the file of
    /// the default VFS that does the work.
    private static let stateOffset = MemoryLayout<sqlite3_file>.stride
    private static let realOffset = (stateOffset + MemoryLayout<UnsafeMutablePointer<State>>.stride + 15) & ~15

    private nonisolated(unsafe) static let base: UnsafeMutablePointer<sqlite3_vfs>? = sqlite3_vfs_find(nil)
    private nonisolated(unsafe) static let methods: UnsafeMutablePointer<sqlite3_io_methods> = makeMethods()

    /// Registers the VFS (once per process). Nil: this SQLite does not take URI file names,
    /// so a database cannot be opened through it by name.
    private static let registered: Bool = {
        guard let base, sqlite3_compileoption_used("USE_URI") == 1 else { return false }
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        vfs.initialize(to: base.pointee)
        vfs.pointee.zName = UnsafePointer(strdup(vfsName))
        vfs.pointee.pNext = nil
        vfs.pointee.szOsFile = CInt(realOffset) + base.pointee.szOsFile
        vfs.pointee.xOpen = { _, name, file, flags, outFlags in
            guard let file, let base = WALWriteBuffer.base else { return SQLITE_CANTOPEN }
            file.pointee.pMethods = nil
            let real = WALWriteBuffer.real(file)
            let code = base.pointee.xOpen!(base, name, real, flags, outFlags)
            guard code == SQLITE_OK else {
                // Ours stays closed (pMethods nil), so SQLite will not close the inner file.
                if let inner = real.pointee.pMethods { _ = inner.pointee.xClose?(real) }
                return code
            }
            let state = UnsafeMutablePointer<State>.allocate(capacity: 1)
            state.initialize(to: State(isWAL: flags & SQLITE_OPEN_WAL != 0))
            UnsafeMutableRawPointer(file).storeBytes(of: state, toByteOffset: stateOffset, as: UnsafeMutablePointer<State>.self)
            file.pointee.pMethods = UnsafePointer(WALWriteBuffer.methods)
            return SQLITE_OK
        }
        return sqlite3_vfs_register(vfs, 0) == SQLITE_OK
    }()

    /// The name to open `path` with through this VFS, or nil when it cannot be used.
    static func uri(for path: String) -> String? {
        guard registered, let escaped = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) else { return nil }
        // An absolute path gets an empty authority ("file:///…"), so a path that starts with
        // "//" is not read as a host name.
        return (path.hasPrefix("/") ? "file://" : "file:") + escaped + "?vfs=\(vfsName)"
    }

    /// Turns the buffer on for the WAL file of `db`'s main database. False (and nothing
    /// changed) unless the connection is in WAL mode with its WAL open and was opened through
    /// this VFS.
    static func enable(on db: Database) throws -> Bool {
        guard let connection = db.sqliteConnection else { return false }
        var pointer: UnsafeMutableRawPointer?
        guard sqlite3_file_control(connection, "main", SQLITE_FCNTL_JOURNAL_POINTER, &pointer) == SQLITE_OK,
              let file = pointer?.assumingMemoryBound(to: sqlite3_file.self),
              file.pointee.pMethods == UnsafePointer(methods) else { return false }
        let s = state(file)
        guard s.pointee.isWAL else { return false }
        if s.pointee.buffer == nil {
            s.pointee.buffer = UnsafeMutableRawPointer.allocate(byteCount: Int(capacity), alignment: 16)
        }
        return true
    }

    private static func state(_ file: UnsafeMutablePointer<sqlite3_file>) -> UnsafeMutablePointer<State> {
        UnsafeMutableRawPointer(file).load(fromByteOffset: stateOffset, as: UnsafeMutablePointer<State>.self)
    }

    private static func real(_ file: UnsafeMutablePointer<sqlite3_file>) -> UnsafeMutablePointer<sqlite3_file> {
        (UnsafeMutableRawPointer(file) + realOffset).assumingMemoryBound(to: sqlite3_file.self)
    }

    private static func inner(_ file: UnsafeMutablePointer<sqlite3_file>?) -> (UnsafeMutablePointer<sqlite3_file>, sqlite3_io_methods) {
        let r = real(file!)
        return (r, r.pointee.pMethods.pointee)
    }

    /// Writes what the buffer holds. The buffer is empty afterwards even if the write failed:
    /// SQLite treats the failure as the failure of the transaction's writes.
    private static func flush(_ file: UnsafeMutablePointer<sqlite3_file>?) -> CInt {
        let s = state(file!)
        guard s.pointee.length > 0, let buffer = s.pointee.buffer else { return SQLITE_OK }
        let (r, m) = inner(file)
        let code = m.xWrite!(r, buffer, s.pointee.length, s.pointee.offset)
        s.pointee.length = 0
        return code
    }

    /// Writes the buffer out, then lets the default VFS's file do `call`: for every method that
    /// needs the file as written.
    private static func afterFlush(_ file: UnsafeMutablePointer<sqlite3_file>?,
                                   _ call: (UnsafeMutablePointer<sqlite3_file>, sqlite3_io_methods) -> CInt) -> CInt {
        let flushed = flush(file)
        if flushed != SQLITE_OK { return flushed }
        let (r, inner) = inner(file)
        return call(r, inner)
    }

    private static func makeMethods() -> UnsafeMutablePointer<sqlite3_io_methods> {
        var m = sqlite3_io_methods()
        m.iVersion = 3
        m.xClose = { file in
            let flushed = WALWriteBuffer.flush(file)
            let (r, inner) = WALWriteBuffer.inner(file)
            let closed = inner.xClose!(r)
            let s = WALWriteBuffer.state(file!)
            s.pointee.buffer?.deallocate()
            s.deinitialize(count: 1)
            s.deallocate()
            return flushed != SQLITE_OK ? flushed : closed
        }
        m.xRead = { file, data, amount, offset in
            WALWriteBuffer.afterFlush(file) { r, inner in inner.xRead!(r, data, amount, offset) }
        }
        m.xWrite = { file, data, amount, offset in
            let s = WALWriteBuffer.state(file!)
            guard let buffer = s.pointee.buffer, let data else {
                let (r, inner) = WALWriteBuffer.inner(file)
                return inner.xWrite!(r, data, amount, offset)
            }
            if s.pointee.length > 0,
               offset != s.pointee.offset + sqlite3_int64(s.pointee.length) || s.pointee.length + amount > WALWriteBuffer.capacity {
                let flushed = WALWriteBuffer.flush(file)
                if flushed != SQLITE_OK { return flushed }
            }
            let commitHeader = amount == WALWriteBuffer.frameHeaderSize && WALWriteBuffer.isCommitFrameHeader(data)
            let commitPage = s.pointee.commitPageOffset == offset
            s.pointee.commitPageOffset = commitHeader ? offset + sqlite3_int64(amount) : nil
            if amount > WALWriteBuffer.capacity {
                let (r, inner) = WALWriteBuffer.inner(file)
                return inner.xWrite!(r, data, amount, offset)
            }
            if s.pointee.length == 0 { s.pointee.offset = offset }
            (buffer + Int(s.pointee.length)).copyMemory(from: data, byteCount: Int(amount))
            s.pointee.length += amount
            // A commit frame's header goes to the file at once, with what came before it, and
            // its page after it: the transaction's frames are in the file before SQLite shows
            // them to other connections, with or without a sync. (The header at once, not with
            // its page: after a transaction overwrote its own frames in place — a page cache
            // that spilled — SQLite rewrites their headers after the commit frame, the commit
            // frame's last, with no page after it.)
            return commitHeader || commitPage ? WALWriteBuffer.flush(file) : SQLITE_OK
        }
        m.xTruncate = { file, size in
            WALWriteBuffer.afterFlush(file) { r, inner in inner.xTruncate!(r, size) }
        }
        m.xSync = { file, flags in
            WALWriteBuffer.afterFlush(file) { r, inner in inner.xSync!(r, flags) }
        }
        m.xFileSize = { file, size in
            WALWriteBuffer.afterFlush(file) { r, inner in inner.xFileSize!(r, size) }
        }
        m.xLock = { file, lock in
            let (r, inner) = WALWriteBuffer.inner(file)
            return inner.xLock!(r, lock)
        }
        m.xUnlock = { file, lock in
            let (r, inner) = WALWriteBuffer.inner(file)
            return inner.xUnlock!(r, lock)
        }
        m.xCheckReservedLock = { file, out in
            let (r, inner) = WALWriteBuffer.inner(file)
            return inner.xCheckReservedLock!(r, out)
        }
        m.xFileControl = { file, op, argument in
            let (r, inner) = WALWriteBuffer.inner(file)
            return inner.xFileControl!(r, op, argument)
        }
        m.xSectorSize = { file in
            let (r, inner) = WALWriteBuffer.inner(file)
            return inner.xSectorSize!(r)
        }
        m.xDeviceCharacteristics = { file in
            let (r, inner) = WALWriteBuffer.inner(file)
            return inner.xDeviceCharacteristics!(r)
        }
        m.xShmMap = { file, region, size, extend, pointer in
            let (r, inner) = WALWriteBuffer.inner(file)
            guard let map = inner.xShmMap else { return SQLITE_IOERR }
            return map(r, region, size, extend, pointer)
        }
        m.xShmLock = { file, offset, count, flags in
            let (r, inner) = WALWriteBuffer.inner(file)
            guard let lock = inner.xShmLock else { return SQLITE_IOERR }
            return lock(r, offset, count, flags)
        }
        m.xShmBarrier = { file in
            let (r, inner) = WALWriteBuffer.inner(file)
            inner.xShmBarrier?(r)
        }
        m.xShmUnmap = { file, delete in
            let (r, inner) = WALWriteBuffer.inner(file)
            guard let unmap = inner.xShmUnmap else { return SQLITE_OK }
            return unmap(r, delete)
        }
        m.xFetch = { file, offset, amount, pointer in
            WALWriteBuffer.afterFlush(file) { r, inner in
                guard let fetch = inner.xFetch else { pointer?.pointee = nil; return SQLITE_OK }
                return fetch(r, offset, amount, pointer)
            }
        }
        m.xUnfetch = { file, offset, pointer in
            let (r, inner) = WALWriteBuffer.inner(file)
            guard let unfetch = inner.xUnfetch else { return SQLITE_OK }
            return unfetch(r, offset, pointer)
        }
        let methods = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
        methods.initialize(to: m)
        return methods
    }
}
