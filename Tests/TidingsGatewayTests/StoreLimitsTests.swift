import Foundation
import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import Synchronization
import Testing
import TidingsCore
@testable import TidingsGateway
import TidingsPostgres
import TidingsSQLite
import TidingsStorage
import TidingsTestSupport
import TidingsTesting

/// The store limits of `GatewayConfiguration` (docs/security.md, "Store limits"): each at its
/// number and past it.
@Suite("Store limits")
struct StoreLimitsTests {
    final class RecordingSink: PushCommitSink, Sendable {
        let eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let outcomes = Mutex<[PushCommitOutcome]>([])
        func committed(_ outcomes: [PushCommitOutcome]) { self.outcomes.withLock { $0 += outcomes } }
    }

    func push(_ i: Int) -> NewPush {
        NewPush(apnsID: "p\(i)", token: "aa", deviceID: "d1", bundleID: "com.a", topic: Topic(rawValue: "com.a")!, pushType: .alert, priority: .immediate,
                collapseID: nil, expiresAt: .max, payload: Array(#"{"aps":{}}"#.utf8), acceptedAt: 1)
    }

    /// `maximumPushesPerCommit` (here 3) and `maximumAcknowledgementsPerCommit` (here 2): while
    /// the first commit is held, pushes and acknowledgements queue; then they go in
    /// transactions of at most the limits, in order, every one answered. At the limit: one
    /// full transaction; past it: as many as needed.
    @Test(arguments: [(queued: 3, acks: 2, expected: [[1, 0], [3, 2]]),
                      (queued: 7, acks: 5, expected: [[1, 0], [3, 2], [3, 2], [1, 1]])])
    func aGroupCommitHoldsAtMostTheBatchLimits(queued: Int, acks: Int, expected: [[Int]]) async throws {
        let store = FaultyGatewayStore(holdingCommits: true)
        let committer = PushCommitter(store: store, clock: SystemWallClock(), logger: Logger(label: "test"), metrics: GatewayMetrics(),
                                      maximumBatch: (pushes: 3, acknowledgements: 2)) { _ in }
        committer.start()
        let sink = RecordingSink()
        #expect(committer.submit(.init(push: push(0), sink: sink, streamID: HTTP2StreamID(1))) == .queued)
        #expect(await store.waitForCommit())
        for i in 1...queued {
            #expect(committer.submit(.init(push: push(i), sink: sink, streamID: HTTP2StreamID(2 * i + 1))) == .queued)
        }
        committer.acknowledge((1...Int64(acks)).map { $0 })
        store.releaseCommits()
        for _ in 0..<1_000 where sink.outcomes.withLock({ $0.count }) < queued + 1 { try await Task.sleep(for: .milliseconds(5)) }
        committer.stop()
        #expect(store.commitSizes.withLock { $0 } == expected)
        #expect(sink.outcomes.withLock { $0.map(\.apnsID) } == (0...queued).map { "p\($0)" })
        #expect(sink.outcomes.withLock { $0.allSatisfy(\.committed) })
    }

    /// Delivery events go in the group commit when the store takes them (`GroupCommitsEvents`):
    /// while the first commit is held, a push, an acknowledgement and three connections' events
    /// queue; then they go in one transaction — the events whole batches at a time, at most the
    /// acknowledgements' limit (here 4) of them, at least one batch — and each batch's promise
    /// succeeds once its transaction is durable. After `stop()` events are refused (`Stopping`).
    @Test func deliveryEventsGoInTheGroupCommit() async throws {
        let store = FaultyGatewayStore(holdingCommits: true)
        let committer = PushCommitter(store: store, clock: SystemWallClock(), logger: Logger(label: "test"), metrics: GatewayMetrics(),
                                      maximumBatch: (pushes: 3, acknowledgements: 4)) { _ in }
        #expect(committer.recordsEvents)
        committer.start()
        let sink = RecordingSink()
        #expect(committer.submit(.init(push: push(0), sink: sink, streamID: HTTP2StreamID(1))) == .queued)
        #expect(await store.waitForCommit())
        #expect(committer.submit(.init(push: push(1), sink: sink, streamID: HTTP2StreamID(3))) == .queued)
        committer.acknowledge([1])
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        func events(_ device: String, _ count: Int) -> PushCommitter.Events {
            let reports: [DeviceEventReport] = (0..<count).map { .init(.presented, apnsID: "p\($0)", sequence: Int64($0 + 1)) }
            return PushCommitter.Events(batch: DeviceEventBatch(deviceID: device, events: reports), recorded: loop.makePromise())
        }
        let batches = [events("d1", 3), events("d2", 1), events("d3", 2)]
        for b in batches { committer.record(b) }
        store.releaseCommits()
        for b in batches { try await b.recorded.futureResult.get() }
        // The pushes' answers are handed to their sinks after the same commits, not before the events' promises.
        #expect(await eventually { sink.outcomes.withLock { $0.count } == 2 })
        #expect(sink.outcomes.withLock { $0.map(\.apnsID) } == ["p0", "p1"])
        // 3 + 1 fit in 4; the third batch (2) goes in the next transaction.
        #expect(store.commitSizes.withLock { $0 } == [[1, 0], [1, 1, 4], [0, 0, 2]])
        committer.stop()
        let late = events("d1", 1)
        committer.record(late)
        await #expect(throws: PushCommitter.Stopping.self) { try await late.recorded.futureResult.get() }
        // A batch larger than the limit on its own still goes, alone.
        let alone = FaultyGatewayStore()
        let second = PushCommitter(store: alone, clock: SystemWallClock(), logger: Logger(label: "test"), metrics: GatewayMetrics(),
                                   maximumBatch: (pushes: 3, acknowledgements: 4)) { _ in }
        second.start()
        let big = events("d1", 9)
        second.record(big)
        try await big.recorded.futureResult.get()
        second.stop()
        #expect(alone.commitSizes.withLock { $0 } == [[0, 0, 9]])
    }

    /// `registryMaximumMissedTokens` / `registryMaximumMissedNames` (here 3 and 2): unknown
    /// tokens, keys and bundle ids are remembered up to the limit; the next new one forgets them
    /// all first. `registryNegativeCacheDuration` (here 500 ms): a miss is trusted until it has
    /// passed, then the store is asked again.
    @Test func rememberedMissesStayWithinTheirLimits() throws {
        let directory = GatewayDirectory(store: InMemoryGatewayStore(), negativeCacheDuration: .milliseconds(500),
                                         maximumMissedTokens: 3, maximumMissedNames: 2)
        for i in 0..<3 { #expect(try directory.loadToken("t\(i)", now: 1_000) == nil) }
        for i in 0..<2 {
            #expect(try directory.loadKey("K\(i)", now: 1_000) == nil)
            #expect(try directory.loadApp("com.a\(i)", now: 1_000) == nil)
        }
        #expect(directory.missCounts == (tokens: 3, keys: 2, apps: 2), "at the limits: all remembered")
        #expect(try directory.loadToken("t0", now: 1_000) == nil)
        #expect(directory.missCounts.tokens == 3, "one remembered again is not a new one")
        if case .miss = directory.cachedToken("t2", now: 1_499) {} else { Issue.record("a miss is trusted for 500 ms") }
        if case .needsStore = directory.cachedToken("t2", now: 1_500) {} else { Issue.record("after 500 ms the store is asked") }

        #expect(try directory.loadToken("t3", now: 1_000) == nil)
        #expect(try directory.loadKey("K2", now: 1_000) == nil)
        #expect(try directory.loadApp("com.a2", now: 1_000) == nil)
        #expect(directory.missCounts == (tokens: 1, keys: 1, apps: 1), "past the limits: the old ones forgotten")
        if case .needsStore = directory.cachedToken("t0", now: 1_001) {} else { Issue.record("t0 was forgotten") }
        if case .miss = directory.cachedToken("t3", now: 1_001) {} else { Issue.record("t3 is remembered") }

        let none = GatewayDirectory(store: InMemoryGatewayStore(), maximumMissedTokens: 0, maximumMissedNames: 0)
        #expect(try none.loadToken("t", now: 1) == nil)
        #expect(none.missCounts == (tokens: 0, keys: 0, apps: 0), "0: nothing remembered")
    }

    /// Each store limit at the ends of its range is accepted, past them refused with a message
    /// naming it; `buildGateway` refuses a configuration with one out of range before it opens
    /// anything.
    @Test func storeLimitsAreValidated() throws {
        var pg = PostgresStoreLimits()
        #expect(pg.problem == nil)
        for n in [1, 1_000] { pg.maximumConnections = n; #expect(pg.problem == nil) }
        for n in [0, 1_001] { pg.maximumConnections = n; #expect(pg.problem?.contains("connection pool size") == true) }
        pg = PostgresStoreLimits()
        for d in [Duration.milliseconds(1), .seconds(3_600)] { pg.statementTimeout = d; #expect(pg.problem == nil) }
        for d in [Duration.zero, .seconds(3_601)] { pg.statementTimeout = d; #expect(pg.problem?.contains("statement timeout") == true) }
        pg = PostgresStoreLimits()
        pg.acquireTimeout = .zero
        #expect(pg.problem?.contains("acquire timeout") == true)
        pg = PostgresStoreLimits()
        pg.partitionSize = 0
        #expect(pg.problem?.contains("partition size") == true)

        var sqlite = SQLiteStoreLimits()
        #expect(sqlite.problem == nil)
        sqlite.walPageLimit = sqlite.checkpointPages
        #expect(sqlite.problem == nil)
        sqlite.walPageLimit = sqlite.checkpointPages - 1
        #expect(sqlite.problem?.contains("below the checkpoint threshold") == true)
        sqlite = SQLiteStoreLimits()
        sqlite.busyTimeout = .zero
        #expect(sqlite.problem?.contains("busy timeout") == true)

        let dir = TemporaryDirectories.make(prefix: "tidings-limits-")
        var c = GatewayConfiguration(dataDirectory: dir)
        c.storage = .custom(InMemoryGatewayStore())
        for n in [1, 1_000_000] { c.maximumPushesPerCommit = n; #expect(c.problem == nil) }
        c.maximumPushesPerCommit = 0
        #expect(throws: GatewayConfigurationError.self) { try buildGateway(c) }
        #expect(!FileManager.default.fileExists(atPath: dir.path), "refused before anything was made")
        c.maximumPushesPerCommit = 4_096
        c.registryRefreshInterval = .zero
        #expect(c.problem?.contains("registryRefreshInterval") == true)
        c.registryRefreshInterval = .seconds(5)
        c.storage = .sqlite
        c.sqlite.busyTimeout = .seconds(3_601)
        #expect(c.problem?.contains("busy timeout") == true)
        c.storage = .postgres(url: "postgres://127.0.0.1/x")
        #expect(c.problem == nil, "the SQLite limits do not apply to PostgreSQL")
        c.postgres.maximumConnections = 0
        #expect(throws: GatewayConfigurationError.self) { try buildGateway(c) }
    }

    /// The command line: a value past its range is a clear message naming the option and a
    /// non-zero exit, before anything listens.
    @Test(arguments: [(["--database-connections", "0"], "--database-connections is 1 to 1000"),
                      (["--database-connections", "1001"], "--database-connections is 1 to 1000"),
                      (["--database-statement-timeout", "0"], "--database-statement-timeout is a number of seconds"),
                      (["--database-acquire-timeout", "nan"], "--database-acquire-timeout is a number of seconds"),
                      (["--database-connect-timeout", "3601"], "--database-connect-timeout is a number of seconds"),
                      (["--database-partition-size", "0"], "--database-partition-size is 1 to"),
                      (["--sqlite-busy-timeout=-1"], "--sqlite-busy-timeout is a number of seconds"),
                      (["--sqlite-wal-limit", "999"], "--sqlite-wal-limit is 1000 to"),
                      (["--commit-batch", "0"], "--commit-batch is 1 to 1000000"),
                      (["--registry-refresh", "0"], "--registry-refresh is a number of seconds")])
    func badStoreLimitOptionsAreRefused(arguments: [String], message: String) async throws {
        guard requireTool(CrashTests.executable != nil, "the tidings executable next to the test bundle") else { return }
        let dir = TemporaryDirectories.make(prefix: "tidings-limits-").path
        let run = try await runTidings(["gateway", "--data-dir", dir, "--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0",
                                  "--admin-listen", "off"] + arguments)
        #expect(run.status != 0)
        #expect(run.output.contains(message), "\(run.output)")
        #expect(!run.output.contains("provider API on"))
    }
}
