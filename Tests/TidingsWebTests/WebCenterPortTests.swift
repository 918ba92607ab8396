import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TidingsCore
@testable import TidingsWeb

/// The web center's port: the configured one, or — with `anyPortIfTaken`, as `tidings daemon`
/// without `--web-port` — any free one when binding it fails because it is taken.
@Suite struct WebCenterPortTests {
    /// A center on `port` over an admin that answers nothing; its task and URL once it listens
    /// (nil when `run()` ended first: its error).
    static func start(port: Int, anyPortIfTaken: Bool) throws -> (WebCenter, Task<Void, any Error>, String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("web-port-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let hub = WebHub(attachmentsRoot: directory + "/attachments", logger: Logger(label: "test"))
        let center = try WebCenter(configuration: WebCenterConfiguration(dataDirectory: directory, port: port, anyPortIfTaken: anyPortIfTaken),
                                   hub: hub, admin: { _ in .ok })
        return (center, Task { try await center.run() }, directory)
    }

    /// The port `center` listens on once it does; nil when its run ended first (a bind that
    /// failed) or nothing happened within a generous real-time guard. (`url()` would wait for
    /// ever on a center that never listens.)
    static func listeningPort(_ center: WebCenter, _ task: Task<Void, any Error>) async -> Int? {
        let ended = Ended()
        Task { _ = try? await task.value; ended.value.withLock { $0 = true } }
        for _ in 0..<4_000 {
            if let access = center.access, let port = WebCenter.url(access: access, host: "127.0.0.1").port { return port }
            if ended.value.withLock({ $0 }) { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    final class Ended: Sendable {
        let value = Mutex(false)
    }

    /// A listener on 127.0.0.1 holding a port (the port a center will find taken).
    static func holdAPort() async throws -> (any Channel, Int) {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        return (channel, try #require(channel.localAddress?.port))
    }

    @Test(.timeLimit(.minutes(1))) func aTakenPortIsLeftForAnotherWhenAnyWillDo() async throws {
        let (holder, taken) = try await Self.holdAPort()
        let (center, task, directory) = try Self.start(port: taken, anyPortIfTaken: true)
        defer { task.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        let port = await Self.listeningPort(center, task)
        #expect(port != nil && port != taken)
        try await holder.close()
    }

    @Test(.timeLimit(.minutes(1))) func aTakenPortIsAnErrorWhenItWasAskedFor() async throws {
        let (holder, taken) = try await Self.holdAPort()
        let (_, task, directory) = try Self.start(port: taken, anyPortIfTaken: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let error = await #expect(throws: WebCenter.PortTaken.self) { try await task.value }
        #expect(error?.port == taken)
        #expect("\(error.map { "\($0)" } ?? "")".contains("the port is taken"))
        try await holder.close()
    }

    /// Several centers told the same free port at once (daemons started together, each on the
    /// default port): one listens on it, every other on a port of its own — none stops. (With
    /// a check before the bind, each found the port free and all but one failed to bind.)
    @Test(.timeLimit(.minutes(1))) func centersStartedTogetherOnOnePortAllListen() async throws {
        let (holder, port) = try await Self.holdAPort()
        try await holder.close()  // free now; the centers race for it
        var started: [(WebCenter, Task<Void, any Error>, String)] = []
        for _ in 0..<4 { started.append(try Self.start(port: port, anyPortIfTaken: true)) }
        defer { for (_, task, directory) in started { task.cancel(); try? FileManager.default.removeItem(atPath: directory) } }
        var ports: [Int] = []
        for (center, task, _) in started { ports.append(await Self.listeningPort(center, task) ?? -1) }
        #expect(Set(ports).count == 4, "\(ports)")
        #expect(ports.filter { $0 == port }.count <= 1)
        #expect(!ports.contains(-1))
    }
}
