import Foundation
import Testing
import TidingsTesting
import TidingsTestSupport

/// A real `systemd --user` manager of an unprivileged user, started by the test (as root), as
/// docs/desktop.md ("How the service is tested") describes: cgroup directories given to the
/// user, a mount namespace with a tmpfs on /run/systemd (so the manager believes the machine
/// booted with systemd), then `systemd --user` as that user with only HOME, XDG_RUNTIME_DIR
/// and PATH. Stopped by PID; whatever is left in its cgroups is killed by PID; the cgroups and
/// folders are removed.
final class UserManager: @unchecked Sendable {
    let user: String
    let uid: uid_t
    let gid: gid_t
    let directory: URL
    let systemd: String
    /// Our cgroup directories (one per hierarchy that systemd uses).
    let cgroups: [String]
    private(set) var process: SpawnedProcess?

    var home: String { directory.appendingPathComponent("home").path }
    var runtime: String { directory.appendingPathComponent("run").path }
    /// Where apps look for the daemon by default: `$XDG_DATA_HOME/tidings` (here ~/.local/share/tidings).
    var socket: String { home + "/.local/share/tidings/daemon.sock" }

    /// The user the manager runs as: `TIDINGS_TEST_SERVICE_USER`, else `nobody` (its home and
    /// shell do not matter: HOME is set, and nothing runs through its shell).
    static var userName: String { ProcessInfo.processInfo.environment["TIDINGS_TEST_SERVICE_USER"] ?? "nobody" }

