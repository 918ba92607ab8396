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
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    /// Appends one frame: the JSON's length as 4 bytes big-endian, then the JSON.
    public func appendFrame(to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: [0, 0, 0, 0])
        encode(into: &out)
        Self.patchLength(of: &out, from: start)
    }

    /// Appends one `push` frame straight from the values the gateway stores (push type and
    /// priority as the wire writes them, already validated when the provider's request was
    /// accepted): the same bytes as `.push(DevicePush(…)).appendFrame(to:)` for valid values,
    /// without typing them again only to write them back out.
    public static func appendPushFrame(sequence: Int64, apnsID: String, token: String, topic: Topic, pushType: PushType, priority: Priority,
                                       collapseID: CollapseID?, expiresAt: Int64, acceptedAt: Int64, payload: [UInt8], to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: [0, 0, 0, 0])
        var w = DeviceJSONWriter(out: out)
        out = []
        w.push(sequence: sequence, apnsID: apnsID, token: token, topic: topic.rawValue, pushType: pushType.rawValue,
               priority: Int64(priority.rawValue), collapseID: collapseID?.rawValue, expiresAt: expiresAt, acceptedAt: acceptedAt,
               payload: payload)
        out = w.out
        patchLength(of: &out, from: start)
    }

    private static func patchLength(of out: inout [UInt8], from start: Int) {
        let length = UInt32(truncatingIfNeeded: out.count - start - 4)
        out[start] = UInt8(truncatingIfNeeded: length >> 24)
        out[start + 1] = UInt8(truncatingIfNeeded: length >> 16)
        out[start + 2] = UInt8(truncatingIfNeeded: length >> 8)
        out[start + 3] = UInt8(truncatingIfNeeded: length)
    }

    /// Appends the JSON text. The messages of the delivery path (`push`, `ack`, `acks`, `event`,
    /// `eventRecorded`) are written byte by byte; the rest through `JSONValue` (`referenceEncoded`).
    public func encode(into out: inout [UInt8]) {
        var w = DeviceJSONWriter(out: out)
        out = []
        switch self {
        case .push(let p):
            w.push(sequence: p.sequence, apnsID: p.apnsID, token: p.token, topic: p.topic, pushType: p.pushType.rawValue,
                   priority: Int64(p.priority.rawValue), collapseID: p.collapseID, expiresAt: p.expiresAt, acceptedAt: p.acceptedAt,
                   payload: p.payload)
        case .ack(let sequence):
            w.raw("{\"type\":\"ack\",\"sequence\":"); w.integer(sequence); w.raw("}")
        case .acks(let sequences):
            w.raw("{\"type\":\"acks\",\"sequences\":[")
            for (i, s) in sequences.enumerated() {
                if i > 0 { w.raw(",") }
                w.integer(s)
            }
            w.raw("]}")
        case .event(let apnsID, let event, let requestID, let sequence, let occurredAt):
            // Keys sorted, as `referenceEncoded` writes them.
            w.raw("{\"apnsID\":"); w.string(apnsID)
            w.raw(",\"event\":"); w.string(event)
            if let occurredAt { w.raw(",\"occurredAt\":"); w.integer(occurredAt) }
            if let requestID { w.raw(",\"requestID\":"); w.integer(requestID) }
            if let sequence { w.raw(",\"sequence\":"); w.integer(sequence) }
            w.raw(",\"type\":\"event\"}")
        case .events(let requestID, let events):
            w.raw("{\"events\":[")
            for (i, e) in events.enumerated() {
                // Keys sorted, as `referenceEncoded` writes them.
                w.raw(i == 0 ? "{\"apnsID\":" : ",{\"apnsID\":"); w.string(e.apnsID)
                w.raw(",\"event\":"); w.string(e.event)
                if let occurredAt = e.occurredAt { w.raw(",\"occurredAt\":"); w.integer(occurredAt) }
                if let sequence = e.sequence { w.raw(",\"sequence\":"); w.integer(sequence) }
                w.raw("}")
            }
            w.raw("],\"requestID\":"); w.integer(requestID); w.raw(",\"type\":\"events\"}")
        case .eventRecorded(let requestID):
            w.raw("{\"requestID\":"); w.integer(requestID); w.raw(",\"type\":\"eventRecorded\"}")
        default:
            w.out.append(contentsOf: referenceEncoded())
        }
        out = w.out
    }

    /// The JSON text through a `JSONValue` object (keys sorted): the straightforward encoder
    /// that `encode(into:)` must agree with (tests and the fuzz target compare them).
    public func referenceEncoded() -> [UInt8] {
        var o: [String: JSONValue] = [:]
        func b64(_ bytes: [UInt8]) -> JSONValue { .string(Data(bytes).base64EncodedString()) }
        switch self {
        case .challenge(let nonce): o = ["type": "challenge", "nonce": b64(nonce)]
        case .hello(let key, let sig): o = ["type": "hello", "publicKey": b64(key), "signature": b64(sig)]
        case .welcome(let id, let batchedAcks, let recordsEvents, let batchedEvents):
            o = ["type": "welcome", "deviceID": .string(id)]
            if batchedAcks { o["acks"] = .bool(true) }
            if recordsEvents { o["events"] = .bool(true) }
            if batchedEvents { o["eventBatches"] = .bool(true) }
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
        case .acks(let seqs): o = ["type": "acks", "sequences": .array(seqs.map { .integer($0) })]
        case .event(let id, let event, let requestID, let sequence, let occurredAt):
            o = ["type": "event", "apnsID": .string(id), "event": .string(event)]
            if let requestID { o["requestID"] = .integer(requestID) }
            if let sequence { o["sequence"] = .integer(sequence) }
            if let occurredAt { o["occurredAt"] = .integer(occurredAt) }
        case .events(let id, let events):
            o = ["type": "events", "requestID": .integer(id), "events": .array(events.map { e in
                var item: [String: JSONValue] = ["apnsID": .string(e.apnsID), "event": .string(e.event)]
                if let sequence = e.sequence { item["sequence"] = .integer(sequence) }
                if let occurredAt = e.occurredAt { item["occurredAt"] = .integer(occurredAt) }
                return .object(item)
            })]
        case .eventRecorded(let id): o = ["type": "eventRecorded", "requestID": .integer(id)]
        case .ping(let n): o = ["type": "ping", "id": .integer(n)]
        case .pong(let n): o = ["type": "pong", "id": .integer(n)]
        case .error(let id, let reason, let message):
            o = ["type": "error", "reason": .string(reason), "message": .string(message)]
            if let id { o["requestID"] = .integer(id) }
        }
        return Array(JSONValue.object(o).jsonText.utf8)
    }

    /// Parses one message; anything malformed is a `DeviceProtocolError`. Walks the top-level
    /// object once and keeps only the members the protocol names (no dictionary of every
    /// member); accepts and rejects exactly what `referenceDecoded` does.
    public init(decoding bytes: some Collection<UInt8>) throws(DeviceProtocolError) {
        // Parsed where the bytes lie (a `ByteBuffer`'s view, an array): no copy of the frame.
        let parsed = bytes.withContiguousStorageIfAvailable { DeviceMessageFields(parsing: $0) }
            ?? Array(bytes).withUnsafeBufferPointer { DeviceMessageFields(parsing: $0) }
        guard let fields = parsed else {
            throw DeviceProtocolError("not a JSON object with a type")
        }
        try self.init(fields: fields)
    }

    /// The straightforward decoder: `JSONValue(parsing:)` into a dictionary, then the same
    /// field rules. Tests and the fuzz target check that `init(decoding:)` agrees with it.
    public static func referenceDecoded(_ bytes: some Collection<UInt8>) throws(DeviceProtocolError) -> DeviceMessage {
        guard case .object(let o)? = try? JSONValue(parsing: bytes) else {
            throw DeviceProtocolError("not a JSON object with a type")
        }
        var fields = DeviceMessageFields()
        for key in DeviceMessageFields.Key.allCases { fields[key] = o[key.name] }
        return try DeviceMessage(fields: fields)
    }

    private init(fields o: DeviceMessageFields) throws(DeviceProtocolError) {
        guard let type = o[.type]?.stringValue else { throw DeviceProtocolError("not a JSON object with a type") }
        func stringField(_ key: DeviceMessageFields.Key) throws(DeviceProtocolError) -> String {
            guard let s = o[key]?.stringValue else { throw DeviceProtocolError("\(type): missing \(key.name)") }
            return s
        }
        func intField(_ key: DeviceMessageFields.Key) throws(DeviceProtocolError) -> Int64 {
            guard case .integer(let i)? = o[key] else { throw DeviceProtocolError("\(type): missing \(key.name)") }
            return i
        }
        func base64Field(_ key: DeviceMessageFields.Key) throws(DeviceProtocolError) -> [UInt8] {
            guard let d = Data(base64Encoded: try stringField(key)) else { throw DeviceProtocolError("\(type): \(key.name) is not base64") }
            return Array(d)
        }
        switch type {  // `push` first: nearly every message is one
        case "push":
            func payloadField() throws(DeviceProtocolError) -> [UInt8] {
                if let bytes = o.payloadBytes { return bytes }
                return Array(try stringField(.payload).utf8)
            }
            guard let pushType = PushType(rawValue: try stringField(.pushType)),
                  let priorityValue = Int(exactly: try intField(.priority)),  // checked: `Int` may be 32 bits
                  let priority = Priority(rawValue: priorityValue) else { throw DeviceProtocolError("push: bad push type or priority") }
            self = .push(DevicePush(sequence: try intField(.sequence), apnsID: try stringField(.apnsID), token: try stringField(.token),
                                    topic: try stringField(.topic), pushType: pushType, priority: priority,
                                    collapseID: o[.collapseID]?.stringValue, expiresAt: try intField(.expiresAt),
                                    acceptedAt: try intField(.acceptedAt), payload: try payloadField()))
        case "challenge": self = .challenge(nonce: try base64Field(.nonce))
        case "hello": self = .hello(publicKey: try base64Field(.publicKey), signature: try base64Field(.signature))
        case "welcome":
            self = .welcome(deviceID: try stringField(.deviceID), batchedAcks: o[.acks] == .bool(true), recordsEvents: o[.events] == .bool(true),
                            batchedEvents: o[.eventBatches] == .bool(true))
        case "requestToken":
            guard let env = APNsEnvironment(name: try stringField(.environment)) else { throw DeviceProtocolError("requestToken: unknown environment") }
            self = .requestToken(requestID: try intField(.requestID), topic: try stringField(.topic), environment: env)
        case "token": self = .token(requestID: try intField(.requestID), token: try stringField(.token))
        case "removeApp": self = .removeApp(requestID: try intField(.requestID), topic: try stringField(.topic))
        case "appRemoved": self = .appRemoved(requestID: try intField(.requestID))
        case "ack": self = .ack(sequence: try intField(.sequence))
        case "acks":
            guard case .array(let items)? = o[.sequences] else { throw DeviceProtocolError("acks: missing sequences") }
            var sequences: [Int64] = []
            sequences.reserveCapacity(items.count)
            for item in items {
                guard case .integer(let s) = item else { throw DeviceProtocolError("acks: a sequence is not an integer") }
                sequences.append(s)
            }
            self = .acks(sequences: sequences)
        case "event":
            // `requestID` is optional (devices before acknowledged events send none); present, it must be an integer.
            let id: Int64?
            switch o[.requestID] {
            case nil, .null?: id = nil
            case .integer(let i)?: id = i
            default: throw DeviceProtocolError("event: requestID is not an integer")
            }
            // `sequence` likewise (devices before it send none).
            let sequence: Int64?
            switch o[.sequence] {
            case nil, .null?: sequence = nil
            case .integer(let i)?: sequence = i
            default: throw DeviceProtocolError("event: sequence is not an integer")
            }
            self = .event(apnsID: try stringField(.apnsID), event: try stringField(.event), requestID: id, sequence: sequence,
                          occurredAt: try Self.occurredAt(o[.occurredAt], in: "event"))
        case "events":
            guard case .array(let items)? = o[.events] else { throw DeviceProtocolError("events: missing events") }
            var events: [DeviceEventItem] = []
            events.reserveCapacity(items.count)
            for item in items {
                // Each as an `event` message's members: apnsID and event strings, sequence optional.
                guard case .object(let e) = item, let apnsID = e["apnsID"]?.stringValue, let event = e["event"]?.stringValue else {
                    throw DeviceProtocolError("events: an event without apnsID and event")
                }
                let sequence: Int64?
                switch e["sequence"] {
                case nil, .null?: sequence = nil
                case .integer(let i)?: sequence = i
                default: throw DeviceProtocolError("events: sequence is not an integer")
                }
                events.append(DeviceEventItem(apnsID: apnsID, event: event, sequence: sequence,
                                              occurredAt: try Self.occurredAt(e["occurredAt"], in: "events")))
            }
            self = .events(requestID: try intField(.requestID), events: events)
        case "eventRecorded": self = .eventRecorded(requestID: try intField(.requestID))
        case "ping": self = .ping(try intField(.id))
        case "pong": self = .pong(try intField(.id))
        case "error":
            let id: Int64? = if case .integer(let i)? = o[.requestID] { i } else { nil }
            self = .error(requestID: id, reason: try stringField(.reason), message: o[.message]?.stringValue ?? "")
        default: throw DeviceProtocolError("unknown message type \(type)")
        }
    }

    /// An event's `occurredAt`: absent (or null) is nil; an integer in
    /// `DeviceEventItem.occurredAtRange`; anything else is an error.
    private static func occurredAt(_ value: JSONValue?, in type: String) throws(DeviceProtocolError) -> Int64? {
        switch value {
        case nil, .null?: return nil
        case .integer(let t)? where DeviceEventItem.occurredAtRange.contains(t): return t
        default: throw DeviceProtocolError("\(type): occurredAt is not a time (milliseconds since 1970, to the end of 9999)")
        }
    }
}

