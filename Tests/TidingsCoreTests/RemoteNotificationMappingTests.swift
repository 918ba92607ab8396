import Foundation
import Testing
import TidingsCore

@Suite("Remote notification mapping")
struct RemoteNotificationMappingTests {
    static let now = Date(timeIntervalSince1970: 1_795_348_800)
    static var nowMS: Int64 { Int64(now.timeIntervalSince1970 * 1000) }

    func push(_ payload: String, apnsID: String = "11111111-2222-3333-4444-555555555555", collapseID: String? = nil,
              expiresAt: Int64? = nil) -> RemotePush {
        RemotePush(apnsID: apnsID, sequence: 1, bundleIdentifier: "com.example.app", pushType: .alert, priority: .immediate,
                   collapseID: collapseID.flatMap(CollapseID.init(rawValue:)), expiresAt: expiresAt ?? Self.nowMS + 3_600_000, acceptedAt: Self.nowMS, payload: Array(payload.utf8))!
    }

    /// The device channel's push is typed once: topic and bundle ID, collapse id; what cannot
    /// be typed is refused (the daemon drops it) rather than re-typed with a fallback.
    @Test func aDevicePushIsTypedOnceOrRefused() throws {
        func device(topic: String, type: PushType = .alert, collapse: String? = nil) -> DevicePush {
            DevicePush(sequence: 3, apnsID: "a", token: "ab", topic: topic, pushType: type, priority: .considerPower, collapseID: collapse,
                       expiresAt: 5, acceptedAt: 4, payload: Array(#"{"aps":{}}"#.utf8))
        }
        let voip = try #require(RemotePush(device(topic: "com.example.app.voip", type: .voip, collapse: "c")))
        #expect(voip.bundleIdentifier == "com.example.app")
        #expect(voip.topic.rawValue == "com.example.app.voip")
        #expect(voip.collapseID?.rawValue == "c" && voip.requestIdentifier == "c")
        #expect(voip.priority == .considerPower && voip.payload == Array(#"{"aps":{}}"#.utf8))
        #expect(try #require(RemotePush(device(topic: "com.example.app", collapse: ""))).collapseID == nil, "an empty collapse id is none")
        #expect(RemotePush(device(topic: "com.example.app", type: .voip)) == nil, "a VoIP push needs the .voip topic")
        #expect(RemotePush(device(topic: "com.example app")) == nil, "a malformed topic")
        #expect(RemotePush(device(topic: "com.example.app", collapse: String(repeating: "x", count: 65))) == nil, "a collapse id over 64 bytes")
        #expect(RemotePush(device(topic: "com.example.app", collapse: String(repeating: "x", count: 64))) != nil, "64 bytes is allowed")
    }

    @Test func everyAPSKeyBecomesContent() throws {
        let payload = #"""
        {"aps":{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker","launch-image":"launch.png"},
                "badge":9,"sound":{"critical":1,"name":"alarm.caf","volume":0.5},"thread-id":"game-42","category":"GAME_INVITATION",
                "content-available":1,"mutable-content":1,"target-content-id":"window-7","interruption-level":"time-sensitive",
                "relevance-score":0.75,"filter-criteria":"work"},
         "gameID":"12345678"}
        """#
        let plan = try RemoteNotificationMapping.plan(push(payload))
        let request = try #require(plan.request)
        #expect(request.identifier == "11111111-2222-3333-4444-555555555555")
        #expect(request.trigger == .push)
        let c = request.content
        #expect(c.title == "Game Request")
        #expect(c.subtitle == "Five Card Draw")
        #expect(c.body == "Bob wants to play poker")
        #expect(c.launchImageName == "launch.png")
        #expect(c.badge == 9)
        #expect(c.sound == SoundValue(kind: .criticalNamed, name: "alarm.caf", volume: 0.5))
        #expect(c.threadIdentifier == "game-42")
        #expect(c.categoryIdentifier == "GAME_INVITATION")
        #expect(c.targetContentIdentifier == "window-7")
        #expect(c.interruptionLevel == .timeSensitive)
        #expect(c.relevanceScore == 0.75)
        #expect(c.filterCriteria == "work")
        // The whole payload, aps included, is userInfo.
        #expect(c.userInfo["gameID"] == .string("12345678"))
        guard case .dictionary(let aps)? = c.userInfo["aps"] else { Issue.record("no aps in userInfo"); return }
        #expect(aps["category"] == .string("GAME_INVITATION"))
        #expect(plan.wantsServiceExtension)
        #expect(plan.wakesApp)
        #expect(!plan.isBackgroundOnly)
    }

    @Test func alertStringIsTheBody() throws {
        let plan = try RemoteNotificationMapping.plan(push(#"{"aps":{"alert":"Hello","sound":"default"}}"#))
        let c = try #require(plan.request).content
        #expect(c.title == "" && c.body == "Hello")
        #expect(c.sound == SoundValue(kind: .default))
        #expect(!plan.wantsServiceExtension)
    }

    @Test(arguments: [#""1""#, "1", "true"])
    func mutableContentAsNumberOrString(_ flag: String) throws {
        let plan = try RemoteNotificationMapping.plan(push(#"{"aps":{"alert":{"body":"x"},"mutable-content":\#(flag)}}"#))
        #expect(plan.wantsServiceExtension)
    }

    @Test func mutableContentWithoutAlertRunsNoExtension() throws {
        let plan = try RemoteNotificationMapping.plan(push(#"{"aps":{"badge":1,"mutable-content":1}}"#))
        #expect(!plan.wantsServiceExtension)
        #expect(plan.request?.content.badge == 1)
    }

    @Test func locKeysResolveFromTheAppsStrings() throws {
        let strings = ["en": ["GAME_PLAY_REQUEST_FORMAT": "%@ and %@ have invited you to play Monopoly",
                              "TITLE_FMT": "From %2$@ to %1$@", "SUB": "Round %@"],
                       "de": ["GAME_PLAY_REQUEST_FORMAT": "%1$@ und %2$@ laden dich zu Monopoly ein"]]
        let payload = #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Shelly","Rick"],"title-loc-key":"TITLE_FMT","title-loc-args":["A","B"],"subtitle-loc-key":"SUB","subtitle-loc-args":[3]}}}"#
        let english = try #require(try RemoteNotificationMapping.plan(push(payload), localizedStrings: strings, languages: ["en-US"]).request).content
        #expect(english.body == "Shelly and Rick have invited you to play Monopoly")
        #expect(english.title == "From B to A")
        #expect(english.subtitle == "Round 3")
        let german = try #require(try RemoteNotificationMapping.plan(push(payload), localizedStrings: strings, languages: ["de-CH"]).request).content
        #expect(german.body == "Shelly und Rick laden dich zu Monopoly ein")
        // A key the app does not translate is shown with its arguments, as iOS does.
        let missing = try #require(try RemoteNotificationMapping.plan(push(#"{"aps":{"alert":{"loc-key":"Hi %@","loc-args":["Ann"]}}}"#)).request).content
        #expect(missing.body == "Hi Ann")
    }

    @Test func languagesFromTheLocale() {
        #expect(RemoteNotificationMapping.preferredLanguages(environment: ["LANG": "de_CH.UTF-8"]) == ["de-CH"])
        #expect(RemoteNotificationMapping.preferredLanguages(environment: ["LANGUAGE": "fr:en", "LANG": "C"]) == ["fr", "en"])
    }

    @Test func collapseIDIsTheIdentifier() throws {
        let plan = try RemoteNotificationMapping.plan(push(#"{"aps":{"alert":"a"}}"#, collapseID: "score"))
        #expect(plan.request?.identifier == "score")
    }

    @Test func silentPushHasNothingToShow() throws {
        let plan = try RemoteNotificationMapping.plan(push(#"{"aps":{"content-available":1},"acme1":"bar","acme2":42}"#))
        #expect(plan.request == nil)
        #expect(plan.wakesApp && plan.isBackgroundOnly)
        #expect(plan.userInfo["acme2"] == .integer(42))
    }

    @Test func badPayloadIsAnError() {
        #expect(throws: APNsPayloadError.self) { try RemoteNotificationMapping.plan(push("[1]")) }
    }

    @Test func expiry() {
        #expect(push("{}", expiresAt: Self.nowMS + 1000).isExpired(at: Self.now) == false)
        #expect(push("{}", expiresAt: Self.nowMS + 1000).isExpired(at: Self.now.addingTimeInterval(1)) == true)
        // apns-expiration 0: expiry = acceptance, shown when it arrives.
        #expect(push("{}", expiresAt: Self.nowMS).isExpired(at: Self.now.addingTimeInterval(60)) == false)
    }
}
