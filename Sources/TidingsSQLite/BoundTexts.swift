import GRDB
import GRDBSQLite

/// A row's text values copied into one buffer, reused from row to row, and bound in place
/// (`SQLITE_STATIC`): SQLite's `SQLITE_TRANSIENT` copy is a `malloc`, a copy and a `free` per
/// column per row. The bindings live only for one step: `stepAndReset` clears them.
struct BoundTexts {
    /// `SQLITE_STATIC`: SQLite reads the bound bytes in place during the step; they outlive it.
    static let staticBytes: sqlite3_destructor_type? = nil

    private var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(256) }

    mutating func reset() { bytes.removeAll(keepingCapacity: true) }

    /// Copies `text` in; its range, to bind.
    mutating func append(_ text: String) -> Range<Int> {
        let start = bytes.count
        bytes.append(contentsOf: text.utf8)
        return start..<bytes.count
    }

    func withBytes<R>(_ body: (Bound) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes { try body(Bound(base: $0.baseAddress)) }
    }

    struct Bound {
        fileprivate let base: UnsafeRawPointer?

        /// Binds the text at `range` (nil: NULL) to parameter `index`.
        func bind(_ s: SQLiteStatement, _ index: CInt, _ range: Range<Int>?) -> CInt {
            guard let range else { return sqlite3_bind_null(s, index) }
            // A zero-length text still needs a non-null pointer (NULL would bind NULL).
            let start = (base ?? UnsafeRawPointer(bitPattern: 1)!) + range.lowerBound
            return sqlite3_bind_text(s, index, start.assumingMemoryBound(to: CChar.self), CInt(range.count), BoundTexts.staticBytes)
        }
    }

    /// Steps when the bindings succeeded (`code` is `SQLITE_OK`), then resets the statement and
    /// clears its bindings before the bound bytes go away; throws SQLite's error.
    static func stepAndReset(_ s: SQLiteStatement, db: Database, _ code: CInt) throws {
        let (code, message) = stepAndResetStatement(s, db: db, afterBinding: code)
        if code != SQLITE_OK { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message) }
    }
}

/// A statement bound by hand (`sqlite3_bind_*`, bytes bound in place): stepped once when
/// `code`, the bindings' result, is `SQLITE_OK`, then reset with its bindings cleared before
/// the bound bytes go away. `SQLITE_OK` for a finished step, else SQLite's code and message.
@inline(__always)
func stepAndResetStatement(_ s: SQLiteStatement, db: Database, afterBinding code: CInt) -> (code: CInt, message: String?) {
    var code = code
    if code == SQLITE_OK {
        code = sqlite3_step(s)
        if code == SQLITE_DONE { code = SQLITE_OK }
    }
    let message = code == SQLITE_OK ? nil : db.lastErrorMessage
    sqlite3_reset(s)
    sqlite3_clear_bindings(s)
    return (code, message)
}
