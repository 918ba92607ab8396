import Foundation

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
