import Foundation
import Testing
@testable import TidingsCore

/// The device's single parse of a payload (`RemoteNotificationMapping.plan`: JSON straight into
/// `userInfo`, `aps` read from it) against the computation it replaced, kept below as it was:
/// the payload parsed into a `JSONValue` tree, the `aps` keys looked up in it, `userInfo`
/// converted from the tree. For every payload of a corpus both give the same plan, or the
/// same error.
@Suite("Remote payload parse")
struct RemotePayloadParseTests {
    static let push = "11111111-2222-3333-4444-555555555555"
    static let strings = ["en": ["GREETING": "Hello %@", "PAIR": "%2$@ then %1$@ 100%%", "T": "Title %@"], "de": ["GREETING": "Hallo %@"]]

    func remotePush(_ bytes: [UInt8], collapse: String? = nil) -> RemotePush {
        RemotePush(apnsID: Self.push, sequence: 1, bundleIdentifier: "com.example.app", collapseID: collapse.flatMap(CollapseID.init(rawValue:)),
                   expiresAt: 2, acceptedAt: 1, payload: bytes)!
    }

    /// Plans `bytes` both ways (with and without localized strings) and records any difference.
    func expectSamePlan(_ bytes: [UInt8], _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation) {
        for (strings, languages) in [([String: [String: String]](), [String]()), (Self.strings, ["de-CH", "fr"])] {
            let push = remotePush(bytes)
            let new = Result { () throws(APNsPayloadError) in try RemoteNotificationMapping.plan(push, localizedStrings: strings, languages: languages) }
            let old = Result { () throws(APNsPayloadError) in try LegacyRemoteMapping.plan(push, localizedStrings: strings, languages: languages) }
            #expect(new == old, "\(comment())", sourceLocation: sourceLocation)
        }
    }

    func expectSamePlan(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        expectSamePlan(Array(text.utf8), text, sourceLocation: sourceLocation)
    }

