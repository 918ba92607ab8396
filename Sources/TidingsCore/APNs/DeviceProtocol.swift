import Crypto
import Foundation

/// The device channel's messages (docs/device-protocol.md): JSON objects with a `type`,
/// each framed by a 4-byte big-endian length, over TLS.
public enum DeviceMessage: Sendable, Hashable {
    /// Server → device, first: a fresh random nonce to sign.
    case challenge(nonce: [UInt8])
    /// Device → server: its P-256 public key (X9.63) and a signature of
    /// `DeviceChallenge.signedBytes(nonce)` (DER or raw).
    case hello(publicKey: [UInt8], signature: [UInt8])
    /// Server → device: the key was proven; pushes follow.
    case welcome(deviceID: String)
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
    /// Device → server: a later stage of a delivered push (`presented`, `answered`).
    case event(apnsID: String, event: String)
    /// Either way: keep-alive and its answer.
    case ping(Int64)
    case pong(Int64)
    /// Server → device: a request failed (`requestID` when it answers one), with an APNs-style reason.
    case error(requestID: Int64?, reason: String, message: String)
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

/// What the device signs to prove possession of its key.
public enum DeviceChallenge {
    public static let context = Array("tidings-device-challenge-v1\n".utf8)

    public static func signedBytes(nonce: [UInt8]) -> [UInt8] { context + nonce }

    /// The device id: lower-case hex SHA-256 of the public key's X9.63 bytes.
    public static func deviceID(publicKey: P256.Signing.PublicKey) -> String {
        DeviceToken(bytes: SHA256.hash(data: publicKey.x963Representation)).hex
    }

    public static func sign(nonce: [UInt8], with key: P256.Signing.PrivateKey) throws -> [UInt8] {
        Array(try key.signature(for: signedBytes(nonce: nonce)).derRepresentation)
    }

    /// Checks a hello against the nonce; returns the verified key.
    public static func verify(publicKey: [UInt8], signature: [UInt8], nonce: [UInt8]) -> P256.Signing.PublicKey? {
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey) else { return nil }
        let sig: P256.Signing.ECDSASignature?
        if signature.count == 64 {
            sig = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        } else {
            sig = try? P256.Signing.ECDSASignature(derRepresentation: signature)
        }
        guard let sig, key.isValidSignature(sig, for: signedBytes(nonce: nonce)) else { return nil }
        return key
    }
}

extension DeviceMessage {
    /// The JSON text of the message.
    public func encoded() -> [UInt8] {
        var o: [String: JSONValue] = [:]
        func b64(_ bytes: [UInt8]) -> JSONValue { .string(Data(bytes).base64EncodedString()) }
        switch self {
        case .challenge(let nonce): o = ["type": "challenge", "nonce": b64(nonce)]
        case .hello(let key, let sig): o = ["type": "hello", "publicKey": b64(key), "signature": b64(sig)]
        case .welcome(let id): o = ["type": "welcome", "deviceID": .string(id)]
        case .requestToken(let id, let topic, let env):
            o = ["type": "requestToken", "requestID": .integer(id), "topic": .string(topic), "environment": .string(env.rawValue)]
        case .token(let id, let token): o = ["type": "token", "requestID": .integer(id), "token": .string(token)]
        case .removeApp(let id, let topic): o = ["type": "removeApp", "requestID": .integer(id), "topic": .string(topic)]
        case .appRemoved(let id): o = ["type": "appRemoved", "requestID": .integer(id)]
        case .push(let p):
            o = ["type": "push", "sequence": .integer(p.sequence), "apnsID": .string(p.apnsID), "token": .string(p.token),
                 "topic": .string(p.topic), "pushType": .string(p.pushType.rawValue), "priority": .integer(Int64(p.priority.rawValue)),
                 "expiresAt": .integer(p.expiresAt), "acceptedAt": .integer(p.acceptedAt),
                 "payload": .string(String(decoding: p.payload, as: UTF8.self))]
            if let c = p.collapseID { o["collapseID"] = .string(c) }
        case .ack(let seq): o = ["type": "ack", "sequence": .integer(seq)]
        case .event(let id, let event): o = ["type": "event", "apnsID": .string(id), "event": .string(event)]
        case .ping(let n): o = ["type": "ping", "id": .integer(n)]
        case .pong(let n): o = ["type": "pong", "id": .integer(n)]
        case .error(let id, let reason, let message):
            o = ["type": "error", "reason": .string(reason), "message": .string(message)]
            if let id { o["requestID"] = .integer(id) }
        }
        return Array(JSONValue.object(o).jsonText.utf8)
    }

    /// Parses one message; anything malformed is a `DeviceProtocolError`.
    public init(decoding bytes: some Collection<UInt8>) throws(DeviceProtocolError) {
        guard case .object(let o)? = try? JSONValue(parsing: bytes), let type = o["type"]?.stringValue else {
            throw DeviceProtocolError("not a JSON object with a type")
        }
        func stringField(_ key: String) throws(DeviceProtocolError) -> String {
            guard let s = o[key]?.stringValue else { throw DeviceProtocolError("\(type): missing \(key)") }
            return s
        }
        func intField(_ key: String) throws(DeviceProtocolError) -> Int64 {
            guard case .integer(let i)? = o[key] else { throw DeviceProtocolError("\(type): missing \(key)") }
            return i
        }
        func base64Field(_ key: String) throws(DeviceProtocolError) -> [UInt8] {
            guard let d = Data(base64Encoded: try stringField(key)) else { throw DeviceProtocolError("\(type): \(key) is not base64") }
            return Array(d)
        }
        switch type {
        case "challenge": self = .challenge(nonce: try base64Field("nonce"))
        case "hello": self = .hello(publicKey: try base64Field("publicKey"), signature: try base64Field("signature"))
        case "welcome": self = .welcome(deviceID: try stringField("deviceID"))
        case "requestToken":
            guard let env = APNsEnvironment(name: try stringField("environment")) else { throw DeviceProtocolError("requestToken: unknown environment") }
            self = .requestToken(requestID: try intField("requestID"), topic: try stringField("topic"), environment: env)
        case "token": self = .token(requestID: try intField("requestID"), token: try stringField("token"))
        case "removeApp": self = .removeApp(requestID: try intField("requestID"), topic: try stringField("topic"))
        case "appRemoved": self = .appRemoved(requestID: try intField("requestID"))
        case "push":
            guard let pushType = PushType(rawValue: try stringField("pushType")),
                  let priority = Priority(rawValue: Int(try intField("priority"))) else { throw DeviceProtocolError("push: bad push type or priority") }
            self = .push(DevicePush(sequence: try intField("sequence"), apnsID: try stringField("apnsID"), token: try stringField("token"),
                                    topic: try stringField("topic"), pushType: pushType, priority: priority,
                                    collapseID: o["collapseID"]?.stringValue, expiresAt: try intField("expiresAt"),
                                    acceptedAt: try intField("acceptedAt"), payload: Array(try stringField("payload").utf8)))
        case "ack": self = .ack(sequence: try intField("sequence"))
        case "event": self = .event(apnsID: try stringField("apnsID"), event: try stringField("event"))
        case "ping": self = .ping(try intField("id"))
        case "pong": self = .pong(try intField("id"))
        case "error":
            let id: Int64? = if case .integer(let i)? = o["requestID"] { i } else { nil }
            self = .error(requestID: id, reason: try stringField("reason"), message: o["message"]?.stringValue ?? "")
        default: throw DeviceProtocolError("unknown message type \(type)")
        }
    }
}
