/// What bounds the PostgreSQL store's connections, waits and partitions
/// (`GatewayConfiguration.postgres`, the `--database-…` options; docs/security.md).
public struct PostgresStoreLimits: Sendable, Hashable {
    /// Connections a node opens to PostgreSQL for its calls, at most (the commit thread, the
    /// thread pool's lookups and pages, maintenance), plus its one LISTEN connection. A call
    /// that finds all of them busy waits up to `acquireTimeout`.
    public var maximumConnections: Int = 8
    /// How long connecting (TCP, TLS, start-up) may take before the call fails.
    public var connectTimeout: Duration = .seconds(5)
    /// How long a call waits for a free connection before it fails (a push: `500
    /// InternalServerError`), so a stuck database does not queue callers without end.
    public var acquireTimeout: Duration = .seconds(10)
    /// PostgreSQL's `statement_timeout` on every connection: a statement still running after
    /// it is cancelled by the server (the call fails; a commit's transaction is rolled back).
    /// Waiting for the commit lock counts.
    public var statementTimeout: Duration = .seconds(30)
    /// How long the LISTEN connection waits before connecting again after it dropped.
    public var reconnectDelay: Duration = .milliseconds(200)
    /// Pushes per partition of a new database's push log (a database keeps its own).
    public var partitionSize: Int64 = 1_000_000

    /// The accepted ranges (`problem` names the first value outside them).
    public static let connectionRange = 1...1_000
    public static let timeoutRange: ClosedRange<Duration> = .milliseconds(1) ... .seconds(3_600)
    public static let reconnectDelayRange: ClosedRange<Duration> = .milliseconds(1) ... .seconds(60)
    public static let partitionSizeRange: ClosedRange<Int64> = 1...(1 << 40)

    public init() {}

    /// What is wrong with these limits, or nil.
    public var problem: String? {
        if !Self.connectionRange.contains(maximumConnections) {
            return "the connection pool size is \(maximumConnections); it must be 1 to \(Self.connectionRange.upperBound)"
        }
        for (name, value) in [("connect timeout", connectTimeout), ("acquire timeout", acquireTimeout), ("statement timeout", statementTimeout)]
        where !Self.timeoutRange.contains(value) {
            return "the \(name) is \(value); it must be 1 ms to 1 hour"
        }
        if !Self.reconnectDelayRange.contains(reconnectDelay) { return "the reconnect delay is \(reconnectDelay); it must be 1 ms to 60 s" }
        if !Self.partitionSizeRange.contains(partitionSize) {
            return "the partition size is \(partitionSize); it must be 1 to \(Self.partitionSizeRange.upperBound)"
        }
        return nil
    }
}

extension Duration {
    /// Whole milliseconds, at least 1 (the store's waits are never zero).
    var wholeMilliseconds: Int64 {
        max(1, components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000)
    }
}