    /// nil when this machine cannot run one (not root, no systemd, no cgroup tree): a failure under CI.
    static func prepare() throws -> UserManager? {
        let systemd = ["/lib/systemd/systemd", "/usr/lib/systemd/systemd"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let tools = ["/usr/bin/systemctl", "/usr/bin/setpriv", "/usr/bin/unshare", "/usr/bin/env"]
        guard requireTool(systemd != nil && tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) },
                          "systemd, systemctl, setpriv, unshare (Debian systemd, util-linux)"),
              requireTool(geteuid() == 0, "root (a user manager for another user is started by root)") else { return nil }
        guard let entry = getpwnam(userName) else {
            _ = requireTool(false, "the user \(userName) (TIDINGS_TEST_SERVICE_USER)")
            return nil
        }
        let (uid, gid) = (entry.pointee.pw_uid, entry.pointee.pw_gid)
        guard uid != 0 else {
            Issue.record("TIDINGS_TEST_SERVICE_USER must not be root")
            return nil
        }
        let name = "tidings-sd-\(getpid())-\(UUID().uuidString.prefix(6))"
        // cgroup2 alone (`cgroup.controllers` at the top); or the hybrid layout (a cgroup2
        // tree at `unified` beside v1's named `systemd` tree): systemd uses both there.
        var parents: [String] = []
        if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers") {
            parents = ["/sys/fs/cgroup"]
        } else {
            if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/unified/cgroup.procs") { parents.append("/sys/fs/cgroup/unified") }
            if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/systemd/cgroup.procs") { parents.append("/sys/fs/cgroup/systemd") }
        }
        guard requireTool(!parents.isEmpty, "a cgroup tree systemd can use (/sys/fs/cgroup)") else { return nil }
        let directory = URL(fileURLWithPath: "/tmp/tdb-sd-\(UUID().uuidString.prefix(8))")
        let manager = UserManager(user: userName, uid: uid, gid: gid, directory: directory, systemd: systemd!, cgroups: parents.map { $0 + "/" + name })
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        for (path, mode) in [(manager.home, 0o755), (manager.runtime, 0o700)] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: mode])
            guard chown(path, uid, gid) == 0 else { throw Failure("cannot give \(path) to \(userName)") }
        }
        // The user's own cgroups: created here, handed over (the directory and its files), as
        // logind would delegate a user's slice.
        for cgroup in manager.cgroups {
            guard mkdir(cgroup, 0o755) == 0 else { throw Failure("cannot create \(cgroup): errno \(errno)") }
            for file in [cgroup] + ((try? FileManager.default.contentsOfDirectory(atPath: cgroup)) ?? []).map({ cgroup + "/" + $0 }) {
                _ = chown(file, uid, gid)
            }
        }
        return manager
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    private init(user: String, uid: uid_t, gid: gid_t, directory: URL, systemd: String, cgroups: [String]) {
        self.user = user
        self.uid = uid
        self.gid = gid
        self.directory = directory
        self.systemd = systemd
        self.cgroups = cgroups
    }

    /// The user's login environment, and only it.
    var loginEnvironment: [String] { ["HOME=\(home)", "XDG_RUNTIME_DIR=\(runtime)", "PATH=/usr/bin:/bin"] }

    /// `setpriv … env -i HOME XDG_RUNTIME_DIR PATH [extra] command`: as the user, with nothing of ours.
    func asUser(_ command: [String], extra: [String] = []) -> [String] {
        ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "/usr/bin/env", "-i"] + loginEnvironment + extra + command
    }

    /// Runs a command as the user to completion (posix_spawn and waitpid: `Process` missed
    /// the exit of a program run through setpriv here), waiting on a thread of its own
    /// (`offThePool`): the test polls with it for many seconds.
    @discardableResult
    func run(_ command: [String], extra: [String] = []) async throws -> (status: Int32, output: String) {
        let argv = ["/usr/bin/setpriv"] + asUser(command, extra: extra)
        return try await offThePool { try SpawnedProcess.run(argv) }
    }

    /// Starts a command as the user; stopped by the test, by PID.
    func spawn(_ command: [String], extra: [String] = [], name: String) throws -> SpawnedProcess {
        try SpawnedProcess(["/usr/bin/setpriv"] + asUser(command, extra: extra), outputPath: directory.appendingPathComponent("\(name).log").path)
    }

    func systemctl(_ arguments: String...) async throws -> (status: Int32, output: String) {
        try await run(["/usr/bin/systemctl", "--user"] + arguments)
    }

    /// `systemctl --user show -p NAME --value UNIT`.
    func property(_ name: String, _ unit: String = "tidings.service") async -> String {
        let arguments = ["show", "-p", name, "--value"] + (unit.isEmpty ? [] : [unit])
        return ((try? await run(["/usr/bin/systemctl", "--user"] + arguments))?.output ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts the manager (a login); true when it says it runs (`SystemState`: `is-system-running`
    /// would say "offline", as systemctl itself, outside the manager's namespace, sees no booted systemd).
    func start() async throws -> Bool {
        // $$ (this shell, then the manager: every step execs) joins our cgroups; the tmpfs
        // lives in this mount namespace only.
        let script = """
            for procs in "$@"; do echo $$ > "$procs" || exit 1; done
            mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd && mkdir -p /run/systemd/system || exit 1
            exec /usr/bin/setpriv --reuid=\(uid) --regid=\(gid) --clear-groups /usr/bin/env -i \(loginEnvironment.map { "'\($0)'" }.joined(separator: " ")) \(systemd) --user
            """
        logins += 1
        process = try SpawnedProcess(["/usr/bin/unshare", "-m", "/bin/sh", "-c", script, "sh"] + cgroups.map { $0 + "/cgroup.procs" },
                                     outputPath: directory.appendingPathComponent("systemd-user-\(logins).log").path)
        return await poll {
            ["running", "degraded"].contains(await self.property("SystemState", ""))
        }
    }

    private var logins = 0
    var output: String { process?.output ?? "" }

    /// Stops the manager by its PID (SIGTERM: a user manager's exit), waiting a bounded time;
    /// then kills by PID whatever is left in its cgroups.
    func stop() async {
        guard let process else { return }
        if process.isRunning { kill(process.pid, SIGTERM) }
        if !(await eventually(within: 15) { !process.isRunning }) { kill(process.pid, SIGKILL) }
        await offThePool { process.wait() }
        self.process = nil
        _ = await eventually(within: 5) {
            let left = self.processesInCgroups()
            for pid in left { kill(pid, SIGKILL) }
            return left.isEmpty
        }
    }

    /// Every process in our cgroups, the manager's services included.
    func processesInCgroups() -> [pid_t] {
        var pids: [pid_t] = []
        for cgroup in cgroups {
            guard let walker = FileManager.default.enumerator(atPath: cgroup) else { continue }
            var files = ["cgroup.procs"]
            while let path = walker.nextObject() as? String { if path.hasSuffix("/cgroup.procs") { files.append(path) } }
            for file in files {
                let text = (try? String(contentsOfFile: cgroup + "/" + file, encoding: .utf8)) ?? ""
                pids += text.split(separator: "\n").compactMap { pid_t($0) }
            }
        }
        return pids
    }

    /// Stops the manager if it runs; removes the cgroups (deepest first) and the folders.
    func remove() async {
        await stop()
        for cgroup in cgroups {
            var directories = [cgroup]
            if let walker = FileManager.default.enumerator(atPath: cgroup) {
                while let path = walker.nextObject() as? String {
                    var isDirectory: ObjCBool = false
                    if FileManager.default.fileExists(atPath: cgroup + "/" + path, isDirectory: &isDirectory), isDirectory.boolValue {
                        directories.append(cgroup + "/" + path)
                    }
                }
            }
            for path in directories.sorted(by: { $0.count > $1.count }) { rmdir(path) }
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Waits for a condition that needs a process to check (systemctl, the CLI): every 100 ms,
/// at most `seconds` (an external process manager's time, not a clock a test can inject).
func poll(within seconds: Double = 15, _ condition: @Sendable () async -> Bool) async -> Bool {
    for _ in 0..<Int(seconds * 10) {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return await condition()
}

@Suite("The daemon under a real systemd --user manager", .serialized)
struct SystemdUserServiceTests {
    @Test("tidings install --user, enable --now: the daemon answers on the default socket (an app and the CLI as the user) and shows on the user's bus; kill -9 → restarted; stop → clean; the next login starts it", .timeLimit(.minutes(2)))
    func userService() async throws {
        guard let manager = try UserManager.prepare() else { return }
        // Cleanup always: the manager and what it runs by PID, the cgroups, the folders.
        do {
            try await exercise(manager)
        } catch {
            Issue.record(error)
        }
        await manager.remove()
        #expect(manager.processesInCgroups().isEmpty)
        #expect(!manager.cgroups.contains { FileManager.default.fileExists(atPath: $0) }, "the cgroups are removed")
    }

    func exercise(_ manager: UserManager) async throws {
        guard try await manager.start() else {
            Issue.record("systemd --user did not start: \(manager.output)")
            return
        }

        // The programs, where the user can run them: as built if every folder on the way lets
        // the user through, else copies in the test's folder.
        var programs = (tidings: URL(fileURLWithPath: BuiltProducts.tidings).resolvingSymlinksInPath().path,
                        sampleApp: URL(fileURLWithPath: BuiltProducts.sampleApp).resolvingSymlinksInPath().path)
        if (try await manager.run([programs.tidings, "--help"])).status != 0 {
            let bin = manager.directory.appendingPathComponent("bin").path
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            for (source, name) in [(programs.tidings, "tidings"), (programs.sampleApp, "SampleApp")] {
                try FileManager.default.copyItem(atPath: source, toPath: bin + "/" + name)
            }
            programs = (bin + "/tidings", bin + "/SampleApp")
        }
        let (tidings, sampleApp) = programs

        // What a person does (docs/desktop.md): install, reload, enable --now.
        let install = try await manager.run([tidings, "install", "--user"])
        #expect(install.status == 0, "\(install.output)")
        #expect(FileManager.default.fileExists(atPath: manager.home + "/.config/systemd/user/tidings.service"))
        // The daemon's output into a file of the test's (there is no journal here), for the
        // failure messages below: a drop-in beside the installed unit, which stays as shipped.
        let daemonLog = manager.home + "/daemon.log"
        let dropIn = manager.home + "/.config/systemd/user/tidings.service.d"
        try FileManager.default.createDirectory(atPath: dropIn, withIntermediateDirectories: true)
        try "[Service]\nStandardOutput=append:\(daemonLog)\nStandardError=append:\(daemonLog)\n".write(toFile: dropIn + "/test-log.conf", atomically: true, encoding: .utf8)
        func daemonOutput() -> String { (try? String(contentsOfFile: daemonLog, encoding: .utf8)).map { String($0.suffix(4000)) } ?? "(no daemon output)" }
        #expect(try await manager.systemctl("daemon-reload").status == 0)
        let enable = try await manager.systemctl("enable", "--now", "tidings.service")
        #expect(enable.status == 0, "\(enable.output)")
        let status = (try? await manager.systemctl("status", "tidings.service"))?.output ?? ""
        #expect(await manager.property("ActiveState") == "active", "\(status)")
        let execStart = await manager.property("ExecStart")
        #expect(execStart.contains("\(tidings) daemon --consent grant --presenter desktop"), Comment(rawValue: execStart))
        #expect(await poll { (try? await manager.run([tidings, "notifications", "list"]))?.status == 0 },
                "the CLI reaches the daemon at the default socket")
        #expect(FileManager.default.fileExists(atPath: manager.socket))

        // A notification server on the user's session bus (dbus.socket of the same manager),
        // as the user: the daemon's desktop presenter finds it at $XDG_RUNTIME_DIR/bus.
        let mockLog = manager.directory.appendingPathComponent("mock.log").path
        let bus = "unix:path=\(manager.runtime)/bus"
        var mock: SpawnedProcess?
        if requireTool(NotificationMock.available, "python-dbusmock (Debian python3-dbusmock)") {
            _ = FileManager.default.createFile(atPath: mockLog, contents: nil)
            _ = chown(mockLog, manager.uid, manager.gid)
            mock = try manager.spawn(["/usr/bin/python3", "-m", "dbusmock", "--template", "notification_daemon", "-p", #"{"capabilities": "body actions"}"#, "-l", mockLog],
                                     extra: ["DBUS_SESSION_BUS_ADDRESS=\(bus)"], name: "dbusmock")
        }
        defer { mock?.stop(signal: SIGKILL) }
        @Sendable func mockCalls() -> String { (try? String(contentsOfFile: mockLog, encoding: .utf8)) ?? "" }
        if mock != nil {
            #expect(await eventually(within: 10) { mockCalls().contains("GetCapabilities") }, "the service's presenter read the server's capabilities: \(mock?.output ?? "")")
        }

        // An app as the user, with no TIDINGS_SOCKET: it finds the daemon where apps look by default.
        let manifest = manager.directory.appendingPathComponent("manifest.json").path
        try writeSampleAppManifest(to: manifest, executable: sampleApp)
        #expect(try await manager.run([tidings, "apps", "install", manifest]).status == 0)
        let app = try manager.spawn([sampleApp], name: "app")
        defer { app.stop(signal: SIGKILL) }
        #expect(await eventually { app.output.contains("scheduled saySomething") }, "\(app.output)")
        #expect(await poll { (try? await manager.run([tidings, "notifications", "list"]))?.output.contains("Say something") == true })
        if mock != nil {
            #expect(await eventually(within: 10) { mockCalls().contains("Notify") && mockCalls().contains("Say something") }, "\(mockCalls())")
            // The person clicks the bubble: the server's ActionInvoked reaches the app's delegate.
            let number = mockCalls().split(separator: "\n").filter { $0.contains(" Notify ") }.firstIndex { $0.contains("Say something") }.map { $0 + 1 } ?? 1
            let click = try await manager.run(["/usr/bin/gdbus", "call", "--session", "--dest", "org.freedesktop.Notifications", "--object-path", "/org/freedesktop/Notifications",
                                         "--method", "org.freedesktop.DBus.Mock.EmitSignal", "org.freedesktop.Notifications", "ActionInvoked", "us",
                                         "[<uint32 \(number)>, <'default'>]"], extra: ["DBUS_SESSION_BUS_ADDRESS=\(bus)"])
            #expect(click.status == 0, "\(click.output)")
            #expect(await eventually { app.output.contains("response saySomething action=tap") }, "\(app.output)")
        }

        // kill -9: systemd restarts it (RestartSec=2s of the shipped unit), on the same socket.
        let first = await manager.property("MainPID")
        #expect(Int32(first) ?? 0 > 0)
        kill(Int32(first) ?? 0, SIGKILL)
        let restarted = await poll {
            let now = await manager.property("MainPID")
            guard now != "0" && now != first else { return false }
            return await manager.property("ActiveState") == "active"
        }
        let pidNow = restarted ? "" : await manager.property("MainPID")
        #expect(restarted, "restarted: \(pidNow)")
        #expect(await manager.property("NRestarts") == "1")
        #expect(await poll { (try? await manager.run([tidings, "notifications", "list"]))?.status == 0 }, "the restarted daemon answers")

        // systemctl --user stop: SIGTERM, the daemon's graceful shutdown.
        let stop = try await manager.systemctl("stop", "tidings.service")
        #expect(stop.status == 0, "\(stop.output)")
        #expect(await manager.property("ActiveState") == "inactive", "\(daemonOutput())")
        #expect(await manager.property("Result") == "success", "\(daemonOutput())")
        #expect(await manager.property("ExecMainStatus") == "0", "\(daemonOutput())")
        #expect(daemonOutput().contains("tidings"), "the daemon's output reaches the drop-in's file")
        #expect(!FileManager.default.fileExists(atPath: manager.socket), "the socket is gone")
        #expect((try await manager.run([tidings, "notifications", "list"])).status != 0, "nobody answers")

        // The next login: a new manager; the enabled service starts by itself.
        await manager.stop()
        #expect(try await manager.start(), "\(manager.output)")
        #expect(await poll {
            guard await manager.property("ActiveState") == "active" else { return false }
            return (try? await manager.run([tidings, "notifications", "list"]))?.status == 0
        },
                "enabled: started at login")
    }
}
