import Foundation
import Testing
import TidingsTesting

/// The package's built products and checked-in files, for tests that run them as processes:
/// `swift build --build-tests` puts the executables next to the test bundle.
public enum BuiltProducts {
    public static var directory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }
    public static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
    public static var tidings: String { path("tidings") }
    public static var sampleApp: String { path("SampleApp") }

    /// The package's root folder.
    public static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }
    /// The Python scripts that drive third-party APNs clients.
    public static var gatewayClients: URL { packageRoot.appendingPathComponent("Tests/GatewayClients") }

    /// A Python with the clients `.ci/run` installs: `TIDINGS_TEST_PYTHON`, else the CI venvs.
    public static var python: String? {
        var candidates: [String] = []
        if let p = ProcessInfo.processInfo.environment["TIDINGS_TEST_PYTHON"] { candidates.append(p) }
        candidates += [".ci-work/venv/bin/python", ".ci-work/venv-gw/bin/python"].map { packageRoot.appendingPathComponent($0).path }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// A child process whose output goes to a file the test reads; stopped by the test, by PID.
public final class ChildProcess: Sendable {
    public let process: Process
    public let outputPath: String

    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: URL, name: String? = nil) throws {
        let name = name ?? (executable as NSString).lastPathComponent
        outputPath = directory.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8)).log").path
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    public func waitForOutput(_ text: String) async -> Bool {
        await eventually { self.output.contains(text) }
    }

    /// What follows the first `prefix` on its line, trimmed.
    public func value(after prefix: String) -> String? {
        for line in output.split(separator: "\n") {
            if let r = line.range(of: prefix) { return String(line[r.upperBound...]).trimmingCharacters(in: .whitespaces) }
        }
        return nil
    }

    /// "running", or how it ended (exit status and reason): for a failure message.
    public var state: String {
        process.isRunning ? "running" : "gone (status \(process.terminationStatus), reason \(process.terminationReason.rawValue))"
    }

    /// The port of the `host:port` that follows `marker` on a line.
    public func port(after marker: String) -> Int? {
        guard let rest = value(after: marker) else { return nil }
        return (rest.split(separator: " ").first ?? "").split(separator: ":").last.flatMap { Int($0) }
    }

    /// Sends `signal` and waits for the exit on a thread of its own (`offThePool`): a
    /// `waitUntilExit` here would hold one of the cooperative pool's threads (2 on 2 cores)
    /// for as long as the child takes to exit.
    public func stop(signal: Int32 = SIGTERM) async {
        signalUnlessExited(signal)
        await offThePool { self.process.waitUntilExit() }
    }

    /// Sends `signal` and returns without waiting (Foundation reaps the child): for a
    /// `defer` at the end of a test, which cannot `await`. Where the test goes on after the
    /// child is gone (a restart on the same data, a check of its exit), `await stop()`.
    public func stopAtEnd(signal: Int32 = SIGTERM) {
        signalUnlessExited(signal)
    }

    private func signalUnlessExited(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }
}

/// Runs the `tidings` CLI to completion; standard output and error together.
/// Writes the sample app's manifest (Examples/SampleApp, `--listen` so that it stays to answer)
/// to `path`, for `tidings apps install`.
public func writeSampleAppManifest(to path: String, executable: String = BuiltProducts.sampleApp) throws {
    try """
        {"bundleIdentifier": "com.example.tidings.sample", "displayName": "Tidings Sample",
         "executable": "\(executable)", "arguments": ["--listen"]}
        """.write(toFile: path, atomically: true, encoding: .utf8)
}

public func runTidings(_ arguments: [String]) async throws -> (status: Int32, output: String) {
    try await runTool(BuiltProducts.tidings, arguments)
}

