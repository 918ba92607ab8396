/// What a store shared by several gateway nodes offers them besides storage
/// (docs/scaling.md): which node holds a device's connection (a lease per device), wake-ups of
/// that node when another commits a push for the device, and maintenance on one node at a time.
/// A store without it (SQLite, in memory) serves one node, which delivers its own commits.
public protocol GatewayCoordination: Sendable {
    /// This node's identity in leases and wake-ups.
    var nodeID: String { get }
    /// Takes the devices' leases for this node, from whichever node held them (the device
    /// connected here last).
    func takeLeases(deviceIDs: [String], until: EpochMilliseconds) throws(GatewayStoreError)
    /// Extends this node's leases; returns the devices whose lease another node took
    /// meanwhile (this node must stop sending to them).
    func renewLeases(deviceIDs: [String], until: EpochMilliseconds) throws(GatewayStoreError) -> [String]
    /// Gives up this node's leases (the devices disconnected).
    func releaseLeases(deviceIDs: [String]) throws(GatewayStoreError)
    /// Calls `wake` with the devices another node committed pushes for while this node holds
    /// their lease, `leaseTaken` with devices whose lease another node took from this one (the
    /// device connected there: stop sending to it), `registryChanged` when any node changed a key, an app or a token (drop it
    /// from caches), and `reconnected` each time the channel was re-established (notifications
    /// may have been lost meanwhile: catch up every device, drop every cached entry). Until
    /// `stopListening()`.
    func startListening(wake: @escaping @Sendable ([String]) -> Void, leaseTaken: @escaping @Sendable ([String]) -> Void,
                        registryChanged: @escaping @Sendable (GatewayRegistryChange) -> Void, reconnected: @escaping @Sendable () -> Void)
    func stopListening()
    /// Runs `body` if no other node runs maintenance now (nil otherwise).
    func exclusively<T>(_ body: () throws -> T) throws(GatewayStoreError) -> T?
}

/// A registry entry some node changed (`GatewayCoordination.startListening`).
public enum GatewayRegistryChange: Sendable, Hashable {
    case key(String)
    case app(String)
    case token(String)

    /// `kind:id`, as sent between nodes.
    public init?(notification payload: String) {
        guard let colon = payload.firstIndex(of: ":") else { return nil }
        let id = String(payload[payload.index(after: colon)...])
        switch payload[..<colon] {
        case "key": self = .key(id)
        case "app": self = .app(id)
        case "token": self = .token(id)
        default: return nil
        }
    }
}
