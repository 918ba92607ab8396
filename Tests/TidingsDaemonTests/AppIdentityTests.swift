import Foundation
import Testing
import TidingsCore
import TidingsDaemon
import TidingsIPC
import TidingsTestSupport
import TidingsTesting

/// App identity is what the peer ran when the daemon accepted its connection
/// (docs/security.md, "App socket and app identity (daemon)"). A Python helper connects,
/// and says hello when the test tells it to: either itself (`plain`), or — the attack —
/// from a forked child after the parent has exec'd the installed app's executable.
@Suite("App identity at accept", .timeLimit(.minutes(1)))
struct AppIdentityTests {
    static let helper = """
        import os, sys, socket, signal, struct
        path, mode, target, hello = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].encode()
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        os.set_inheritable(s.fileno(), True)
        def recvall(n):
            data = b""
            while len(data) < n:
                chunk = s.recv(n - len(data))
                if not chunk:
                    return None
                data += chunk
            return data
        def say_hello():
            sys.stdin.readline()
            s.sendall(struct.pack(">I", len(hello)) + hello)
            header = recvall(4)
            body = recvall(struct.unpack(">I", header)[0]) if header else None
            print("reply " + (body.decode() if body else "none"), flush=True)
        if mode == "plain":
            print("ready", flush=True)
            say_hello()
            sys.exit(0)
        child = os.fork()
        if child == 0:
            say_hello()
            os._exit(0)
        print("ready", flush=True)
        signal.sigwait([signal.SIGUSR1])
        os.execv(target, [target, "30"])
        """

    final class Helper: @unchecked Sendable {
        let process = Process()
        let input = Pipe()
        let outputPath: String

        init(socket: String, mode: String, target: String, directory: String) throws {
            outputPath = directory + "/helper-\(mode).log"
            FileManager.default.createFile(atPath: outputPath, contents: nil)
            let hello = AppEnvelope(id: 1, request: .hello(AppHello(bundleIdentifier: "com.example.real", state: .background)))
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", AppIdentityTests.helper, socket, mode, target,
                                 String(decoding: try JSONEncoder().encode(hello), as: UTF8.self)]
            process.standardInput = input
            let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            process.standardOutput = output
            process.standardError = output
            try process.run()
        }

        var pid: Int32 { process.processIdentifier }
        var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

        func sayHello() { input.fileHandleForWriting.write(Data("go\n".utf8)) }

        func reply() async -> AppReply? {
            guard await eventually({ self.output.contains("reply ") }) else { return nil }
            guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("reply ") }),
                  case .reply(1, let reply)? = try? JSONDecoder().decode(DaemonEnvelope.self, from: Data(line.dropFirst(6).utf8)) else { return nil }
            return reply
        }

        /// SIGKILL without waiting (Foundation reaps the child): it runs in a `defer`, which cannot
        /// await, and a `waitUntilExit` there would hold a thread of the cooperative pool.
        func stop() {
            kill(pid, SIGKILL)
        }
    }

    static func daemon() async throws -> (NotificationDaemon, Task<Void, any Error>, String) {
        let directory = "/tmp/tai-\(UUID().uuidString.prefix(8))"
        let configuration = DaemonConfiguration(dataDirectory: directory, consent: .grant, developmentMode: false, terminalPresenter: false, clock: TestWallClock())
        let daemon = try await buildDaemon(configuration)
        return (daemon, Task { try await daemon.run() }, directory)
    }

    static func install(_ daemon: NotificationDaemon, executable: String) async throws {
        try await daemon.engine.install(AppRecord(bundleIdentifier: "com.example.real", displayName: "Real", executable: executable,
                                                  directory: (executable as NSString).deletingLastPathComponent, installedAt: Date()))
    }

    @Test("an installed app's own process is accepted (control)")
    func appItselfIsAccepted() async throws {
        let (daemon, run, directory) = try await Self.daemon()
        defer { run.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        let helper = try Helper(socket: daemon.socketPath, mode: "plain", target: "", directory: directory)
        defer { helper.stop() }
        #expect(await eventually { helper.output.contains("ready") && daemon.appConnectionCount == 1 })
        let python = try #require(PeerCredentials.executable(ofProcess: helper.pid))
        try await Self.install(daemon, executable: python)
        helper.sayHello()
        guard case .hello(let bundle, _)? = await helper.reply() else {
            Issue.record("the app's own process was refused: \(helper.output)")
            return
        }
        #expect(bundle == "com.example.real")
    }

    @Test("connect, fork, exec the app: the child's hello on the inherited socket is refused")
    func forkExecRaceIsRefused() async throws {
        let (daemon, run, directory) = try await Self.daemon()
        defer { run.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        let app = URL(fileURLWithPath: "/bin/sleep").resolvingSymlinksInPath().path
        try await Self.install(daemon, executable: app)
        let helper = try Helper(socket: daemon.socketPath, mode: "fork", target: app, directory: directory)
        defer { helper.stop() }
        // The daemon accepted the connection while the peer was still the helper…
        #expect(await eventually { helper.output.contains("ready") && daemon.appConnectionCount == 1 })
        // …which now becomes the app (same pid, same socket), and its child says hello.
        kill(helper.pid, SIGUSR1)
        #expect(await eventually { PeerCredentials.executable(ofProcess: helper.pid) == app })
        helper.sayHello()
        guard case .failure(let error)? = await helper.reply() else {
            Issue.record("the forked child was accepted as the app: \(helper.output)")
            return
        }
        #expect(error.code == .notificationsNotAllowed)
    }

    @Test("the start time is field 22 of /proc/PID/stat, counted after the last parenthesis")
    func startTimeParsing() {
        #expect(PeerCredentials.startTime(ofProcess: getpid()) != nil)
        #expect(PeerCredentials.startTime(ofProcess: getpid()) == PeerCredentials.startTime(ofProcess: getpid()))
        #expect(PeerCredentials.startTime(ofProcess: 0) == nil)
        #expect(PeerCredentials.startTime(ofProcess: -1) == nil)
    }
}