/// Runs a program to completion with this process's environment plus `environment` and
/// `input` as its standard input (nil: /dev/null); its exit status and standard output and error together. The reading and the wait run on a
/// thread of their own (`offThePool`), not on the cooperative pool: two blocking runs at once
/// would otherwise stall every other test of the process for as long as the children run.
@discardableResult
public func runTool(_ path: String, _ arguments: [String], environment: [String: String] = [:], input: Data? = nil) async throws -> (status: Int32, output: String) {
    try await offThePool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        // Standard input from a file of its own, so that nothing here blocks on a child
        // that stops reading early (a refused input).
        var inputPath: String?
        defer { if let inputPath { try? FileManager.default.removeItem(atPath: inputPath) } }
        if let input {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-stdin-\(UUID().uuidString)").path
            inputPath = path
            guard FileManager.default.createFile(atPath: path, contents: input) else { throw CocoaError(.fileWriteUnknown) }
            process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        try process.run()
        let data = readToEnd(pipe.fileHandleForReading)
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// Everything `handle` gives until end of file. `FileHandle.readDataToEndOfFile` traps on an
/// interrupted `read` (EINTR: a signal arrived — a child exiting, with several tests spawning
/// at once); this retries it.
public func readToEnd(_ handle: FileHandle) -> Data {
    var data = Data()
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
        if n > 0 { data.append(contentsOf: chunk[..<n]); continue }
        if n < 0 && errno == EINTR { continue }
        return data
    }
}

/// Whether a test that needs an external tool may go on: a missing tool skips with a
/// message, but under CI (env `CI`) it is a failure — CI must install it (.ci/run).
public func requireTool(_ available: Bool, _ name: String) -> Bool {
    if available { return true }
    if ProcessInfo.processInfo.environment["CI"] != nil {
        Issue.record("\(name) is not available, and CI is set")
    } else {
        print("SKIPPED: \(name) is not available; set it up as .ci/run does")
    }
    return false
}

/// A process started with `posix_spawn` and reaped with `waitpid`, its output (standard output
/// and error) in a file: for programs whose exit `Process.waitUntilExit` missed here (`su`,
/// `setpriv` to another user). Stopped by the test, by PID.
public final class SpawnedProcess: @unchecked Sendable {
    public let pid: pid_t
    public let outputPath: String
    private let lock = NSLock()
    private var exitStatus: Int32?

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts `argv` (`argv[0]` a path) with `environment` (nil: this process's), standard
    /// input from /dev/null, output to `outputPath`.
    public init(_ argv: [String], environment: [String: String]? = nil, outputPath: String) throws {
        self.outputPath = outputPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process goes with it. Without this the child (and what it starts:
        // `pg_ctl start` leaves the PostgreSQL server running for the whole test run) kept every
        // descriptor the test process had open without close-on-exec at that moment — among
        // them the socket by which Foundation's `Process` learns that another child exited, so
        // that child was never reaped and a test awaiting its exit hung.
        Self.closeFromThree(&actions)
        // The test process blocks some signals; a child starts with none blocked.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for p in cArguments { free(p) } }
        var cEnvironment: [UnsafeMutablePointer<CChar>?] = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in cEnvironment { free(p) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, &attributes, &cArguments, &cEnvironment)
        guard spawned == 0 else { throw Failure(description: "cannot run \(argv[0]): error \(spawned)") }
        self.pid = pid
    }

    /// `posix_spawn_file_actions_addclosefrom_np(actions, 3)` (glibc 2.34+, not imported into
    /// Swift without _GNU_SOURCE, so looked up); where it is missing, every descriptor from 3 up
    /// that is open now gets its own close action.
    private static func closeFromThree(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            if unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3) == 0 { return }
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap(Int32.init) where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
    }

    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Reaps it if it has exited (without waiting).
    public var isRunning: Bool { reap(block: false) == nil }

    /// Waits for its exit: the exit code, or 128 + the signal that killed it.
    @discardableResult
    public func wait() -> Int32 { reap(block: true) ?? -1 }

    private func reap(block: Bool) -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(pid, &status, block ? 0 : WNOHANG) } while result == -1 && errno == EINTR
        guard result == pid else { return nil }
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        exitStatus = code
        return code
    }

    public func stop(signal: Int32 = SIGTERM) {
        if isRunning { kill(pid, signal) }
        wait()
    }

    /// Runs `argv` to completion; its exit code and output.
    public static func run(_ argv: [String], environment: [String: String]? = nil) throws -> (status: Int32, output: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-spawn-\(UUID().uuidString).out").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let process = try SpawnedProcess(argv, environment: environment, outputPath: output)
        let status = process.wait()
        return (status, process.output)
    }
}
