import Testing
@testable import TidingsCore

@Suite("APNs payload")
struct APNsPayloadTests {
    func parse(_ json: String) throws -> APNsPayload { try APNsPayload(json: Array(json.utf8)) }

    @Test func alertStringIsTheBody() throws {
        let p = try parse(#"{"aps":{"alert":"Hello"}}"#)
        #expect(p.aps.alert?.body == "Hello")
        #expect(p.notificationContent().body == "Hello")
    }

    @Test func fullAlertDictionaryAndAllApsKeys() throws {
        let p = try parse("""
        {"aps":{"alert":{"title":"Game Request","subtitle":"Five Card Draw","body":"Bob wants to play poker",
          "launch-image":"li.png","summary-arg":"Bob","summary-arg-count":2},
          "badge":9,"sound":"bingbong.aiff","thread-id":"t1","category":"GAME_INVITATION",
          "mutable-content":1,"content-available":1,"target-content-id":"win1","interruption-level":"time-sensitive",
          "relevance-score":0.75,"filter-criteria":"work"},"gameID":"12345678","n":3,"f":1.5,"b":true,"z":null}
        """)
        #expect(p.aps.alert?.title == "Game Request")
        #expect(p.aps.mutableContent)
        #expect(p.aps.contentAvailable)
        let c = p.notificationContent()
        #expect(c.title == "Game Request")
        #expect(c.subtitle == "Five Card Draw")
        #expect(c.body == "Bob wants to play poker")
        #expect(c.badge == 9)
        #expect(c.sound == SoundValue(kind: .named, name: "bingbong.aiff"))
        #expect(c.threadIdentifier == "t1")
        #expect(c.categoryIdentifier == "GAME_INVITATION")
        #expect(c.targetContentIdentifier == "win1")
        #expect(c.interruptionLevel == .timeSensitive)
        #expect(c.relevanceScore == 0.75)
        #expect(c.filterCriteria == "work")
        #expect(c.launchImageName == "li.png")
        #expect(c.summaryArgument == "Bob")
        #expect(c.summaryArgumentCount == 2)
        #expect(c.userInfo["gameID"] == .string("12345678"))
        #expect(c.userInfo["n"] == .integer(3))
        #expect(c.userInfo["f"] == .double(1.5))
        #expect(c.userInfo["b"] == .bool(true))
        #expect(c.userInfo["z"] == nil)
        guard case .dictionary(let aps)? = c.userInfo["aps"] else { Issue.record("aps missing from userInfo"); return }
        #expect(aps["badge"] == .integer(9))
        #expect(p.wantsServiceExtension)
    }

    @Test func mutableContentAsString() throws {
        #expect(try parse(#"{"aps":{"mutable-content":"1","alert":"x"}}"#).wantsServiceExtension)
        #expect(try !parse(#"{"aps":{"mutable-content":0,"alert":"x"}}"#).aps.mutableContent)
    }

    @Test func localizationKeys() throws {
        let p = try parse(#"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Shelly","Rick"],"title-loc-key":"T %@","title-loc-args":["x"],"subtitle-loc-key":"S","subtitle-loc-args":[]}}}"#)
        #expect(p.aps.alert?.bodyLocalized == LocalizableText(key: "GAME_PLAY_REQUEST_FORMAT", arguments: ["Shelly", "Rick"]))
        let c = p.notificationContent(localize: { $0 == "GAME_PLAY_REQUEST_FORMAT" ? "%@ and %@ have invited you" : nil })
        #expect(c.body == "Shelly and Rick have invited you")
        #expect(c.title == "T x")
        #expect(c.subtitle == "S")
        #expect(LocalizableText(key: "%2$@ then %1$@ 100%%", arguments: ["a", "b"]).formatted() == "b then a 100%")
    }

    @Test func liveActivityTitleDictionaryAndSoundInsideAlert() throws {
        let p = try parse(#"{"aps":{"timestamp":1685952000,"event":"update","content-state":{"a":1},"stale-date":1685955000,"dismissal-date":1685959000,"alert":{"title":{"loc-key":"%@ is knocked down!","loc-args":["Power Panda"]},"body":"b","sound":"HeroDown.mp4"}}}"#)
        #expect(p.aps.event == "update")
        #expect(p.aps.timestamp == 1_685_952_000)
        #expect(p.aps.staleDate == 1_685_955_000)
        #expect(p.aps.dismissalDate == 1_685_959_000)
        #expect(p.aps.contentState == .object(["a": .integer(1)]))
        let c = p.notificationContent()
        #expect(c.title == "Power Panda is knocked down!")
        #expect(c.sound == SoundValue(kind: .named, name: "HeroDown.mp4"))
    }

    @Test func criticalSoundDictionary() throws {
        let c = try parse(#"{"aps":{"alert":"x","sound":{"critical":1,"name":"default","volume":0.5}}}"#).notificationContent()
        #expect(c.sound == SoundValue(kind: .defaultCritical, volume: 0.5))
        let named = try parse(#"{"aps":{"sound":{"critical":1,"name":"alarm.caf","volume":7}}}"#).notificationContent()
        #expect(named.sound == SoundValue(kind: .criticalNamed, name: "alarm.caf", volume: 1))
        #expect(try parse(#"{"aps":{"sound":"default"}}"#).notificationContent().sound == .default)
    }

    @Test func otherApsKeys() throws {
        let p = try parse(#"{"aps":{"content-changed":true,"input-push-token":1,"input-push-channel":"abc=","attributes-type":"A","attributes":{},"url-args":["x","y"],"ptt-push-type":"service-update"}}"#)
        #expect(p.aps.contentChanged)
        #expect(p.aps.inputPushToken)
        #expect(p.aps.inputPushChannel == "abc=")
        #expect(p.aps.attributesType == "A")
        #expect(p.aps.urlArgs == ["x", "y"])
        #expect(p.aps.pttPushType == "service-update")
    }

    @Test func backgroundAndNoApsAndWrongTypesIgnored() throws {
        #expect(try parse(#"{"aps":{"content-available":1},"acme1":"bar"}"#).isBackgroundUpdate)
        let mdm = try parse(#"{"mdm":"magic"}"#)
        #expect(mdm.aps.alert == nil)
        #expect(mdm.customKeys["mdm"] == .string("magic"))
        let odd = try parse(#"{"aps":{"badge":"nine","alert":7,"interruption-level":"loud"}}"#)
        #expect(odd.aps.badge == nil)
        #expect(odd.aps.alert == nil)
        #expect(odd.aps.interruptionLevel == nil)
    }

    @Test func invalidBodies() {
        #expect(throws: APNsPayloadError.self) { try parse("not json") }
        #expect(throws: APNsPayloadError.notAnObject) { try parse("[1,2]") }
        #expect(throws: APNsPayloadError.self) { try parse(#"{"aps":{"alert":"x"}"#) }
        #expect(throws: APNsPayloadError.self) { try parse(String(repeating: "[", count: 1000)) }
    }

    @Test func jsonParserDistinguishesNumbersAndStrings() throws {
        let v = try JSONValue(parsing: Array(#" {"i":1,"d":1.0,"e":1e3,"s":"1","b":false,"n":null,"u":"\u00e9\ud83d\ude00\n"} "#.utf8))
        #expect(v["i"] == .integer(1))
        #expect(v["d"] == .double(1))
        #expect(v["e"] == .double(1000))
        #expect(v["s"] == .string("1"))
        #expect(v["b"] == .bool(false))
        #expect(v["n"] == .null)
        #expect(v["u"] == .string("é😀\n"))
        for bad in ["", "{", "01", "1.", "-", "\"\\x\"", "\"\\ud800\"", "[1,]", "{\"a\" 1}", "tru", "\"a\u{01}\""] {
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONValue(parsing: Array(bad.utf8)) }
        }
        let round = try JSONValue(parsing: Array(v.jsonText.utf8))
        #expect(round == v)
    }

    /// Strings with escapes are copied run by run between the escapes: every run must arrive
    /// whole and in place, and a control character or the end inside a later run still fails.
    @Test func escapedStringsKeepEveryRun() throws {
        let payload = #"{"aps":{"alert":{"title":"Hello \"you\"","body":"a\\b/c\nd"},"badge":1},"k":"é\u00e9"}"#
        let message = try JSONValue(parsing: Array(JSONValue.string(payload).jsonText.utf8))
        #expect(message == .string(payload))
        #expect(try JSONValue(parsing: Array(#""ab\"cd\\ef\/gh\u0041ij""#.utf8)) == .string(#"ab"cd\ef/ghAij"#))
        #expect(try JSONValue(parsing: Array(#""\"""#.utf8)) == .string("\""))
        #expect(try JSONValue(parsing: Array(#""\\\\""#.utf8)) == .string(#"\\"#))
        for bad in ["\"a\\\"b\u{01}c\"", "\"a\\\"bc", "\"a\\\"b\u{0A}\""] {
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONValue(parsing: Array(bad.utf8)) }
        }
    }

    @Test func scannerAgreesWithTheParser() {
        let inputs = [
            #"{"aps":{"alert":"x"}}"#, "{}", " {} ", "[]", "1", #""s""#, "{", #"{"a":}"#, #"{"a":1,}"#, #"{"a":01}"#,
            #"{"a":"\u00e9\ud83d\ude00"}"#, #"{"a":"\ud800"}"#, #"{"a":"\x"}"#, #"{"a":1e5,"b":-0.5,"c":[true,false,null]}"#,
            "{\"a\":\"\u{01}\"}", #"{"é":"ü😀"}"#, "\u{FEFF}{}", #"{"a":1} x"#, String(repeating: "[", count: 200),
            "{\"a\":" + String(repeating: "[", count: 127) + String(repeating: "]", count: 127) + "}",
        ]
        for input in inputs {
            let parsed: Bool = if case .object? = try? JSONValue(parsing: Array(input.utf8)) { true } else { false }
            #expect(JSONValue.isObject(Array(input.utf8)) == parsed, "\(input)")
        }
        // Invalid UTF-8 inside a string: an overlong, a lone continuation byte, a surrogate.
        for bad: [UInt8] in [[0xC0, 0xAF], [0x80], [0xED, 0xA0, 0x80], [0xF5, 0x80, 0x80, 0x80]] {
            let doc = Array(#"{"a":""#.utf8) + bad + Array(#""}"#.utf8)
            #expect(!JSONValue.isObject(doc))
            #expect((try? JSONValue(parsing: doc)) == nil)
        }
    }
}
