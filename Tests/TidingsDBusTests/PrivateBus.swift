import Foundation
import Testing
import TidingsDBus
import TidingsTestSupport
import TidingsTesting

/// A `dbus-daemon --session` of the test's own, on a socket in a temporary folder; stopped by PID.
final class PrivateBus: Sendable {
    let directory: URL
    let process: ChildProcess
    let address: String

    /// nil when dbus-daemon is missing (a failure under CI).
    static func start(abstract: Bool = false) async throws -> PrivateBus? {
        guard requireTool(FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon"), "dbus-daemon (Debian dbus-daemon)") else { return nil }
        let directory = URL(fileURLWithPath: "/tmp/tdb-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let listen = abstract ? "unix:abstract=\(directory.path)/bus" : "unix:path=\(directory.path)/bus"
        let process = try ChildProcess("/usr/bin/dbus-daemon", ["--session", "--nofork", "--nopidfile", "--print-address=1", "--address=\(listen)"], directory: directory, name: "dbus-daemon")
        guard await process.waitForOutput("unix:"), let line = process.output.split(separator: "\n").first(where: { $0.hasPrefix("unix:") }) else {
            await process.stop()
            Issue.record("dbus-daemon did not start: \(process.output)")
            return nil
        }
        return PrivateBus(directory: directory, process: process, address: String(line))
    }

    private init(directory: URL, process: ChildProcess, address: String) {
        self.directory = directory
        self.process = process
        self.address = address
    }

    var environment: [String: String] { ["DBUS_SESSION_BUS_ADDRESS": address] }

    func connect(_ configuration: DBusConnectionConfiguration = DBusConnectionConfiguration()) async throws -> DBusConnection {
        try await DBusConnection.session(environment: environment, configuration: configuration)
    }

    /// SIGKILL: the test process's threads block SIGTERM, and a spawned child inherits that mask.
    func stop() {
        process.stopAtEnd(signal: SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }
}

