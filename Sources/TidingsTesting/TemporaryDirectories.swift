import Foundation
import Synchronization

/// Temporary directories for a test process, removed when it exits: also those of tests that
/// never stopped what used them, or kept the files to start again on them (a harness cannot
/// remove its directory when it stops). Thousands were left in /tmp by full runs before.
public enum TemporaryDirectories {
    private static let made = Mutex<[URL]>([])
    private static let removedAtExit: Void = { atexit { TemporaryDirectories.removeAll() } }()

    /// A new path in the temporary directory, `prefix` then a UUID (not created here),
    /// removed with everything in it when the process exits.
    public static func make(prefix: String) -> URL {
        _ = removedAtExit
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)\(UUID().uuidString)")
        made.withLock { $0.append(directory) }
        return directory
    }

    /// A database file's path in a new directory of its own, made now: removed at exit with
    /// the `-wal` and `-shm` files SQLite keeps beside it.
    public static func databasePath(prefix: String, name: String = "store.sqlite") -> String {
        let directory = make(prefix: prefix)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appendingPathComponent(name).path
    }

    private static func removeAll() {
        for directory in made.withLock({ $0 }) { try? FileManager.default.removeItem(at: directory) }
    }
}