    /// Hand-written edge cases: numbers, strings, duplicates, types the rules ignore, nesting.
    static let edgeCases: [String] = [
        #"{"aps":{"badge":1.0,"alert":"x"}}"#, #"{"aps":{"badge":1.5}}"#, #"{"aps":{"badge":1e2}}"#, #"{"aps":{"badge":-0}}"#,
        #"{"aps":{"badge":-0.0}}"#, #"{"aps":{"badge":9223372036854775807}}"#, #"{"aps":{"badge":9223372036854775808}}"#,
        #"{"aps":{"badge":-9223372036854775808}}"#, #"{"aps":{"badge":123456789012345678}}"#, #"{"aps":{"badge":1234567890123456789}}"#,
        #"{"aps":{"badge":99999999999999999999999}}"#, #"{"aps":{"badge":1e400}}"#, #"{"aps":{"badge":"1"}}"#, #"{"aps":{"badge":true}}"#,
        #"{"aps":{"badge":null,"sound":null,"alert":null},"k":null}"#, #"{"n":[1,-0,0.5,-1.25e-3,1E+2,100000000000000000000],"z":-0}"#,
        #"{"aps":{"alert":"a\u0000b","sound":"\ud83d\ude00"},"k\u0000":"\u00e9"}"#, #"{"aps":{"alert":"\ud83d"}}"#, #"{"aps":{"alert":"\ude00"}}"#,
        #"{"aps":{"alert":"\ud83d\u0041"}}"#, #"{"aps":{"alert":"\uZZZZ"}}"#, "{\"aps\":{\"alert\":\"tab\traw\"}}", #"{"aps":{"alert":"\q"}}"#,
        #"{"aps":{"alert":"x","alert":"y"}}"#, #"{"aps":{"alert":"x"},"aps":{"badge":2}}"#, #"{"aps":{"badge":1,"badge":null}}"#,
        #"{"k":1,"k":null}"#, #"{"k":null,"k":2}"#, #"{"aps":{"mutable-content":"1","alert":"x"}}"#, #"{"aps":{"mutable-content":1.0,"alert":"x"}}"#,
        #"{"aps":{"mutable-content":true,"alert":{}}}"#, #"{"aps":{"mutable-content":2,"alert":"x"}}"#, #"{"aps":{"mutable-content":"yes","alert":"x"}}"#,
        #"{"aps":{"mutable-content":1,"badge":3}}"#, #"{"aps":{"content-available":1}}"#, #"{"aps":{"content-available":"1","sound":""}}"#,
        #"{"aps":{"content-available":true,"alert":{"title":""}}}"#, #"{"aps":{"alert":7}}"#, #"{"aps":{"alert":["x"]}}"#, #"{"aps":{"alert":true}}"#,
        #"{"aps":{"alert":{"title":1,"body":["b"],"subtitle":{"x":1}}}}"#, #"{"aps":{"alert":{"title":"t","title":null}}}"#,
        #"{"aps":{"alert":{"loc-key":"GREETING","loc-args":["Ann",2,2.5,true,null,{"x":1},[1]]}}}"#,
        #"{"aps":{"alert":{"loc-key":"PAIR","loc-args":[1,2.0]}}}"#, #"{"aps":{"alert":{"title-loc-key":"T","title-loc-args":"notalist","body":"b"}}}"#,
        #"{"aps":{"alert":{"title":{"loc-key":"GREETING","loc-args":[-0]},"subtitle":{"loc-args":[1]},"body":{"loc-key":5}}}}"#,
        #"{"aps":{"alert":{"title":"plain","title-loc-key":"T","title-loc-args":["x"]}}}"#,
        #"{"aps":{"alert":{"summary-arg":"S","summary-arg-count":2.0,"launch-image":"l.png","sound":"in-alert.caf"}}}"#,
        #"{"aps":{"alert":{"summary-arg-count":1e300}}}"#, #"{"aps":{"sound":{"critical":"1","volume":-3}}}"#,
        #"{"aps":{"sound":{"critical":1.0,"name":7,"volume":"0.5"}}}"#, #"{"aps":{"sound":{"name":"","critical":0}}}"#, #"{"aps":{"sound":[]}}"#,
        #"{"aps":{"alert":"x","sound":{"critical":1,"volume":0.25},"interruption-level":"critical","relevance-score":1,"filter-criteria":""}}"#,
        #"{"aps":{"alert":"x","interruption-level":"passive","thread-id":5,"category":["c"],"target-content-id":null}}"#,
        #"{"aps":{"alert":"x","relevance-score":"0.5","interruption-level":7}}"#,
        #"{"aps":{"alert":"x","content-state":{"a":[null,1]},"attributes":null,"url-args":["a",1,null]}}"#,
        #"{"aps":"not an object","k":1}"#, #"{"aps":[{"alert":"x"}]}"#, #"{"aps":null}"#, #"{"aps":7}"#, #"{"k":{"aps":{"alert":"x"}}}"#, #"{}"#,
        "{\"aps\":{\"alert\":\"x\"}}   \n\t", "\u{FEFF}{\"aps\":{\"alert\":\"bom\"}}", " {\"aps\":{}}",
        #"[]"#, #"null"#, #"1"#, #""aps""#, #"{"aps":{"alert":"x"}} 1"#, #"{"aps":{"alert":"x"},}"#, #"{"aps"}"#, #"{"aps":tru}"#, #"{'aps':1}"#,
        #"{"aps":{"badge":01}}"#, #"{"aps":{"badge":1.}}"#, #"{"aps":{"badge":.5}}"#, #"{"aps":{"badge":-}}"#, #"{"aps":{"badge":1e}}"#, "",
        "{\"aps\":{\"alert\":\"x\"", "{\"aps\":{\"alert\":\"unterminated",
    ]

    @Test func testPayloadsPlanAsBefore() {
        #expect(PayloadCorpus.fromTests.count > 50)
        for payload in PayloadCorpus.fromTests { expectSamePlan(payload) }
    }

    @Test func edgeCasesPlanAsBefore() {
        for payload in Self.edgeCases { expectSamePlan(payload) }
    }

