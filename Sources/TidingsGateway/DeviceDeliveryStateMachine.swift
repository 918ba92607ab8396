import TidingsStorage

/// The delivery order of one device connection, as a pure state machine.
///
/// When a device connects, its session is attached to the hub first and its backlog is read
/// from the store second, so a push committed in between may arrive both ways: pushes that
/// arrive while the backlog loads are held, and the backlog goes out first, then the held
/// pushes it did not contain, in sequence order. Afterwards pushes go out as they commit.
/// Acknowledgements are accepted only for pushes sent on this connection.
struct DeviceDeliveryStateMachine: Sendable {
    private enum Phase: Sendable {
        case loadingBacklog(held: [StoredPush])
        case live
    }

    private var phase: Phase = .loadingBacklog(held: [])
    private(set) var inFlight: Set<Int64> = []

    /// New commits for this device: returns what to send now.
    mutating func committed(_ pushes: [StoredPush]) -> [StoredPush] {
        switch phase {
        case .loadingBacklog(var held):
            held.append(contentsOf: pushes)
            phase = .loadingBacklog(held: held)
            return []
        case .live:
            let fresh = pushes.filter { !inFlight.contains($0.sequence) }
            for p in fresh { inFlight.insert(p.sequence) }
            return fresh
        }
    }

    /// The backlog read from the store: returns what to send, in order.
    mutating func backlogLoaded(_ backlog: [StoredPush]) -> [StoredPush] {
        guard case .loadingBacklog(let held) = phase else { return [] }
        var seen = Set(backlog.map(\.sequence))
        var out = backlog.sorted { $0.sequence < $1.sequence }
        for p in held.sorted(by: { $0.sequence < $1.sequence }) where !seen.contains(p.sequence) {
            seen.insert(p.sequence)
            out.append(p)
        }
        phase = .live
        for p in out { inFlight.insert(p.sequence) }
        return out
    }

    /// A device acknowledgement: true when it names a push sent on this connection.
    mutating func acknowledged(_ sequence: Int64) -> Bool {
        inFlight.remove(sequence) != nil
    }

    var isLive: Bool { if case .live = phase { true } else { false } }
}
