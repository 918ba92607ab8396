import Foundation

extension DeviceMessage {
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