/// The members of a device message that the protocol names, parsed from the top-level object
/// without keeping the others.
struct DeviceMessageFields {
    enum Key: Int, CaseIterable {
        case type, nonce, publicKey, signature, deviceID, acks, requestID, topic, environment, token
        case sequence, sequences, apnsID, pushType, priority, collapseID, expiresAt, acceptedAt, payload
        case event, id, reason, message, events, eventBatches, occurredAt

        /// The member name, as spelled on the wire.
        var name: String { Key.names[rawValue] }

        /// How many there are (`allCases.count` would build the array of cases each time).
        static let count = names.count

        static let names = ["type", "nonce", "publicKey", "signature", "deviceID", "acks", "requestID", "topic", "environment",
                            "token", "sequence", "sequences", "apnsID", "pushType", "priority", "collapseID", "expiresAt",
                            "acceptedAt", "payload", "event", "id", "reason", "message", "events", "eventBatches", "occurredAt"]
    }

    private var values = [JSONValue?](repeating: nil, count: Key.count)
    /// A `payload` that was a string, as its UTF-8 bytes (then `self[.payload]` is nil): the
    /// push's payload without a `String` in between.
    private(set) var payloadBytes: [UInt8]?

    init() {}

    subscript(key: Key) -> JSONValue? {
        get { values[key.rawValue] }
        set { values[key.rawValue] = newValue }
    }

