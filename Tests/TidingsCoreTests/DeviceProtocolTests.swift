import Foundation
import Testing
import TidingsCore

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
        ]
        for message in messages {
            let fast = try DeviceMessage(decoding: message.encoded())
            let reference = try DeviceMessage.referenceDecoded(message.referenceEncoded())
            #expect(fast == reference, "\(message)")
            if case .push(let p) = message, p.payload != invalidUTF8.payload { #expect(fast == message) }
        }
        // Invalid UTF-8 in a payload becomes U+FFFD, as the reference encoder does.
        guard case .push(let decoded) = try DeviceMessage(decoding: DeviceMessage.push(invalidUTF8).encoded()) else {
            Issue.record("not a push"); return
        }
        #expect(decoded.payload == Array(String(decoding: invalidUTF8.payload, as: UTF8.self).utf8))
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
}
