/// A failure reported by the gateway or the connection.
public struct DeviceClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An APNs-style reason string (`BadTopic`, `BadDeviceKey`, `ConnectionClosed`, …).
    public var reason: String
    public var message: String
    public init(reason: String, message: String) {
        self.reason = reason
        self.message = message
    }
    public var description: String { "\(reason): \(message)" }
    public static let closed = DeviceClientError(reason: "ConnectionClosed", message: "the device channel is closed")
}
