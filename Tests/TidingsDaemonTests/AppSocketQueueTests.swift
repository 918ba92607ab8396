import Foundation
import Testing
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsIPC
import TidingsTesting

/// What waits on a connection of the app socket, replies larger than a request may be, and
/// bundle identifiers claimed at hello (docs/security.md, "App socket and app identity").
@Suite("App socket: queued requests, large replies, claimed identifiers", .timeLimit(.minutes(1)))
struct AppSocketQueueTests {
    /// A bare app socket whose handler hands each connection to the test and keeps it open
    /// until the test is done. A test sends its first frame right after connecting, before it
    /// awaits the connection here: the socket closes a connection without a first frame
    /// within `helloTimeout` (10 s) of accept, and a test task that resumed late on a loaded
    /// machine once sent its requests after that (none arrived; the test ran into its limit).
    struct Harness {
        let server: AppSocketServer
        let run: Task<Void, Never>
        let connections: AsyncStream<AppServerConnection>

        static func start(_ limits: AppSocketLimits = AppSocketLimits()) async throws -> Harness {
            let path = "/tmp/tsq-\(UUID().uuidString.prefix(8)).sock"
            let server = try await AppSocketServer.bind(path: path, limits: limits)
            let (connections, sink) = AsyncStream<AppServerConnection>.makeStream()
            let run = Task {
                await server.run { connection in
                    sink.yield(connection)
                    // Parked until `stop` cancels the run (the connection closes then).
                    try? await Task.sleep(for: .seconds(3600))
                }
            }
            return Harness(server: server, run: run, connections: connections)
        }

        func next() async -> AppServerConnection? {
            var iterator = connections.makeAsyncIterator()
            return await iterator.next()
        }

        func stop() async {
            run.cancel()
            await run.value
            await server.close()
        }
    }

    @Test("a daemon reply over the 16 MiB request limit reaches the client, and the connection stays")
    func largeReplyReachesTheClient() async throws {
        let path = "/tmp/tsq-\(UUID().uuidString.prefix(8)).sock"
        let server = try await AppSocketServer.bind(path: path)
        let message = String(repeating: "x", count: IPCCodec.maximumFrameLength + 1024)
        let run = Task {
            await server.run { connection in
                for await request in connection.requests {
                    connection.reply(request.id, .failure(NotificationError(.invalidRequest, message)))
                }
            }
        }
        let client = try await AppSocketClient.connect(path: path)
        for _ in 0..<2 {
            guard case .failure(let error) = try await client.call(.adminHello) else {
                Issue.record("expected the large failure")
                break
            }
            #expect(error.message.count == message.count)
        }
        client.close()
        run.cancel()
        await run.value
        await server.close()
    }

    /// Sends `count` requests (ids 1…count) padded to `length` bytes each.
    static func send(_ count: Int, to raw: RawAppConnection, length: Int = 100) async throws {
        for id in 1...count {
            try await raw.send(.setDelegate(true), id: UInt64(id), padTo: length)
        }
    }

    @Test("requests waiting per connection: at the limit (4) the daemon stops reading; each one taken lets the next in; all arrive, in order")
    func queuedRequestsAtTheLimit() async throws {
        let harness = try await Harness.start(AppSocketLimits(maximumQueuedRequests: 4))
        let raw = try RawAppConnection(path: harness.server.path)
        try await Self.send(10, to: raw)  // at once: see `Harness`
        let connection = try #require(await harness.next())
        #expect(await eventually(within: 10) { connection.queuedRequests.readingStopped || connection.queuedRequests.count == 10 })
        #expect(connection.queuedRequests.count == 4, "at the limit, not past it")
        #expect(connection.queuedRequests.readingStopped)
        var requests = connection.requests.makeAsyncIterator()
        #expect(await requests.next()?.id == 1)
        // One taken: one more comes in, and reading stops again.
        #expect(await eventually(within: 10) { connection.queuedRequests.readingStopped && connection.queuedRequests.count == 4 })
        var ids: [UInt64] = []
        for _ in 2...10 { if let request = await requests.next() { ids.append(request.id) } }
        #expect(ids == Array(2...10))
        #expect(connection.queuedRequests.count == 0)
        #expect(!connection.queuedRequests.readingStopped)
        await harness.stop()
    }

    @Test("queued bytes: two 100-byte requests at a limit of 200 bytes wait, the third waits to be read; one of any size is read when none waits")
    func queuedBytesAtTheLimit() async throws {
        let harness = try await Harness.start(AppSocketLimits(maximumQueuedBytes: 200))
        let raw = try RawAppConnection(path: harness.server.path)
        try await Self.send(5, to: raw)  // at once: see `Harness`
        let connection = try #require(await harness.next())
        #expect(await eventually(within: 10) { connection.queuedRequests.readingStopped || connection.queuedRequests.count == 5 })
        #expect(connection.queuedRequests.count == 2)
        #expect(connection.queuedRequests.bytes == 200)
        var requests = connection.requests.makeAsyncIterator()
        for id in 1...5 { #expect(await requests.next()?.id == UInt64(id)) }
        // A frame over the byte limit alone is read (it is within the frame limit).
        try await raw.send(.setDelegate(true), id: 6, padTo: 1000)
        #expect(await requests.next()?.id == 6)
        await harness.stop()
    }

    @Test("a peer that closes while its requests wait: every request it sent still arrives, then the end")
    func closingWhileStopped() async throws {
        let harness = try await Harness.start(AppSocketLimits(maximumQueuedRequests: 2))
        let raw = try RawAppConnection(path: harness.server.path)
        try await Self.send(20, to: raw)  // at once: see `Harness`
        let connection = try #require(await harness.next())
        #expect(await eventually(within: 10) { connection.queuedRequests.readingStopped })
        shutdown(raw.descriptor, Int32(SHUT_RDWR))
        var ids: [UInt64] = []
        for await request in connection.requests { ids.append(request.id) }
        #expect(ids == Array(1...20))
        await harness.stop()
    }

    @Test("a claimed bundle identifier that is no reverse-DNS name is refused at hello (invalidRequest), also in development mode; nothing is installed")
    func claimedIdentifiersAreChecked() async throws {
        let (daemon, run, directory) = try await AppSocketLimitsTests.daemon()
        defer { run.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        for bad in ["..", "../../tmp/x", "com.example/..", ".hidden.app", "com..x", String(repeating: "a.", count: 128) + "a"] {
            let raw = try RawAppConnection(path: daemon.socketPath)
            try await raw.send(.hello(AppHello(bundleIdentifier: bad, state: .background)))
            guard case .reply(1, .failure(let error))? = await raw.next() else {
                Issue.record("\(bad): not refused")
                continue
            }
            #expect(error.code == .invalidRequest, "\(bad)")
        }
        #expect(try await daemon.engine.installedApps().isEmpty)
        // A good one is still registered in development mode.
        let raw = try RawAppConnection(path: daemon.socketPath)
        try await raw.send(.hello(AppHello(bundleIdentifier: "com.example.good", state: .background)))
        guard case .reply(1, .hello(let bundle, _))? = await raw.next() else {
            Issue.record("a good identifier was refused")
            return
        }
        #expect(bundle == "com.example.good")
    }

    @Test("the daemon raises its soft limit on open files to the hard limit")
    func openFileLimitIsRaised() throws {
        let limit = try #require(raiseOpenFileLimit())
        #expect(limit.soft == limit.hard)
        var now = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &now) == 0)
        #expect(UInt64(now.rlim_cur) == limit.hard)
    }
}
