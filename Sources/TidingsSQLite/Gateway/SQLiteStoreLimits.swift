/// What bounds the SQLite gateway store's waits and its write-ahead log
/// (`GatewayConfiguration.sqlite`, the `--sqlite-…` options; docs/security.md).
public struct SQLiteStoreLimits: Sendable, Hashable {
    /// How long a statement waits for a lock another connection holds (`busy_timeout`; another
    /// process on the file, such as `tidings keys`) before it fails.
    public var busyTimeout: Duration = .seconds(10)
    /// WAL frames (pages) at which the background connection checkpoints.
    public var checkpointPages: Int = 1_000
    /// WAL frames at which the writer checkpoints itself after its commit (the checkpointer fell
    /// behind or a reader pinned old frames): the WAL's bound, about this many pages.
    public var walPageLimit: Int = 10_000

    public static let busyTimeoutRange: ClosedRange<Duration> = .milliseconds(1) ... .seconds(3_600)
    public static let pageRange = 1...10_000_000

    public init() {}

    /// What is wrong with these limits, or nil.
    public var problem: String? {
        if !Self.busyTimeoutRange.contains(busyTimeout) { return "the busy timeout is \(busyTimeout); it must be 1 ms to 1 hour" }
        if !Self.pageRange.contains(checkpointPages) || !Self.pageRange.contains(walPageLimit) {
            return "WAL page counts must be 1 to \(Self.pageRange.upperBound)"
        }
        if walPageLimit < checkpointPages {
            return "the WAL page limit (\(walPageLimit)) is below the checkpoint threshold (\(checkpointPages))"
        }
        return nil
    }
}
