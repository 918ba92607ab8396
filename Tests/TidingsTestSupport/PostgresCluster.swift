import Foundation
import Synchronization
import Testing

/// A private PostgreSQL cluster for tests: `initdb` in a temporary directory, `pg_ctl start` on
/// a free port of 127.0.0.1 (socket directory inside the cluster's folder), stopped by
/// `stop()` or, for `shared`, when the test process exits. As root (here and in CI) the
/// server runs as the `postgres` user, which owns the directory: PostgreSQL refuses root.
///
/// `shared` is one cluster per test process; each test or suite takes a database of its own
/// (`createDatabase()`). A test that stops and starts PostgreSQL starts a cluster of its own.
public final class PostgresCluster: Sendable {
    public let directory: URL
    public let port: Int
    let binaries: URL
    let runAsPostgres: Bool
    private let databases = Atomic<Int>(0)

    /// Where `initdb` and `pg_ctl` are: the newest `/usr/lib/postgresql/N/bin` (Debian), else
    /// the directory of `pg_ctl` on `PATH`.
    public static var binaryDirectory: URL? {
        let fm = FileManager.default
        let base = "/usr/lib/postgresql"
        if let versions = try? fm.contentsOfDirectory(atPath: base) {
            for v in versions.compactMap(Int.init).sorted(by: >) {
                let bin = URL(fileURLWithPath: "\(base)/\(v)/bin")
                if fm.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
            }
        }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let bin = URL(fileURLWithPath: String(dir))
            if fm.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        return nil
    }

    /// The cluster every test of this process shares, started on first use; nil (after
    /// `requireTool`: a skip, or a failure under CI) when PostgreSQL is not installed.
    /// Async, and started on a thread of its own: `initdb` and `pg_ctl start` take seconds,
    /// and a test that waited for them (or for the lock, behind the first) on the cooperative
    /// pool stalled every task of the test process meanwhile (see `offThePool`).
    public static func shared() async throws -> PostgresCluster? {
        guard requireTool(binaryDirectory != nil, "PostgreSQL (initdb, pg_ctl)") else { return nil }
        return try await offThePool { try startShared() }
    }

    private static func startShared() throws -> PostgresCluster {
        try sharedCluster.withLock { cluster in
            if let cluster { return cluster }
            let started = try PostgresCluster.start(name: "shared")
            cluster = started
            atexit { PostgresCluster.stopShared() }
            return started
        }
    }

    private static let sharedCluster = Mutex<PostgresCluster?>(nil)

    private static func stopShared() {
        let cluster = sharedCluster.withLock { c in defer { c = nil }; return c }
        cluster?.stop()
    }

    /// A cluster of the caller's own (stop it with `stop()`); nil as for `shared()`.
    public static func own(name: String = "own") async throws -> PostgresCluster? {
        guard requireTool(binaryDirectory != nil, "PostgreSQL (initdb, pg_ctl)") else { return nil }
        return try await offThePool { try start(name: name) }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private init(directory: URL, port: Int, binaries: URL, runAsPostgres: Bool) {
        self.directory = directory
        self.port = port
        self.binaries = binaries
        self.runAsPostgres = runAsPostgres
    }

    private static func start(name: String) throws -> PostgresCluster {
        guard let binaries = binaryDirectory else { throw Failure(description: "PostgreSQL is not installed") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-pg-\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let runAsPostgres = geteuid() == 0
        if runAsPostgres {
            guard let user = getpwnam("postgres") else { throw Failure(description: "running as root, but there is no postgres user") }
            guard chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
                throw Failure(description: "cannot give \(directory.path) to postgres")
            }
        }
        let data = directory.appendingPathComponent("data").path
        // A free port below the ephemeral range (`RestartPorts`: tests stop and start the server
        // on it); retried if another process takes it meanwhile.
        var lastError = ""
        for _ in 0..<5 {
            let port = RestartPorts.take()
            let cluster = PostgresCluster(directory: directory, port: port, binaries: binaries, runAsPostgres: runAsPostgres)
            if !FileManager.default.fileExists(atPath: data) {
                let (status, output) = try cluster.run("initdb", ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
                guard status == 0 else { throw Failure(description: "initdb failed: \(output)") }
            }
            let (status, output) = cluster.startServer()
            if status == 0 { return cluster }
            lastError = output
        }
        throw Failure(description: "pg_ctl start failed: \(lastError)")
    }

    /// `postgres://postgres@127.0.0.1:PORT/NAME`.
    public func url(database: String) -> String { "postgres://postgres@127.0.0.1:\(port)/\(database)" }

    /// A new, empty database; returns its URL.
    public func createDatabase(prefix: String = "t") throws -> String {
        let name = "\(prefix)_\(getpid())_\(databases.add(1, ordering: .relaxed).newValue)"
        let (status, output) = try psql("CREATE DATABASE \(name)")
        guard status == 0 else { throw Failure(description: "CREATE DATABASE failed: \(output)") }
        return url(database: name)
    }

    /// Runs SQL through `psql` on the `postgres` database; status and output.
    public func psql(_ sql: String, database: String = "postgres") throws -> (status: Int32, output: String) {
        try Self.execute(binaries.appendingPathComponent("psql").path,
                         ["-h", "127.0.0.1", "-p", "\(port)", "-U", "postgres", "-d", database, "-v", "ON_ERROR_STOP=1", "-Atc", sql],
                         asPostgres: false)
    }

    /// Starts the server (again); status and output.
    @discardableResult
    public func startServer() -> (status: Int32, output: String) {
        let data = directory.appendingPathComponent("data").path
        let log = directory.appendingPathComponent("server.log").path
        // fsync off: tests check behaviour, not power loss, on a shared machine.
        let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        return (try? run("pg_ctl", ["-D", data, "-l", log, "-o", options, "-w", "-t", "30", "start"])) ?? (-1, "pg_ctl did not run")
    }

    /// Stops the server (fast shutdown: open connections are cut); the files stay.
    @discardableResult
    public func stopServer() -> (status: Int32, output: String) {
        let data = directory.appendingPathComponent("data").path
        return (try? run("pg_ctl", ["-D", data, "-m", "fast", "-w", "-t", "30", "stop"])) ?? (-1, "pg_ctl did not run")
    }

    /// Stops the server and deletes the cluster.
    public func stop() {
        stopServer()
        try? FileManager.default.removeItem(at: directory)
    }

    private func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try Self.execute(binaries.appendingPathComponent(tool).path, arguments, asPostgres: runAsPostgres)
    }

    /// `SpawnedProcess` (posix_spawn and waitpid): `Process.waitUntilExit` missed the exit of
    /// `su` here (it waited forever once `pg_ctl` had started the server).
    private static func execute(_ executable: String, _ arguments: [String], asPostgres: Bool) throws -> (status: Int32, output: String) {
        var argv: [String]
        if asPostgres {
            // `su` with a shell line: every argument single-quoted.
            let line = ([executable] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
            argv = ["/bin/su", "postgres", "-s", "/bin/sh", "-c", line]
        } else {
            argv = [executable] + arguments
        }
        do {
            return try SpawnedProcess.run(argv)
        } catch {
            throw Failure(description: "\(error)")
        }
    }
}
