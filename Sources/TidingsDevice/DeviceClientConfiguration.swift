import Crypto
import NIOCore

/// How to reach a gateway's device channel and who this device is.
public struct DeviceClientConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// The device key: keep it (e.g. `pemRepresentation`) to be the same device next time.
    public var deviceKey: P256.Signing.PrivateKey
    /// Certificates to trust (PEM files); empty: the system's roots.
    public var trustRootPaths: [String] = []
    /// The name to check the certificate against; `nil` for an IP address host.
    public var serverHostname: String?
    /// How long the TLS handshake and key proof may take.
    public var connectTimeout: TimeAmount = .seconds(10)
    /// The local address to connect from (load tests spread connections over several
    /// 127.x addresses); `nil`: the system's choice.
    public var localAddress: String?
    /// Keep-alive: a `ping` this often once welcomed (the gateway closes a connection that says
    /// nothing for its `deviceIdleTimeout`, 180 s by default). A ping still unanswered, with
    /// nothing else heard, when the next is due closes the connection (`Timeout`): a gateway
    /// gone without a word is noticed within two intervals. `nil`: no pings.
    public var pingInterval: TimeAmount? = .seconds(60)
    /// The longest message accepted from the gateway; a longer one closes the connection
    /// instead of being buffered (a push is at most a few tens of kB).
    public var maximumFrameLength: Int = 1 << 20
    /// Pushes received and not yet taken by the consumer (`pushes`), at most, and their payload
    /// bytes: at either the connection stops reading (TCP then pushes back on the gateway) until
    /// the consumer takes. One read is appended whole, so it may pass the bound by one read.
    public var maximumBufferedPushes: Int = DeviceClientConfiguration.defaultMaximumBufferedPushes
    public var maximumBufferedPayloadBytes: Int = DeviceClientConfiguration.defaultMaximumBufferedPayloadBytes
    public static let defaultMaximumBufferedPushes = 4_096
    public static let defaultMaximumBufferedPayloadBytes = 8 << 20

    public init(host: String, port: Int, deviceKey: P256.Signing.PrivateKey, trustRootPaths: [String] = []) {
        self.host = host
        self.port = port
        self.deviceKey = deviceKey
        self.trustRootPaths = trustRootPaths
        self.serverHostname = host.first.map { $0.isNumber || host.contains(":") } == true ? nil : host
    }
}
