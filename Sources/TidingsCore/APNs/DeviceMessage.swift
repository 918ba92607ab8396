import Foundation

/// The device channel's messages (docs/device-protocol.md): JSON objects with a `type`,
/// each framed by a 4-byte big-endian length, over TLS.
public enum DeviceMessage: Sendable, Hashable {
    /// Server → device, first: a fresh random nonce to sign.
    case challenge(nonce: [UInt8])
    /// Device → server: its P-256 public key (X9.63) and a signature of
    /// `DeviceChallenge.signedBytes(nonce)` (DER or raw).
    case hello(publicKey: [UInt8], signature: [UInt8])
    /// Server → device: the key was proven; pushes follow. `batchedAcks`: the gateway accepts
    /// `acks` (several sequences in one message); `recordsEvents`: it answers an `event` that
    /// carries a `requestID` with `eventRecorded` once the event is durable; `batchedEvents`:
    /// it accepts `events` (several in one message). Old gateways say none.
    case welcome(deviceID: String, batchedAcks: Bool = false, recordsEvents: Bool = false, batchedEvents: Bool = false)
    /// Device → server: a token for an app topic (the bundle ID) in an environment.
    case requestToken(requestID: Int64, topic: String, environment: APNsEnvironment)
    /// Server → device: the device token for the request.
    case token(requestID: Int64, token: String)
    /// Device → server: the app was removed; its tokens die (410 `Unregistered`).
    case removeApp(requestID: Int64, topic: String)
    /// Server → device: done.
    case appRemoved(requestID: Int64)
    /// Server → device: a push.
    case push(DevicePush)
    /// Device → server: the push with this sequence number is safely received.
    case ack(sequence: Int64)
    /// Device → server: several pushes safely received, in one message (only to a gateway
    /// whose `welcome` said `"acks":true`; `ack` keeps working).
    case acks(sequences: [Int64])
    /// Device → server: a later stage of a delivered push (`presented`, `answered`). With a
    /// `requestID`, a gateway whose welcome said `"events":true` answers `eventRecorded`.
    /// `sequence`: the push's sequence number, as its `push` message carried it — the gateway
    /// finds the push by it (and checks the apns-id) instead of searching the device's pushes
    /// for the apns-id; devices before this send none. `occurredAt`: when the stage happened
    /// on the device (milliseconds since 1970, its clock; `DeviceEventItem.occurredAtRange`),
    /// which the gateway records within what is possible (docs/device-protocol.md); devices
    /// before it send none, and the gateway records when it learned of the event.
    case event(apnsID: String, event: String, requestID: Int64? = nil, sequence: Int64? = nil, occurredAt: Int64? = nil)
    /// Device → server: several `event`s in one message (only to a gateway whose `welcome` said
    /// `"eventBatches":true`), answered by one `eventRecorded` once all are durable.
    case events(requestID: Int64, events: [DeviceEventItem])
    /// Server → device: the `event` or `events` with this request id is durable (recording it
    /// again is harmless).
    case eventRecorded(requestID: Int64)
    /// Either way: keep-alive and its answer.
    case ping(Int64)
    case pong(Int64)
    /// Server → device: a request failed (`requestID` when it answers one), with an APNs-style reason.
    case error(requestID: Int64?, reason: String, message: String)
}

/// One event of an `events` message: as an `event` message's members.
public struct DeviceEventItem: Sendable, Hashable {
    public var apnsID: String
    public var event: String
    public var sequence: Int64?
    /// When the stage happened on the device: milliseconds since 1970, its clock.
    public var occurredAt: Int64?

    public init(apnsID: String, event: String, sequence: Int64? = nil, occurredAt: Int64? = nil) {
        self.apnsID = apnsID
        self.event = event
        self.sequence = sequence
        self.occurredAt = occurredAt
    }

    /// The times an `occurredAt` may have: 1970 to the end of 9999 (a number outside, or not
    /// an integer, is a protocol error: the time is checked here, where it is read).
    public static let occurredAtRange: ClosedRange<Int64> = 0...253_402_300_799_999

    /// `date` as an `occurredAt`: whole milliseconds since 1970, within `occurredAtRange` (a
    /// clock before 1970 or past 9999, or a date that is not finite, gives the nearest bound,
    /// so a device never sends a time the gateway refuses).
    public static func occurredAt(_ date: Date) -> Int64 {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.down)
        guard milliseconds.isFinite else { return milliseconds > 0 ? occurredAtRange.upperBound : occurredAtRange.lowerBound }
        return Int64(max(Double(occurredAtRange.lowerBound), min(milliseconds, Double(occurredAtRange.upperBound))))
    }
}

/// A push as the device receives it.
public struct DevicePush: Sendable, Hashable {
    /// Acknowledge with this; increasing per device.
    public var sequence: Int64
    public var apnsID: String
    public var token: String
    public var topic: String
    public var pushType: PushType
    public var priority: Priority
    public var collapseID: String?
    /// Milliseconds since 1970.
    public var expiresAt: Int64
    public var acceptedAt: Int64
    /// The provider's JSON body, byte for byte.
    public var payload: [UInt8]

    public init(sequence: Int64, apnsID: String, token: String, topic: String, pushType: PushType, priority: Priority,
                collapseID: String?, expiresAt: Int64, acceptedAt: Int64, payload: [UInt8]) {
        self.sequence = sequence
        self.apnsID = apnsID
        self.token = token
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.expiresAt = expiresAt
        self.acceptedAt = acceptedAt
        self.payload = payload
    }

    /// The parsed payload.
    public func parsedPayload() throws(APNsPayloadError) -> APNsPayload { try APNsPayload(json: payload) }
}

/// A device-channel protocol error.
public struct DeviceProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