    /// Parses a JSON text whose top level is an object, as `JSONValue(parsing:)` does (same
    /// grammar, depth limit, and last value for a repeated key); nil when it would throw or
    /// the top level is not an object.
    init?(parsing bytes: UnsafeBufferPointer<UInt8>) {
        var parser = Input(bytes: bytes)
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { parser.index = 3 }
        parser.skipWhitespace()
        guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "{") else {
            // Not an object: whatever it is, the message is rejected (after the same checks).
            return nil
        }
        do {
            if JSONValue.maximumDepth < 1 { return nil }  // as `JSONParser.enter()` for the object
            parser.index += 1
            parser.skipWhitespace()
            if parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "}") {
                parser.index += 1
            } else {
                members: while true {
                    parser.skipWhitespace()
                    guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "\"") else { return nil }
                    let key = try Self.parseKey(&parser)
                    parser.skipWhitespace()
                    guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: ":") else { return nil }
                    parser.index += 1
                    parser.skipWhitespace()
                    if key == Key.payload.rawValue, parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "\"") {
                        guard let payload = Self.parseStringBytes(&parser) else { return nil }
                        payloadBytes = payload
                        values[Key.payload.rawValue] = nil
                    } else {
                        let value = try Self.parseValue(&parser)
                        if let key {
                            values[key] = value
                            if key == Key.payload.rawValue { payloadBytes = nil }
                        }
                    }
                    parser.skipWhitespace()
                    guard parser.index < bytes.count else { return nil }
                    if bytes[parser.index] == UInt8(ascii: ",") { parser.index += 1; continue members }
                    if bytes[parser.index] == UInt8(ascii: "}") { parser.index += 1; break members }
                    return nil
                }
            }
            parser.skipWhitespace()
            guard parser.index == bytes.count else { return nil }
        } catch {
            return nil
        }
    }

    /// A member's value: strings and integers (all a push has) without the general parser's
    /// intermediate `String`s; anything else through it.
    private static func parseValue(_ parser: inout Input) throws(JSONParseError) -> JSONValue {
        let bytes = parser.bytes
        guard parser.index < bytes.count else { return try parser.general { (p: inout JSONParser) throws(JSONParseError) in try p.parseValue() } }
        let first = bytes[parser.index]
        if first == UInt8(ascii: "\"") {
            // A plain ASCII string (no escapes): a `String` straight from its bytes.
            if let plain = plainString(&parser) { return .string(String(decoding: plain, as: UTF8.self)) }
            return try parser.general { (p: inout JSONParser) throws(JSONParseError) in try p.parseValue() }
        }
        if first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) {
            // An integer of at most 18 digits (no overflow), not followed by a fraction or an
            // exponent: what `JSONParser.parseNumber` makes `.integer` of, without its `String`.
            var i = parser.index
            let negative = first == UInt8(ascii: "-")
            if negative { i += 1 }
            let digitsStart = i
            var magnitude: Int64 = 0
            while i < bytes.count, i - digitsStart < 19, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
                magnitude = magnitude &* 10 &+ Int64(bytes[i] &- UInt8(ascii: "0"))
                i += 1
            }
            let digits = i - digitsStart
            let plain = digits >= 1 && digits <= 18 && (digits == 1 || bytes[digitsStart] != UInt8(ascii: "0"))
                && (i == bytes.count || (bytes[i] != UInt8(ascii: ".") && bytes[i] != UInt8(ascii: "e") && bytes[i] != UInt8(ascii: "E")
                    && !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i])))
            if plain {
                parser.index = i
                return .integer(negative ? -magnitude : magnitude)
            }
        }
        return try parser.general { (p: inout JSONParser) throws(JSONParseError) in try p.parseValue() }
    }

    /// A JSON string's contents as UTF-8 bytes, rejected (nil) exactly where
    /// `JSONParser.parseString` throws: a control byte, a bad escape or surrogate, invalid UTF-8,
    /// no closing quote. The parser stands on the opening quote; after, past the closing one.
    fileprivate static func parseStringBytes(_ parser: inout Input) -> [UInt8]? {
        let input = parser.bytes
        return plainStringBytes.withUnsafeBufferPointer { plain -> [UInt8]? in
            let start = parser.index + 1
            // One pass, into room for the rest of the message: the contents are never longer
            // unescaped (`\uXXXX` is 6 bytes for at most 3, a surrogate pair 12 for 4).
            let end = input.count
            var closed = false
            var valid = true
            var nonASCII: UInt8 = 0
            var i = start
            let out = [UInt8](unsafeUninitializedCapacity: end - start) { out, count in
                var j = 0
                func hex4() -> UInt32? {
                    guard let value = JSONParser.hex4(input, at: i) else { return nil }
                    i += 4
                    return value
                }
                decoding: while i < end {
                    // A run of bytes copied as they are: one table test per byte.
                    var b = input[i]
                    while plain[Int(b)] != 0 {
                        nonASCII |= b
                        out[j] = b
                        i += 1
                        j += 1
                        guard i < end else { break decoding }
                        b = input[i]
                    }
                    if b != UInt8(ascii: "\\") {
                        if b == UInt8(ascii: "\"") { closed = true } else { valid = false }  // a control byte
                        break decoding
                    }
                    guard i + 1 < end else { valid = false; break decoding }
                    let escape = input[i + 1]
                    i += 2
                    let unescaped: UInt8
                    switch escape {
                    case UInt8(ascii: "\""): unescaped = 0x22
                    case UInt8(ascii: "\\"): unescaped = 0x5C
                    case UInt8(ascii: "/"): unescaped = 0x2F
                    case UInt8(ascii: "b"): unescaped = 0x08
                    case UInt8(ascii: "f"): unescaped = 0x0C
                    case UInt8(ascii: "n"): unescaped = 0x0A
                    case UInt8(ascii: "r"): unescaped = 0x0D
                    case UInt8(ascii: "t"): unescaped = 0x09
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { valid = false; break decoding }
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard i + 1 < end, input[i] == UInt8(ascii: "\\"), input[i + 1] == UInt8(ascii: "u") else { valid = false; break decoding }
                            i += 2
                            guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { valid = false; break decoding }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(scalar) {
                            valid = false
                            break decoding
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { valid = false; break decoding }
                        for unit in UTF8.encode(unicode)! {
                            out[j] = unit
                            j += 1
                        }
                        continue decoding
                    default:
                        valid = false
                        break decoding
                    }
                    out[j] = unescaped
                    j += 1
                }
                count = j
            }
            guard valid, closed else { return nil }
            // Raw non-ASCII bytes must be valid UTF-8 (escapes only ever produce valid text).
            if nonASCII >= 0x80, out.withUnsafeBufferPointer({ String(validating: $0, as: UTF8.self) }) == nil { return nil }
            parser.index = i + 1
            return out
        }
    }

    /// 1 for a byte that stands for itself inside a JSON string (not `"`, `\\`, or a control byte).
    private static let plainStringBytes: [UInt8] = (0..<256).map { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 ? 0 : 1 }

    /// The index of the member name `name` (its UTF-8 bytes) in `Key.names`, nil for any other:
    /// one switch on the length, then at most five byte comparisons (no array of names touched,
    /// so no reference counting per member).
    static func keyIndex(_ name: UnsafeBufferPointer<UInt8>) -> Int? {
        func equals(_ candidate: StaticString) -> Bool {
            candidate.utf8CodeUnitCount == name.count && memcmp(candidate.utf8Start, name.baseAddress!, name.count) == 0
        }
        let key: Key?
        switch name.count {
        case 2: key = equals("id") ? .id : nil
        case 4: key = equals("type") ? .type : equals("acks") ? .acks : nil
        case 5: key = equals("nonce") ? .nonce : equals("topic") ? .topic : equals("token") ? .token : equals("event") ? .event : nil
        case 6: key = equals("apnsID") ? .apnsID : equals("reason") ? .reason : equals("events") ? .events : nil
        case 7: key = equals("payload") ? .payload : equals("message") ? .message : nil
        case 8:
            key = equals("sequence") ? .sequence : equals("pushType") ? .pushType : equals("priority") ? .priority
                : equals("deviceID") ? .deviceID : nil
        case 9:
            key = equals("expiresAt") ? .expiresAt : equals("requestID") ? .requestID : equals("sequences") ? .sequences
                : equals("publicKey") ? .publicKey : equals("signature") ? .signature : nil
        case 10: key = equals("acceptedAt") ? .acceptedAt : equals("collapseID") ? .collapseID : equals("occurredAt") ? .occurredAt : nil
        case 11: key = equals("environment") ? .environment : nil
        case 12: key = equals("eventBatches") ? .eventBatches : nil
        default: key = nil
        }
        return key?.rawValue
    }

    /// The string starting at the parser's quote when it is plain ASCII (no escapes, no
    /// control bytes): its bytes, and the parser moved past its closing quote. Nil (the parser
    /// unmoved) for anything else, which the general parser then reads.
    private static func plainString(_ parser: inout Input) -> UnsafeBufferPointer<UInt8>? {
        let bytes = parser.bytes
        let start = parser.index + 1
        var end = start
        while end < bytes.count {
            let b = bytes[end]
            if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { break }
            end += 1
        }
        guard end < bytes.count, bytes[end] == UInt8(ascii: "\"") else { return nil }
        parser.index = end + 1
        return UnsafeBufferPointer(rebasing: bytes[start..<end])
    }

    /// The index of a member name the protocol knows, nil for any other. A plain ASCII name
    /// is matched on its bytes; one with escapes or non-ASCII is decoded first.
    private static func parseKey(_ parser: inout Input) throws(JSONParseError) -> Int? {
        if let plain = plainString(&parser) { return keyIndex(plain) }
        let name = try parser.general { (p: inout JSONParser) throws(JSONParseError) in try p.parseString() }
        return Key.names.firstIndex(of: name)
    }
}

