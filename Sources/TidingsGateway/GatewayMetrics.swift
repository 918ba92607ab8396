import CoreMetrics
import Metrics
import Prometheus
import TidingsStorage

/// The gateway's Prometheus metrics (swift-metrics API, swift-prometheus registry),
/// served at `/metrics` on the admin endpoint.
final class GatewayMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let accepted: CoreMetrics.Counter
    private let rejected: CoreMetrics.Counter
    private let delivered: CoreMetrics.Counter
    private let commits: CoreMetrics.Counter
    private let commitBatch: CoreMetrics.Recorder
    private let commitDuration: CoreMetrics.Timer
    private let presentedEvents: CoreMetrics.Counter
    private let answeredEvents: CoreMetrics.Counter
    private let eventLag: CoreMetrics.Timer
    let connectedDevices: CoreMetrics.Gauge
    let providerConnections: CoreMetrics.Meter

    init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[Self.eventLagLabel] = Self.eventLagBuckets
        self.factory = factory
        accepted = CoreMetrics.Counter(label: "tidings_gateway_pushes_accepted_total", factory: factory)
        rejected = CoreMetrics.Counter(label: "tidings_gateway_pushes_rejected_total", factory: factory)
        delivered = CoreMetrics.Counter(label: "tidings_gateway_pushes_acknowledged_total", factory: factory)
        commits = CoreMetrics.Counter(label: "tidings_gateway_commits_total", factory: factory)
        commitBatch = CoreMetrics.Recorder(label: "tidings_gateway_commit_batch_size", factory: factory)
        commitDuration = CoreMetrics.Timer(label: "tidings_gateway_commit_duration_seconds", factory: factory)
        presentedEvents = CoreMetrics.Counter(label: "tidings_gateway_delivery_events_total", dimensions: [("event", "presented")], factory: factory)
        answeredEvents = CoreMetrics.Counter(label: "tidings_gateway_delivery_events_total", dimensions: [("event", "answered")], factory: factory)
        eventLag = CoreMetrics.Timer(label: Self.eventLagLabel, factory: factory)
        connectedDevices = CoreMetrics.Gauge(label: "tidings_gateway_connected_devices", factory: factory)
        providerConnections = CoreMetrics.Meter(label: "tidings_gateway_provider_connections", factory: factory)
    }

    /// A connection closed at accept because a connection cap was reached (`ConnectionAdmission`).
    func recordRefusedConnection(listener: String, reason: String) {
        CoreMetrics.Counter(label: "tidings_gateway_connections_refused_total", dimensions: [("listener", listener), ("reason", reason)],
                            factory: factory).increment()
    }

    /// A connection closed before it was served: its TLS handshake or HTTP/2 preface did not
    /// arrive in time, or (admin) its request was not complete in time or too large.
    func recordClosedConnection(listener: String, reason: String) {
        CoreMetrics.Counter(label: "tidings_gateway_connections_closed_early_total", dimensions: [("listener", listener), ("reason", reason)],
                            factory: factory).increment()
    }

    func recordRejected(_ reason: String) {
        CoreMetrics.Counter(label: "tidings_gateway_pushes_rejected_by_reason_total", dimensions: [("reason", reason)], factory: factory).increment()
        rejected.increment()
    }

    /// One group commit; `accepted`: pushes it made durable (each answered 200).
    func recordCommit(pushes: Int, acks: Int, duration: Duration, accepted committed: Int) {
        commits.increment()
        if committed > 0 { accepted.increment(by: committed) }
        commitBatch.record(pushes + acks)
        commitDuration.recordNanoseconds(Int64(duration.components.seconds) * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
        if acks > 0 { delivered.increment(by: acks) }
    }

    /// Delivery events a device reported and the store recorded (one transaction): pushes the
    /// device presented, and those the person answered.
    func recordEvents(presented: Int, answered: Int) {
        if presented > 0 { presentedEvents.increment(by: presented) }
        if answered > 0 { answeredEvents.increment(by: answered) }
    }

    /// From when a stage happened on the device (its `occurredAt`) to when the gateway had it
    /// durable: how far behind the person the status is — the way back of an event, or how
    /// long a device kept it while offline.
    static let eventLagLabel = "tidings_gateway_delivery_event_lag_seconds"
    static let eventLagBuckets: [Duration] = [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(20),
                                              .milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(500), .seconds(1),
                                              .seconds(5), .seconds(30), .seconds(300), .seconds(3_600)]

    /// The lag of each event that carried its time, now durable at `durableAt` (a device clock
    /// ahead of the gateway's counts as no lag).
    func recordEventLag(_ events: [DeviceEventReport], durableAt: EpochMilliseconds) {
        for e in events {
            guard let occurredAt = e.occurredAt else { continue }
            let lag = max(0, durableAt - occurredAt)  // occurredAt is within its range, durableAt this gateway's clock
            eventLag.recordNanoseconds(lag > Int64.max / 1_000_000 ? Int64.max : lag * 1_000_000)
        }
    }

    /// The Prometheus text exposition.
    func exposition() -> [UInt8] { registry.emitToBuffer() }
}
