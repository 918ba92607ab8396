import Foundation
import Testing
import TidingsTesting
@testable import TidingsCore

/// The device channel's codec: the fast decoder and the hand-written encoder agree with the
/// reference (`JSONValue`) ones.
@Suite("Device protocol codec")
struct DeviceProtocolTests {
    static let push = DevicePush(sequence: 42, apnsID: "0B7E4E3C-6A3D-4C1F-9B1E-1C2D3E4F5A6B", token: String(repeating: "ab", count: 32),
                                 topic: "com.example.app.voip", pushType: .voip, priority: .immediate, collapseID: "c\"1\\",
                                 expiresAt: 1_795_348_800_000, acceptedAt: 1_795_348_700_000,
                                 payload: Array(#"{"aps":{"alert":"Hé \"quoted\" \\ back\nslash"},"n":1}"#.utf8))

    func decodedBoth(_ text: String) -> (Result<DeviceMessage, DeviceProtocolError>, Result<DeviceMessage, DeviceProtocolError>) {
        let bytes = Array(text.utf8)
        return (Result { () throws(DeviceProtocolError) in try DeviceMessage(decoding: bytes) },
                Result { () throws(DeviceProtocolError) in try DeviceMessage.referenceDecoded(bytes) })
    }

    @Test(arguments: [
        #"{"type":"ack","sequence":7}"#,
        #" {"sequence":7 , "type" : "ack", "extra":{"a":[1,2,{"b":null}]}} "#,
        "\u{FEFF}{\"type\":\"ack\",\"sequence\":7}",
        #"{"typ\u0065":"ack","sequence":7}"#,
        #"{"type":"ping","type":"ack","sequence":7}"#,
        #"{"type":"ack","sequence":7.0}"#,
        #"{"type":"ack","sequence":"7"}"#,
        #"{"type":"acks","sequences":[1,2,3]}"#,
        #"{"type":"acks","sequences":[1,"2"]}"#,
        #"{"type":"acks","sequences":[]}"#,
        #"{"type":"acks"}"#,
        #"{"type":"welcome","deviceID":"ab","acks":true}"#,
        #"{"type":"welcome","deviceID":"ab","acks":1}"#,
        #"{"type":"welcome","deviceID":"ab"}"#,
        #"{"type":"welcome","deviceID":"ab","events":true,"eventBatches":true}"#,
        #"{"type":"events","requestID":3,"events":[{"apnsID":"a","event":"presented","sequence":4},{"apnsID":"b","event":"answered"}]}"#,
        #"{"type":"events","requestID":3,"events":[]}"#,
        #"{"type":"events","requestID":3,"events":[{"apnsID":"a"}]}"#,
        #"{"type":"events","requestID":3,"events":[{"apnsID":"a","event":"presented","sequence":"4"}]}"#,
        #"{"type":"events","requestID":3,"events":[7]}"#,
        #"{"type":"events","requestID":3,"events":true}"#,
        #"{"type":"events","events":[]}"#,
        #"{"type":"events","requestID":3,"events":[{"apnsID":"a","event":"presented","occurredAt":1795348700123}]}"#,
        #"{"type":"events","requestID":3,"events":[{"apnsID":"a","event":"presented","occurredAt":-1}]}"#,
        #"{"type":"event","apnsID":"a","event":"presented","occurredAt":1795348700123}"#,
        #"{"type":"event","apnsID":"a","event":"presented","occurredAt":"1795348700123"}"#,
        #"{"type":"push","sequence":1,"apnsID":"x","token":"t","topic":"a.b","pushType":"alert","priority":10,"expiresAt":1,"acceptedAt":1,"payload":"{\"a\":\"\u00e9\ud83d\ude00\"}"}"#,
        #"{"type":"ack","sequence":7}x"#,
        #"{"type":"ack","sequence":7"#,
        #"{"type":"ack","sequence":7,}"#,
        #"{"type":"ack",sequence:7}"#,
        #"{"type":"ack","sequence":7,"bad":"\ud800"}"#,
        #"{"tÿpe":"ack","sequence":7}"#,
        #"[{"type":"ack","sequence":7}]"#,
        #""ack""#,
        "",
        #"{}"#,
        #"{"type":"nope"}"#,
        #"{"type":"ack","sequence":7,"deep":"# + String(repeating: "[", count: 200) + String(repeating: "]", count: 200) + "}",
    ])
    func fastDecoderAgreesWithTheReference(_ text: String) {
        let (fast, reference) = decodedBoth(text)
        #expect(fast == reference)
    }

    @Test func examplesDecodeAsExpected() throws {
        #expect(try DeviceMessage(decoding: Array(#"{"typ\u0065":"ack","sequence":7}"#.utf8)) == .ack(sequence: 7))
        #expect(try DeviceMessage(decoding: Array(#"{"type":"acks","sequences":[1,2,3]}"#.utf8)) == .acks(sequences: [1, 2, 3]))
        #expect(try DeviceMessage(decoding: Array(#"{"type":"welcome","deviceID":"ab"}"#.utf8)) == .welcome(deviceID: "ab", batchedAcks: false))
        #expect(try DeviceMessage(decoding: Array(#"{"type":"welcome","deviceID":"ab","acks":true}"#.utf8)) == .welcome(deviceID: "ab", batchedAcks: true))
        #expect(throws: DeviceProtocolError.self) { try DeviceMessage(decoding: Array(#"{"type":"acks","sequences":[1,2.5]}"#.utf8)) }
    }

    @Test func handWrittenEncoderRoundTripsAndMatchesTheReference() throws {
        var invalidUTF8 = Self.push
        invalidUTF8.payload = [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xFF, 0xC3, 0x22, 0x7D]
        var controls = Self.push
        controls.payload = Array("{\"a\":\"\u{01}\u{1F}\t\"}".utf8)
        controls.collapseID = nil
        let messages: [DeviceMessage] = [
            .push(Self.push), .push(invalidUTF8), .push(controls), .ack(sequence: -3), .ack(sequence: .max),
            .acks(sequences: []), .acks(sequences: [1, 2, .min]), .welcome(deviceID: "ab", batchedAcks: true),
            .welcome(deviceID: "ab", batchedAcks: false), .error(requestID: nil, reason: "ProtocolError", message: "m"),
            .event(apnsID: "a\"b", event: "presented"), .event(apnsID: "x", event: "answered", requestID: .min),
            .event(apnsID: "x", event: "presented", requestID: 7, sequence: .max), .event(apnsID: "x", event: "presented", sequence: -1),
            .eventRecorded(requestID: 0), .eventRecorded(requestID: .max),
            .welcome(deviceID: "ab", batchedAcks: true, recordsEvents: true, batchedEvents: true),
            .events(requestID: 1, events: []), .events(requestID: .max, events: [DeviceEventItem(apnsID: "a\"b", event: "presented", sequence: .min)]),
            .events(requestID: -1, events: [DeviceEventItem(apnsID: "x", event: "presented", sequence: 7), DeviceEventItem(apnsID: "y", event: "answered")]),
            .event(apnsID: "x", event: "presented", requestID: 7, sequence: 9, occurredAt: 1_795_348_700_123),
            .event(apnsID: "x", event: "answered", occurredAt: 0),
            .events(requestID: 2, events: [DeviceEventItem(apnsID: "x", event: "presented", sequence: 7, occurredAt: DeviceEventItem.occurredAtRange.upperBound),
                                           DeviceEventItem(apnsID: "y", event: "answered", occurredAt: 5)]),
        ]
        for message in messages {
            let fast = try DeviceMessage(decoding: message.encoded())
            let reference = try DeviceMessage.referenceDecoded(message.referenceEncoded())
            #expect(fast == reference, "\(message)")
            if case .push(let p) = message, p.payload != invalidUTF8.payload { #expect(fast == message) }
            switch message {
            case .event, .eventRecorded, .events:
                // Written by hand now: the same bytes as the reference, and the same message back.
                #expect(message.encoded() == message.referenceEncoded(), "\(message)")
                #expect(fast == message)
            default: break
            }
        }
        // Invalid UTF-8 in a payload becomes U+FFFD, as the reference encoder does.
        guard case .push(let decoded) = try DeviceMessage(decoding: DeviceMessage.push(invalidUTF8).encoded()) else {
            Issue.record("not a push"); return
        }
        #expect(decoded.payload == Array(String(decoding: invalidUTF8.payload, as: UTF8.self).utf8))
    }

    /// `events`: an array of `event` members, each with apnsID and event strings and an
    /// optional integer sequence; anything else in it refuses the whole message.
    @Test func eventsCarrySeveralEventsAndRefuseABadOne() throws {
        #expect(try DeviceMessage(decoding: Array(#"{"type":"events","requestID":3,"events":[{"apnsID":"a","event":"presented","sequence":4},{"event":"answered","apnsID":"b"}]}"#.utf8))
            == .events(requestID: 3, events: [DeviceEventItem(apnsID: "a", event: "presented", sequence: 4), DeviceEventItem(apnsID: "b", event: "answered")]))
        #expect(try DeviceMessage(decoding: Array(#"{"type":"welcome","deviceID":"ab","events":true,"eventBatches":true}"#.utf8))
            == .welcome(deviceID: "ab", recordsEvents: true, batchedEvents: true))
        for bad in [#"{"type":"events","requestID":3,"events":[{"apnsID":"a"}]}"#, #"{"type":"events","requestID":3,"events":[7]}"#,
                    #"{"type":"events","requestID":3,"events":[{"apnsID":"a","event":"presented","sequence":1.5}]}"#,
                    #"{"type":"events","events":[]}"#, #"{"type":"events","requestID":3}"#] {
            #expect(throws: DeviceProtocolError.self, "\(bad)") { try DeviceMessage(decoding: Array(bad.utf8)) }
        }
    }

    /// An event's `sequence` is optional (devices before it send none); present, an integer.
    @Test func anEventsSequenceIsOptionalAndAnInteger() throws {
        #expect(try DeviceMessage(decoding: Array(#"{"type":"event","apnsID":"a","event":"presented","sequence":12}"#.utf8))
            == .event(apnsID: "a", event: "presented", sequence: 12))
        #expect(try DeviceMessage(decoding: Array(#"{"type":"event","apnsID":"a","event":"presented","sequence":null}"#.utf8))
            == .event(apnsID: "a", event: "presented"))
        for bad in [#""12""#, "1.5", "true", "[1]"] {
            #expect(throws: DeviceProtocolError.self) {
                try DeviceMessage(decoding: Array(#"{"type":"event","apnsID":"a","event":"presented","sequence":\#(bad)}"#.utf8))
            }
        }
    }