/// The bytes `DeviceMessageFields` parses, where they lie, and its place in them. What its own
/// paths do not handle goes to `JSONParser`, over one copy made on first need.
private struct Input {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    private var copy: [UInt8]?

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// `body` on a `JSONParser` standing where this input does, inside the top-level object
    /// (depth 1); this input then stands where it stopped.
    mutating func general<T>(_ body: (inout JSONParser) throws(JSONParseError) -> T) throws(JSONParseError) -> T {
        if copy == nil { copy = Array(bytes) }
        var parser = JSONParser(bytes: copy!)
        parser.index = index
        parser.depth = 1
        let result = try body(&parser)
        index = parser.index
        return result
    }
}

/// Writes JSON text into a byte array: the delivery path's encoder.
struct DeviceJSONWriter {
    var out: [UInt8]

    /// A `push` message's JSON object.
    mutating func push(sequence: Int64, apnsID: String, token: String, topic: String, pushType: String, priority: Int64,
                       collapseID: String?, expiresAt: Int64, acceptedAt: Int64, payload: [UInt8]) {
        raw("{\"type\":\"push\",\"sequence\":"); integer(sequence)
        raw(",\"apnsID\":"); string(apnsID)
        raw(",\"token\":"); string(token)
        raw(",\"topic\":"); string(topic)
        raw(",\"pushType\":"); string(pushType)
        raw(",\"priority\":"); integer(priority)
        if let c = collapseID { raw(",\"collapseID\":"); string(c) }
        raw(",\"expiresAt\":"); integer(expiresAt)
        raw(",\"acceptedAt\":"); integer(acceptedAt)
        raw(",\"payload\":"); string(utf8: payload)
        raw("}")
    }

