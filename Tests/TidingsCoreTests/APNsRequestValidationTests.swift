import Testing
@testable import TidingsCore

@Suite("APNs request validation")
struct APNsRequestValidationTests {
    let token = String(repeating: "ab", count: 32)

    func headers(_ overrides: [(String, String?)] = [], extra: [(String, String)] = []) -> [(name: String, value: String)] {
        var base: [(String, String?)] = [
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(token)"),
            ("apns-topic", "com.example.app"), ("apns-push-type", "alert"),
        ]
        for (name, value) in overrides {
            if let i = base.firstIndex(where: { $0.0 == name }) { base[i].1 = value } else { base.append((name, value)) }
        }
        return base.compactMap { n, v in v.map { (name: n, value: $0) } } + extra.map { (name: $0.0, value: $0.1) }
    }

    func reason(_ h: [(name: String, value: String)]) -> APNsReason? {
        if case .failure(let e) = ProviderRequestValidator.validate(headers: h) { return e.error.reason }
        return nil
    }

    @Test func validHeadDefaults() throws {
        let head = try ProviderRequestValidator.validate(headers: headers()).get()
        #expect(head.priority == .immediate)
        #expect(head.pushType == .alert)
        #expect(head.expiration == nil)
        #expect(head.bundleID == "com.example.app")
        #expect(head.apnsID.rawValue == head.apnsID.rawValue.lowercased())
        let bg = try ProviderRequestValidator.validate(headers: headers([("apns-push-type", "background")])).get()
        #expect(bg.priority == .considerPower)
        let voip = try ProviderRequestValidator.validate(headers: headers([("apns-push-type", nil), ("apns-topic", "com.example.app.voip")])).get()
        #expect(voip.pushType == .voip)
        #expect(voip.bundleID == "com.example.app")
    }

    @Test func echoesApnsIDExactlyEvenOnError() {
        let id = "EABEAE54-14A8-11E5-B60B-1697F925EC7B"
        guard case .failure(let e) = ProviderRequestValidator.validate(headers: headers([("apns-id", id), ("apns-priority", "3")])) else {
            Issue.record("expected failure"); return
        }
        #expect(e.apnsIDEcho == id)
        #expect(e.error.reason == .badPriority)
    }

    @Test func everyHeaderReason() {
        #expect(reason(headers(extra: [("apns-topic", "com.example.app")])) == .duplicateHeaders)
        #expect(reason(headers([("apns-id", "nope")])) == .badMessageId)
        #expect(reason(headers([(":method", "GET")])) == .methodNotAllowed)
        #expect(reason(headers([("apns-topic", nil)])) == .missingTopic)
        #expect(reason(headers([("apns-topic", "bad topic")])) == .badTopic)
        #expect(reason(headers([("apns-collapse-id", String(repeating: "c", count: 65))])) == .badCollapseId)
        #expect(reason(headers([("apns-priority", "11")])) == .badPriority)
        #expect(reason(headers([("apns-push-type", "banner")])) == .invalidPushType)
        #expect(reason(headers([(":path", "/3/device/")])) == .missingDeviceToken)
        #expect(reason(headers([(":path", "/3/device/xyz")])) == .badDeviceToken)
        #expect(reason(headers([(":path", "/4/broadcasts/x")])) == .badPath)
        #expect(reason(headers([(":path", "/3/device/ab/cd")])) == .badPath)
        #expect(reason(headers([(":path", "/3/device")])) == .badPath)
        #expect(reason(headers([(":path", "/3/Device/\(token)")])) == .badPath)
        #expect(reason(headers([(":path", "/3/device/?x=1")])) == .missingDeviceToken)
        #expect(reason(headers([(":path", "/3/device/abc")])) == .badDeviceToken)
        #expect(reason(headers([(":path", "/3/device/ab\u{e9}")])) == .badDeviceToken)
        #expect(reason(headers([(":path", nil)])) == .badPath)
        #expect(reason(headers([("apns-expiration", "soon")])) == .badExpirationDate)
        #expect(reason(headers([("apns-push-type", "background"), ("apns-priority", "10")])) == .badPriority)
        #expect(reason(headers([("apns-push-type", "voip")])) == .topicDisallowed)
    }

    @Test func tokenFromPathIsLowerCasedAndQueryIgnored() throws {
        let head = try ProviderRequestValidator.validate(headers: headers([(":path", "/3/device/ABCDEF0123?x=/y")])).get()
        #expect(head.deviceToken.hex == "abcdef0123")
        // The streaming form, field by field, gives the same head.
        var fields = ProviderRequestFields()
        for (name, value) in headers([("apns-id", "EABEAE54-14A8-11E5-B60B-1697F925EC7B")]) { fields.add(name: name, value: value) }
        let streamed = try fields.validate().get()
        #expect(streamed.apnsID.rawValue == "EABEAE54-14A8-11E5-B60B-1697F925EC7B")
        #expect(streamed.deviceToken.hex == token)
        // Unknown fields are ignored; a field the API reads, twice, is DuplicateHeaders.
        fields.add(name: "x-extra", value: "1")
        #expect(fields.validate().isSuccess)
        fields.add(name: ":path", value: "/3/device/\(token)")
        #expect((try? fields.validate().get()) == nil)
    }

    @Test func bodyRules() throws {
        let head = try ProviderRequestValidator.validate(headers: headers()).get()
        #expect(ProviderRequestValidator.validate(body: [UInt8](), for: head) == .failure(APNsError(.payloadEmpty)))
        let big = Array(("{\"a\":\"" + String(repeating: "x", count: 4090) + "\"}").utf8)
        #expect(ProviderRequestValidator.validate(body: big, for: head) == .failure(APNsError(.payloadTooLarge)))
        #expect(ProviderRequestValidator.validate(body: Array("nope".utf8), for: head) == .failure(APNsError(.badRequestPayload)))
        let voip = try ProviderRequestValidator.validate(headers: headers([("apns-push-type", "voip"), ("apns-topic", "com.example.app.voip")])).get()
        #expect(ProviderRequestValidator.validate(body: big, for: voip).isSuccess)
    }
}