    /// Bytes no text literal can hold: invalid UTF-8 in keys and values, overlong forms,
    /// encoded surrogates, raw control bytes.
    @Test func invalidUTF8PlansAsBefore() {
        let prefix = Array(#"{"aps":{"alert":""#.utf8), suffix = Array(#""},"k":1}"#.utf8)
        let bad: [[UInt8]] = [[0xFF], [0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC3], [0xE2, 0x82],
                              [0x80], [0x00], [0x1F], [0xC3, 0xA9], [0xF0, 0x9F, 0x98, 0x80], [0x5C, 0x75, 0x30, 0x30, 0x65, 0x39, 0xC3, 0xA9, 0xFF]]
        for bytes in bad {
            expectSamePlan(prefix + bytes + suffix, "value \(bytes)")
            expectSamePlan(Array(#"{"aps":{},""#.utf8) + bytes + Array(#"":1}"#.utf8), "key \(bytes)")
            expectSamePlan(prefix + Array(#"a\n"#.utf8) + bytes + suffix, "value after an escape \(bytes)")
        }
    }

    /// Nesting: at the parser's limit (128 levels, the payload object included) and past it,
    /// in custom keys and inside `aps`.
    @Test func nestingAtAndPastTheLimitPlansAsBefore() throws {
        for depth in [JSONValue.maximumDepth - 1, JSONValue.maximumDepth] {
            let arrays = String(repeating: "[", count: depth - 1) + "1" + String(repeating: "]", count: depth - 1)
            let objects = String(repeating: #"{"a":"#, count: depth - 2) + "{}" + String(repeating: "}", count: depth - 2)
            for payload in [#"{"aps":{"alert":"x"},"k":\#(arrays)}"#, #"{"aps":{"alert":"x","content-state":\#(objects)}}"#] {
                expectSamePlan(payload)
            }
        }
        let atLimit = #"{"k":\#(String(repeating: "[", count: JSONValue.maximumDepth - 1))\#(String(repeating: "]", count: JSONValue.maximumDepth - 1))}"#
        _ = try RemoteNotificationMapping.plan(remotePush(Array(atLimit.utf8)))
        let past = #"{"k":\#(String(repeating: "[", count: JSONValue.maximumDepth))\#(String(repeating: "]", count: JSONValue.maximumDepth))}"#
        #expect(throws: APNsPayloadError.self) { try RemoteNotificationMapping.plan(remotePush(Array(past.utf8))) }
        // Far past it: refused at the limit, without recursing further.
        let deep = Array(#"{"k":"#.utf8) + [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        #expect(throws: APNsPayloadError.self) { try RemoteNotificationMapping.plan(remotePush(deep)) }
    }

    /// The fuzz target's seeds, and the device channel's (whole messages: mostly no `aps`).
    @Test func fuzzSeedsPlanAsBefore() throws {
        let seeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/seeds")
        var count = 0
        for target in ["FuzzPayload", "FuzzDeviceMessage"] {
            let directory = seeds.appendingPathComponent(target)
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() {
                expectSamePlan(Array(try Data(contentsOf: directory.appendingPathComponent(name))), "\(target)/\(name)")
                count += 1
            }
        }
        #expect(count >= 2)
    }

    /// Payloads made at random from the `aps` keys and values of every JSON type (nested,
    /// repeated keys, nulls, numbers at the edges), so that each rule meets each type.
    @Test func randomPayloadsPlanAsBefore() {
        var random = SplitMix(seed: 16)
        for i in 0..<3_000 { expectSamePlan(random.payload(), "random payload \(i)") }
    }

    /// The parser's own number and string paths, against the standard library they skip:
    /// an integer of up to 18 digits is read from the digits, ASCII strings are not validated.
    @Test func numbersAndStringsParseAsTheStandardLibraryReadsThem() throws {
        var random = SplitMix(seed: 7)
        var texts = ["0", "-0", "1", "-1", "999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807",
                     "-9223372036854775808", "9223372036854775808", "-9223372036854775809", "12345678901234567890123", "1.0", "-0.0", "1e2", "1E-2", "2.5e+3"]
        for _ in 0..<2_000 {
            let digits = Int(random.next() % 22) + 1
            var text = random.next() % 2 == 0 ? "-" : ""
            text += String(random.next() % 9 + 1)
            for _ in 1..<digits { text += String(random.next() % 10) }
            texts.append(text)
        }
        for text in texts {
            let expected: JSONValue = text.contains(where: { ".eE".contains($0) }) ? .double(Double(text)!) : Int64(text).map(JSONValue.integer) ?? .double(Double(text)!)
            #expect(try JSONValue(parsing: Array(text.utf8)) == expected, "\(text)")
            var parser = JSONTreeParser<PropertyListValue>(bytes: Array("[\(text)]".utf8))
            #expect(try parser.parseDocument() == .array([expected.propertyListValue!]), "\(text)")
        }
        for _ in 0..<2_000 {
            // Bytes without a quote, backslash or control byte, valid UTF-8 or not.
            let bytes = (0..<Int(random.next() % 12)).map { _ in UInt8(truncatingIfNeeded: random.next()) }.filter { $0 >= 0x20 && $0 != 0x22 && $0 != 0x5C }
            let parsed = try? JSONValue(parsing: [0x22] + bytes + [0x22])
            #expect(parsed == String(validating: bytes, as: UTF8.self).map(JSONValue.string), "\(bytes)")
        }
    }
}

/// A small deterministic generator (SplitMix64) for the random payloads.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func pick<T>(_ options: [T]) -> T { options[Int(next() % UInt64(options.count))] }

    static let apsKeys = ["alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content", "target-content-id",
                          "interruption-level", "relevance-score", "filter-criteria", "stale-date", "content-state", "timestamp", "event",
                          "dismissal-date", "attributes-type", "attributes", "input-push-token", "input-push-channel", "content-changed",
                          "url-args", "ptt-push-type"]
    static let alertKeys = ["title", "subtitle", "body", "loc-key", "loc-args", "title-loc-key", "title-loc-args", "subtitle-loc-key",
                            "subtitle-loc-args", "launch-image", "action", "action-loc-key", "summary-arg", "summary-arg-count", "sound"]
    static let soundKeys = ["name", "critical", "volume"]
    static let scalars = ["0", "1", "-1", "2", "1.0", "0.5", "-0", "-0.0", "1e2", "1E0", "9223372036854775807", "9223372036854775808",
                          "123456789012345678901", "-9223372036854775808", "1e308", "true", "false", "null", #""""#, #""1""#, #""0""#,
                          #""default""#, #""GREETING""#, #""PAIR""#, #""T""#, #""%@ %1$@ %%""#, #""passive""#, #""time-sensitive""#,
                          #""critical""#, #""é\u00e9\ud83d\ude00""#, #""a\"b\\c\n""#, #""\u0000""#]

    mutating func value(depth: Int, keys: [String]) -> String {
        switch next() % 10 {
        case 0..<5: return pick(Self.scalars)
        case 5..<7 where depth < 4: return object(depth: depth + 1, keys: keys)
        case 7 where depth < 4: return "[" + (0..<Int(next() % 4)).map { _ in value(depth: depth + 1, keys: keys) }.joined(separator: ",") + "]"
        default: return pick(Self.scalars)
        }
    }

    mutating func object(depth: Int, keys: [String]) -> String {
        let members = (0..<Int(next() % 6)).map { _ -> String in
            let key = next() % 8 == 0 ? "k\(next() % 3)" : pick(keys)
            let nested = key == "alert" ? Self.alertKeys : key == "sound" ? Self.soundKeys : keys
            return "\"\(key)\":" + value(depth: depth, keys: nested)
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    mutating func payload() -> [UInt8] {
        var members = ["\"aps\":" + (next() % 10 == 0 ? value(depth: 1, keys: Self.apsKeys) : object(depth: 1, keys: Self.apsKeys))]
        for _ in 0..<Int(next() % 3) { members.append("\"c\(next() % 3)\":" + value(depth: 1, keys: Self.apsKeys)) }
        if next() % 5 == 0 { members.swapAt(0, members.count - 1) }
        return Array(("{" + members.joined(separator: ",") + "}").utf8)
    }
}

/// The remote mapping as it was before the single parse (main at 5e2f92e, `APNsPayload` and
/// `RemoteNotificationMapping.plan`): the payload parsed into a `JSONValue` tree, each `aps`
/// key looked up in it, `userInfo` converted from the whole tree. Kept only here, as the
/// reference the device's path must equal.
enum LegacyRemoteMapping {
    static func plan(_ push: RemotePush, localizedStrings: [String: [String: String]], languages: [String]) throws(APNsPayloadError) -> RemoteNotificationPlan {
        let json: JSONValue
        do { json = try JSONValue(parsing: push.payload) } catch { throw APNsPayloadError.invalidJSON(error) }
        guard case .object(var dict) = json else { throw APNsPayloadError.notAnObject }
        let aps = dict.removeValue(forKey: "aps")?.objectValue ?? [:]
        let table = RemoteNotificationMapping.localizationTable(localizedStrings, languages: languages)
        let localize = { (key: String) in table[key] }
        let alert = aps["alert"].flatMap(LegacyAlert.init(json:))
        let badge = aps["badge"]?.integerValue.flatMap { Int(exactly: $0) }
        let sound = aps["sound"].flatMap(legacySound(json:))
        var content = NotificationContentValue()
        if let alert {
            content.title = alert.titleLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.title ?? ""
            content.subtitle = alert.subtitleLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.subtitle ?? ""
            content.body = alert.bodyLocalized.map { $0.formatted(format: localize($0.key)) } ?? alert.body ?? ""
            content.launchImageName = alert.launchImage ?? ""
            content.summaryArgument = alert.summaryArg ?? ""
            content.summaryArgumentCount = alert.summaryArgCount ?? 0
        }
        content.badge = badge
        content.sound = (sound ?? alert?.sound)?.value
        content.categoryIdentifier = aps["category"]?.stringValue ?? ""
        content.threadIdentifier = aps["thread-id"]?.stringValue ?? ""
        content.targetContentIdentifier = aps["target-content-id"]?.stringValue
        content.interruptionLevel = aps["interruption-level"]?.stringValue.flatMap(InterruptionLevel.init(apsName:)) ?? .active
        content.relevanceScore = aps["relevance-score"]?.doubleValue ?? 0
        content.filterCriteria = aps["filter-criteria"]?.stringValue
        if case .dictionary(let info)? = json.propertyListValue { content.userInfo = info }
        let contentAvailable = flag(aps["content-available"]), mutableContent = flag(aps["mutable-content"])
        let showsSomething = content.hasAlertContent || content.badge != nil || content.sound != nil
        return RemoteNotificationPlan(
            request: showsSomething ? NotificationRequestValue(identifier: push.requestIdentifier, content: content, trigger: .push) : nil,
            wantsServiceExtension: mutableContent && alert != nil && content.hasAlertContent,
            wakesApp: contentAvailable,
            isBackgroundOnly: contentAvailable && alert == nil && badge == nil && sound == nil,
            userInfo: content.userInfo)
    }

    static func flag(_ value: JSONValue?) -> Bool {
        switch value {
        case .integer(1), .bool(true), .string("1"): true
        case .double(let d) where d == 1: true
        default: false
        }
    }

    static func legacySound(json: JSONValue) -> Sound? {
        switch json {
        case .string(let s): Sound(name: s)
        case .object(let d): Sound(name: d["name"]?.stringValue ?? "default", critical: flag(d["critical"]),
                                   volume: d["volume"]?.doubleValue.map { min(max($0, 0), 1) })
        default: nil
        }
    }

    struct LegacyAlert {
        var title, subtitle, body, launchImage, summaryArg: String?
        var titleLocalized, subtitleLocalized, bodyLocalized: LocalizableText?
        var summaryArgCount: Int?
        var sound: Sound?

        init?(json: JSONValue) {
            switch json {
            case .string(let s):
                body = s
            case .object(let d):
                (title, titleLocalized) = Self.text(d["title"], key: d["title-loc-key"], args: d["title-loc-args"])
                (subtitle, subtitleLocalized) = Self.text(d["subtitle"], key: d["subtitle-loc-key"], args: d["subtitle-loc-args"])
                (body, bodyLocalized) = Self.text(d["body"], key: d["loc-key"], args: d["loc-args"])
                launchImage = d["launch-image"]?.stringValue
                summaryArg = d["summary-arg"]?.stringValue
                summaryArgCount = d["summary-arg-count"]?.integerValue.flatMap { Int(exactly: $0) }
                sound = d["sound"].flatMap(legacySound(json:))
            default:
                return nil
            }
        }

        static func text(_ plain: JSONValue?, key: JSONValue?, args: JSONValue?) -> (String?, LocalizableText?) {
            var localized: LocalizableText?
            if let key = key?.stringValue {
                localized = LocalizableText(key: key, arguments: args?.arrayValue?.compactMap(argumentText) ?? [])
            }
            switch plain {
            case .string(let s): return (s, localized)
            case .object(let d):
                if localized == nil, let key = d["loc-key"]?.stringValue {
                    localized = LocalizableText(key: key, arguments: d["loc-args"]?.arrayValue?.compactMap(argumentText) ?? [])
                }
                return (nil, localized)
            default: return (nil, localized)
            }
        }

        static func argumentText(_ value: JSONValue) -> String? {
            switch value {
            case .string(let s): s
            case .integer(let i): String(i)
            case .double(let d): String(d)
            case .bool(let b): String(b)
            default: nil
            }
        }
    }
}