    mutating func raw(_ text: StaticString) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Decimal digits, written from the end of a 20-byte scratch buffer (no `String`).
    mutating func integer(_ value: Int64) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = value.magnitude
            var i = 20
            repeat {
                i -= 1
                digits[i] = UInt8(truncatingIfNeeded: magnitude % 10) &+ UInt8(ascii: "0")
                magnitude /= 10
            } while magnitude != 0
            if value < 0 { out.append(UInt8(ascii: "-")) }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[i..<20]))
        }
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { _ = escaped($0, knownValid: true) }
    }

    /// Bytes as a JSON string; invalid UTF-8 becomes U+FFFD, as `String(decoding:)` does.
    mutating func string(utf8 bytes: [UInt8]) {
        let written = bytes.withUnsafeBufferPointer { escaped($0, knownValid: false) }
        if !written { string(String(decoding: bytes, as: UTF8.self)) }
    }

    /// Per byte, its length inside a JSON string: 1 (as is: printable ASCII and every
    /// non-ASCII byte), 2 (`\"`, `\\`), 6 (`\u00XX` for the other control bytes).
    private static let escapedWidth: [UInt8] = (0..<256).map { b in
        b == 0x22 || b == 0x5C ? 2 : b < 0x20 ? 6 : 1
    }

    /// The bytes as a quoted JSON string. A first pass (no branches) sums the escaped length;
    /// nothing to escape (ids, tokens, topics) is one copy, else each byte is written into room
    /// made for exactly that (a payload full of quotes was many short appends). False, writing
    /// nothing, for non-ASCII bytes not `knownValid` as UTF-8.
    private mutating func escaped(_ bytes: UnsafeBufferPointer<UInt8>, knownValid: Bool) -> Bool {
        Self.escapedWidth.withUnsafeBufferPointer { width in
            var length = 2
            var all: UInt8 = 0
            for b in bytes {
                length &+= Int(width[Int(b)])
                all |= b
            }
            if all >= 0x80, !knownValid { return false }
            if length == bytes.count &+ 2 {
                out.append(UInt8(ascii: "\""))
                out.append(contentsOf: bytes)
                out.append(UInt8(ascii: "\""))
                return true
            }
            let start = out.count
            out.append(contentsOf: repeatElement(0, count: length))
            out.withUnsafeMutableBufferPointer { dst in
                let hex: StaticString = "0123456789abcdef"
                var j = start
                dst[j] = UInt8(ascii: "\"")
                j &+= 1
                for b in bytes {
                    switch width[Int(b)] {
                    case 2:
                        dst[j] = UInt8(ascii: "\\")
                        dst[j &+ 1] = b
                        j &+= 2
                    case 6:
                        dst[j] = UInt8(ascii: "\\")
                        dst[j &+ 1] = UInt8(ascii: "u")
                        dst[j &+ 2] = UInt8(ascii: "0")
                        dst[j &+ 3] = UInt8(ascii: "0")
                        dst[j &+ 4] = hex.utf8Start[Int(b >> 4)]
                        dst[j &+ 5] = hex.utf8Start[Int(b & 0xF)]
                        j &+= 6
                    default:
                        dst[j] = b
                        j &+= 1
                    }
                }
                dst[j] = UInt8(ascii: "\"")
            }
            return true
        }
    }
}
