import Testing
@testable import TidingsCore

@Suite("APNs vocabulary")
struct APNsVocabularyTests {
    @Test func deviceTokenAcceptsVariableLengthHexAndLowercases() throws {
        let token = try DeviceToken(hex: "00FC13ADff785122b4ad28809a3420982341241421348097878e577c991de8f0")
        #expect(token.hex == "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0")
        #expect(try DeviceToken(hex: String(repeating: "ab", count: 80)).bytes.count == 80)
        #expect(DeviceToken(bytes: token.bytes) == token)
        #expect(token.redacted == "00fc13ad…")
    }

    @Test func deviceTokenErrors() {
        #expect(throws: APNsError(.missingDeviceToken)) { try DeviceToken(hex: "") }
        #expect(throws: APNsError(.badDeviceToken)) { try DeviceToken(hex: "abc") }
        #expect(throws: APNsError(.badDeviceToken)) { try DeviceToken(hex: "zz") }
        #expect(throws: APNsError(.badDeviceToken)) { try DeviceToken(hex: String(repeating: "a", count: 514)) }
    }

    @Test func randomTokensAreDistinct32Bytes() {
        let a = DeviceToken.random(), b = DeviceToken.random()
        #expect(a != b)
        #expect(a.hex.count == 64)
    }

    @Test func allElevenPushTypesAndSuffixes() throws {
        #expect(PushType.all.count == 11)
        let expected: [String: String] = [
            "alert": "", "background": "", "complication": ".complication", "controls": ".push-type.controls",
            "fileprovider": ".pushkit.fileprovider", "liveactivity": ".push-type.liveactivity",
            "location": ".location-query", "mdm": "", "pushtotalk": ".voip-ptt", "voip": ".voip",
            "widgets": ".push-type.widgets",
        ]
        for (name, suffix) in expected {
            let type = try #require(PushType(rawValue: name))
            #expect(type.topicSuffix == suffix)
        }
        #expect(PushType(rawValue: "Alert") == nil)
        #expect(PushType.voip.maximumPayloadSize == 5120)
        #expect(PushType.alert.maximumPayloadSize == 4096)
        #expect(PushType.inferred(fromTopic: "com.a.voip") == .voip)
        #expect(PushType.inferred(fromTopic: "com.a.voip-ptt") == .pushtotalk)
        #expect(PushType.inferred(fromTopic: "com.a") == .alert)
    }

    @Test func topicBundleIDForPushType() throws {
        let topic = try Topic(header: "com.example.app.push-type.liveactivity")
        #expect(try topic.bundleID(for: .liveactivity) == "com.example.app")
        #expect(throws: APNsError(.topicDisallowed)) { try Topic(header: "com.example.app").bundleID(for: .voip) }
        #expect(throws: APNsError(.badTopic)) { try Topic(header: "com example") }
        #expect(throws: APNsError(.badTopic)) { try Topic(header: "") }
    }

    @Test func priorityExpirationCollapseID() throws {
        #expect(try Priority(header: "10") == .immediate)
        #expect(try Priority(header: "5") == .considerPower)
        #expect(try Priority(header: "1") == .doNotAwaken)
        #expect(throws: APNsError(.badPriority)) { try Priority(header: "7") }
        #expect(throws: APNsError(.badPriority)) { try Priority(header: "high") }
        #expect(try Expiration(header: "0").isImmediate)
        #expect(try Expiration(header: "1700000000").epochSeconds == 1_700_000_000)
        #expect(throws: APNsError(.badExpirationDate)) { try Expiration(header: "tomorrow") }
        #expect(throws: APNsError(.badExpirationDate)) { try Expiration(header: "1.5") }
        #expect(try CollapseID(header: String(repeating: "x", count: 64)).rawValue.count == 64)
        #expect(throws: APNsError(.badCollapseId)) { try CollapseID(header: String(repeating: "x", count: 65)) }
        // 64 bytes is the limit, not 64 characters.
        #expect(throws: APNsError(.badCollapseId)) { try CollapseID(header: String(repeating: "é", count: 33)) }
    }

    @Test func apnsIDKeepsExactBytesAndGeneratesLowercase() throws {
        let upper = try APNsID(header: "EABEAE54-14A8-11E5-B60B-1697F925EC7B")
        #expect(upper.rawValue == "EABEAE54-14A8-11E5-B60B-1697F925EC7B")
        #expect(throws: APNsError(.badMessageId)) { try APNsID(header: "not-a-uuid") }
        #expect(throws: APNsError(.badMessageId)) { try APNsID(header: "eabeae5414a811e5b60b1697f925ec7b") }
        let generated = APNsID.generate().rawValue
        #expect(generated == generated.lowercased())
        #expect(try APNsID(header: generated).rawValue == generated)
        // Version 4, RFC 4122 variant, and all sixteen bytes random (no repeats in 1,000).
        let many = (0..<1_000).map { _ in Array(APNsID.generate().rawValue.utf8) }
        #expect(many.allSatisfy { $0[14] == UInt8(ascii: "4") && Array("89ab".utf8).contains($0[19]) })
        #expect(Set(many.map { String(decoding: $0, as: UTF8.self) }).count == 1_000)
        #expect(Set(many.map { String(decoding: $0[0..<8], as: UTF8.self) }).count > 990)
        #expect(Set(many.map { String(decoding: $0[24..<36], as: UTF8.self) }).count > 990)
    }

    @Test func reasonsHaveStatusesAndUnknownFallsBack() {
        #expect(APNsReason.allKnown.count >= 32)
        #expect(APNsReason(rawValue: "Unregistered").status == 410)
        #expect(APNsReason(rawValue: "TooManyRequests").status == 429)
        #expect(APNsReason(rawValue: "Shutdown").status == 503)
        let unknown = APNsReason(rawValue: "SomethingNew")
        #expect(!unknown.isKnown)
        #expect(unknown.status == 400)
        #expect(unknown.rawValue == "SomethingNew")
    }

    @Test func errorBodies() {
        #expect(APNsError(.badDeviceToken).jsonBody == #"{"reason":"BadDeviceToken"}"#)
        #expect(APNsError(.unregistered, timestamp: 1_700_000_000_123).jsonBody == #"{"reason":"Unregistered","timestamp":1700000000123}"#)
    }
}
