import Foundation
import TidingsCore

/// One address of a gateway's device channel (`HOST:PORT`).
public struct GatewayAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `HOST:PORT` (`[::1]:2196` for IPv6); nil for anything else.
    public init?(_ text: some StringProtocol) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, !host.contains(",") else { return nil }
        self.init(host: host, port: port)
    }

    /// `A,B,…`: one or more addresses, none empty; nil for anything else.
    static func list(_ text: String) -> [GatewayAddress]? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        let addresses = parts.compactMap { GatewayAddress($0.trimmingCharacters(in: .whitespaces)) }
        guard !addresses.isEmpty, addresses.count == parts.count else { return nil }
        return addresses
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Which gateway address the link tries next and how long it waits first (several gateway
/// nodes, docs/scaling.md "Failover"). The addresses are tried in turn, starting with the
/// first: when a connection ends or an attempt fails, the next address, after the backoff.
/// The backoff starts at `initialBackoff` once a connection was welcomed and doubles with
/// every attempt after that up to `maximumBackoff`, so a device whose gateways are all down
/// tries each in turn at most every `maximumBackoff`.
struct GatewayFailover: Sendable {
    let addresses: [GatewayAddress]
    let initialBackoff: Duration
    let maximumBackoff: Duration
    /// The address being tried or connected to.
    private(set) var index = 0
    private var backoff: Duration

    init(addresses: [GatewayAddress], initialBackoff: Duration, maximumBackoff: Duration) {
        precondition(!addresses.isEmpty, "a gateway link needs an address")
        self.addresses = addresses
        self.initialBackoff = initialBackoff
        self.maximumBackoff = max(maximumBackoff, initialBackoff)
        self.backoff = initialBackoff
    }

    var current: GatewayAddress { addresses[index] }

    /// The gateway at `current` welcomed the device.
    mutating func connected() {
        backoff = initialBackoff
    }

    /// The connection to `current` ended, or the attempt failed: how long to wait before
    /// trying the next address (then `current`).
    mutating func failed() -> Duration {
        let delay = backoff
        backoff = min(backoff * 2, maximumBackoff)
        index = (index + 1) % addresses.count
        return delay
    }
}