    /// An event's `occurredAt` (when it happened on the device, milliseconds since 1970) is
    /// optional; present, an integer from 1970 to the end of 9999 — at the bounds it is read,
    /// one past them (or anything but an integer) refuses the message, `event` and `events` alike.
    @Test func anEventsTimeIsOptionalAndBounded() throws {
        let range = DeviceEventItem.occurredAtRange
        for time in [range.lowerBound, 1_795_348_700_123, range.upperBound] {
            #expect(try DeviceMessage(decoding: Array(#"{"type":"event","apnsID":"a","event":"presented","occurredAt":\#(time)}"#.utf8))
                == .event(apnsID: "a", event: "presented", occurredAt: time))
            #expect(try DeviceMessage(decoding: Array(#"{"type":"events","requestID":1,"events":[{"apnsID":"a","event":"presented","occurredAt":\#(time)}]}"#.utf8))
                == .events(requestID: 1, events: [DeviceEventItem(apnsID: "a", event: "presented", occurredAt: time)]))
        }
        #expect(try DeviceMessage(decoding: Array(#"{"type":"event","apnsID":"a","event":"presented","occurredAt":null}"#.utf8))
            == .event(apnsID: "a", event: "presented"))
        // What a device sends is always inside: its clock's time in whole milliseconds, else the nearest bound.
        #expect(DeviceEventItem.occurredAt(Date(timeIntervalSince1970: 1_795_348_700.1239)) == 1_795_348_700_123)
        #expect(DeviceEventItem.occurredAt(Date(timeIntervalSince1970: -0.5)) == range.lowerBound)
        #expect(DeviceEventItem.occurredAt(Date(timeIntervalSince1970: 253_402_300_800)) == range.upperBound)
        #expect(DeviceEventItem.occurredAt(Date(timeIntervalSince1970: 1e300)) == range.upperBound)
        #expect(DeviceEventItem.occurredAt(Date(timeIntervalSince1970: .infinity)) == range.upperBound)
        #expect(DeviceEventItem.occurredAt(Date(timeIntervalSince1970: -.infinity)) == range.lowerBound)
        #expect(DeviceEventItem.occurredAt(Date(timeIntervalSince1970: .nan)) == range.lowerBound)
        for bad in ["\(range.lowerBound - 1)", "\(range.upperBound + 1)", "\(Int64.max)", #""1795348700123""#, "1.5", "1e3", "true", "{}"] {
            for text in [#"{"type":"event","apnsID":"a","event":"presented","occurredAt":\#(bad)}"#,
                         #"{"type":"events","requestID":1,"events":[{"apnsID":"a","event":"presented","occurredAt":\#(bad)}]}"#] {
                #expect(throws: DeviceProtocolError.self, "\(text)") { try DeviceMessage(decoding: Array(text.utf8)) }
                #expect(throws: DeviceProtocolError.self, "\(text)") { try DeviceMessage.referenceDecoded(Array(text.utf8)) }
            }
        }
    }

    @Test func framesCarryTheirLength() throws {
        var frames: [UInt8] = []
        DeviceMessage.ack(sequence: 1).appendFrame(to: &frames)
        DeviceMessage.push(Self.push).appendFrame(to: &frames)
        var rest = frames[...]
        var decoded: [DeviceMessage] = []
        while !rest.isEmpty {
            let length = rest.prefix(4).reduce(0) { $0 << 8 | Int($1) }
            let body = rest.dropFirst(4).prefix(length)
            #expect(body.count == length)
            decoded.append(try DeviceMessage(decoding: body))
            rest = rest.dropFirst(4 + length)
        }
        #expect(decoded == [.ack(sequence: 1), .push(Self.push)])
    }
    /// The gateway writes push frames from its stored values (`appendPushFrame`): the same
    /// bytes as the typed message's frame, with and without a collapse id.
    @Test func aPushFrameFromStoredValuesIsTheTypedMessagesFrame() throws {
        for collapse in [nil, "chat \"1\""] as [String?] {
            var push = Self.push
            push.collapseID = collapse
            var typed: [UInt8] = [9]
            DeviceMessage.push(push).appendFrame(to: &typed)
            var stored: [UInt8] = [9]
            DeviceMessage.appendPushFrame(sequence: push.sequence, apnsID: push.apnsID, token: push.token, topic: try #require(Topic(rawValue: push.topic)),
                                          pushType: push.pushType, priority: push.priority, collapseID: push.collapseID.flatMap(CollapseID.init(rawValue:)),
                                          expiresAt: push.expiresAt, acceptedAt: push.acceptedAt, payload: push.payload, to: &stored)
            #expect(stored == typed)
            #expect(try DeviceMessage(decoding: stored.dropFirst(5)) == .push(push))
        }
    }

    /// A push whose payload is `bytes`, through the fast encoder and decoder: the same push
    /// as through the reference ones.
    func roundTrip(payload bytes: [UInt8]) throws -> (fast: DeviceMessage, reference: DeviceMessage) {
        var push = Self.push
        push.payload = bytes
        let message = DeviceMessage.push(push)
        return (try DeviceMessage(decoding: message.encoded()), try DeviceMessage.referenceDecoded(message.referenceEncoded()))
    }

    @Test func everyByteAndEscapeClassRoundTrips() throws {
        // Every ASCII byte (control bytes, quote, backslash, DEL), then non-ASCII UTF-8 of each length.
        let ascii = (0..<128).map { UInt8($0) }
        let nonASCII = Array("é — 日本語 😀 \u{10FFFF}".utf8)
        for payload in [ascii, nonASCII, ascii + nonASCII + ascii, [], [0x22], [0x5C], [0x00], Array(repeating: 0x22, count: 1000)] {
            let (fast, reference) = try roundTrip(payload: payload)
            #expect(fast == reference)
            guard case .push(let p) = fast else { Issue.record("not a push"); continue }
            #expect(p.payload == payload)
        }
        // The encoder's exact text: short escapes for quote and backslash, \u00XX for the other
        // control bytes, everything else (solidus, DEL, non-ASCII) as is.
        var writer = DeviceJSONWriterProbe()
        #expect(writer.escaped(Array("a\"b\\c/\u{01}\n\u{1F}\u{7F}é".utf8)) == #""a\"b\\c/\u0001\u000a\u001f\#u{7F}é""#)
    }

    @Test func invalidUTF8InAPayloadBecomesReplacementCharacters() throws {
        for payload: [UInt8] in [[0xFF], [0x61, 0xC3], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x22, 0xC3, 0x28, 0x5C]] {
            let (fast, reference) = try roundTrip(payload: payload)
            #expect(fast == reference)
            guard case .push(let p) = fast else { Issue.record("not a push"); continue }
            #expect(p.payload == Array(String(decoding: payload, as: UTF8.self).utf8))
        }
    }

    /// The decoder's own paths (payload straight to bytes, plain strings and integers without
    /// the general parser) accept and reject exactly what the reference does.
    @Test(arguments: [
        #"\"\\\/\b\f\n\r\t"#, #"\u0041\u00e9\u00E9\u20AC\uD83D\uDE00\u0000"#, "plain", "", "é😀",
        #"\x"#, #"\u12"#, #"\u12G4"#, #"\ud800"#, #"\udc00"#, #"\ud800\u0041"#, #"\ud800x"#, #"\"#, "\u{01}", "tab\u{09}raw",
    ])
    func payloadStringsDecodeAsTheReferenceDoes(_ contents: String) {
        let text = #"{"type":"push","sequence":1,"apnsID":"x","token":"t","topic":"a.b","pushType":"alert","priority":10,"expiresAt":1,"acceptedAt":1,"payload":""#
            + contents + #""}"#
        let (fast, reference) = decodedBoth(text)
        #expect(fast == reference)
    }

    @Test func rawBytesInPayloadStringsDecodeAsTheReferenceDoes() {
        let head = Array(#"{"type":"push","sequence":1,"apnsID":"x","token":"t","topic":"a.b","pushType":"alert","priority":10,"expiresAt":1,"acceptedAt":1,"payload":""#.utf8)
        for contents: [UInt8] in [[0xFF], [0xC3], [0xC3, 0xA9], [0xED, 0xA0, 0x80], [0xE2, 0x82], [0x7F], [0x1F], [0x5C, 0xC3, 0xA9]] {
            let bytes = head + contents + Array(#""}"#.utf8)
            let fast = Result { () throws(DeviceProtocolError) in try DeviceMessage(decoding: bytes) }
            let reference = Result { () throws(DeviceProtocolError) in try DeviceMessage.referenceDecoded(bytes) }
            #expect(fast == reference, "\(contents)")
        }
    }

    @Test(arguments: [
        "0", "-0", "7", "-7", "01", "-01", "123456789012345678", "-123456789012345678", "1234567890123456789",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1.0", "1e3", "1E3",
        "2.5", "-", "-a", "00", "1x", "\"1\"", "true", "null", "[1]", "99999999999999999999999",
    ])
    func integersDecodeAsTheReferenceDoes(_ number: String) {
        for text in [#"{"type":"ack","sequence":"# + number + "}", #"{"type":"ack","sequence":"# + number + #" ,"x":1}"#,
                     #"{"sequence":"# + number + #","type":"ack"}"#, #"{"type":"acks","sequences":["# + number + "]}"] {
            let (fast, reference) = decodedBoth(text)
            #expect(fast == reference, "\(text)")
        }
    }

    @Test func aRepeatedPayloadKeepsTheLastValue() {
        let head = #"{"type":"push","sequence":1,"apnsID":"x","token":"t","topic":"a.b","pushType":"alert","priority":10,"expiresAt":1,"acceptedAt":1,"#
        for tail in [#""payload":"a","payload":"b"}"#, #""payload":"a","payload":1}"#, #""payload":1,"payload":"b"}"#, #""payload":"\u00e9","payload":"\ud800"}"#] {
            let (fast, reference) = decodedBoth(head + tail)
            #expect(fast == reference, "\(tail)")
        }
    }

    /// Random payloads (a fixed seed): bytes drawn mostly from the escape classes.
    @Test func randomPayloadsRoundTrip() throws {
        var random = SplitMix64(seed: 0x5EED)
        let alphabet: [UInt8] = [0x00, 0x01, 0x08, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x22, 0x2F, 0x5C, 0x61, 0x7B, 0x7D, 0x7F, 0x80, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xFF]
        for _ in 0..<500 {
            let count = Int(random.next() % 64)
            let payload = (0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
            let (fast, reference) = try roundTrip(payload: payload)
            #expect(fast == reference, "\(payload)")
        }
    }
}

/// The delivery path's string writer, seen from the tests.
struct DeviceJSONWriterProbe {
    mutating func escaped(_ bytes: [UInt8]) -> String {
        var push = DeviceProtocolTests.push
        push.payload = bytes
        let text = DeviceMessage.push(push).encoded()
        let marker = Array(#","payload":"#.utf8)
        let start = text.indices.first { text[$0...].starts(with: marker) }! + marker.count
        return String(decoding: text[start..<(text.count - 1)], as: UTF8.self)
    }
}


/// The decoder's member-name switch knows every name in `Key.names`, each as its own key, and
/// nothing else of those lengths.
@Suite("Device protocol member names")
struct DeviceProtocolKeyTests {
    @Test func everyMemberNameMapsToItsKey() {
        for (index, name) in DeviceMessageFields.Key.names.enumerated() {
            let bytes = Array(name.utf8)
            #expect(bytes.withUnsafeBufferPointer { DeviceMessageFields.keyIndex($0) } == index, "\(name)")
            var changed = bytes
            changed[changed.count - 1] ^= 0x20
            #expect(changed.withUnsafeBufferPointer { DeviceMessageFields.keyIndex($0) } == nil, "\(name) changed")
        }
        #expect([UInt8]().withUnsafeBufferPointer { DeviceMessageFields.keyIndex($0) } == nil)
        #expect(DeviceMessageFields.Key.count == DeviceMessageFields.Key.allCases.count)
    }
}
