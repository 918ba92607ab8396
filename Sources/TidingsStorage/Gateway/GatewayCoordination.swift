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
    /// their lease, and `reconnected` each time the wake-up channel was re-established (wake-ups
    /// may have been lost meanwhile: catch up every device). Until `stopListening()`.
    func startListening(wake: @escaping @Sendable ([String]) -> Void, reconnected: @escaping @Sendable () -> Void)
    func stopListening()
    /// Runs `body` if no other node runs maintenance now (nil otherwise).
    func exclusively<T>(_ body: () throws -> T) throws(GatewayStoreError) -> T?
}
