import Foundation
import Testing
import TidingsCore

@Suite("Binary request codec")
struct BinaryRequestCodecTests {
    static func fullRequest(trigger: TriggerValue?) -> NotificationRequestValue {
        var content = NotificationContentValue()
        content.title = "t ✓"
        content.subtitle = "s"
        content.body = "b"
        content.badge = -3
        content.sound = SoundValue(kind: .criticalNamed, name: "alarm.caf", volume: 0.5)
        content.launchImageName = "launch"
        content.userInfo = [
            "n": .integer(-1), "big": .integer(.max), "d": .date(Date(timeIntervalSinceReferenceDate: 12.5)), "s": .string(""),
            "nested": .dictionary(["a": .array([.bool(true), .bool(false), .double(-1.5), .data(Data([0, 1, 2]))])]),
        ]
        content.attachments = [
            AttachmentValue(identifier: "a", path: "/x.png", type: "public.png", options: AttachmentOptions(typeHint: "public.png", thumbnailHidden: false, thumbnailClippingRect: [0, 0, 0.5, 0.5], thumbnailTime: 2)),
            AttachmentValue(identifier: "b", path: "/y.mp3", type: "public.mp3"),
        ]
        content.categoryIdentifier = "c"
        content.threadIdentifier = "th"
        content.targetContentIdentifier = ""
        content.summaryArgument = "sum"
        content.summaryArgumentCount = 3
        content.interruptionLevel = .timeSensitive
        content.relevanceScore = 0.75
        content.filterCriteria = "work"
        return NotificationRequestValue(identifier: "r-1", content: content, trigger: trigger)
    }

    static var triggers: [TriggerValue?] {
        var components = DateComponents()
        components.hour = 8
        components.timeZone = TimeZone(identifier: "Europe/Berlin")
        return [nil, .timeInterval(seconds: 90.25, repeats: true), .push, .calendar(components, repeats: true),
                .location(CircularRegionValue(identifier: "home", latitude: 52.5, longitude: 13.4, radius: 100, notifyOnEntry: true, notifyOnExit: false), repeats: false)]
    }

    @Test("every field and every trigger survive a round trip")
    func roundTrip() throws {
        for trigger in Self.triggers {
            let request = Self.fullRequest(trigger: trigger)
            let bytes = try BinaryRequestCodec.encode(request)
            #expect(BinaryRequestCodec.isBinary(bytes))
            #expect(try BinaryRequestCodec.decode(Data(bytes)) == request)
        }
        let minimal = NotificationRequestValue(identifier: "", content: NotificationContentValue(), trigger: nil)
        #expect(try BinaryRequestCodec.decode(Data(BinaryRequestCodec.encode(minimal))) == minimal)
    }

    @Test("whether a stored request may name files is read from its field mask; anything else may")
    func mayHaveAttachments() throws {
        for trigger in Self.triggers {
            var request = Self.fullRequest(trigger: trigger)
            #expect(try BinaryRequestCodec.encode(request).withUnsafeBytes { BinaryRequestCodec.mayHaveAttachments($0) })
            request.content.attachments = []
            let bytes = try BinaryRequestCodec.encode(request)
            #expect(!bytes.withUnsafeBytes { BinaryRequestCodec.mayHaveAttachments($0) }, "userInfo and every trigger read past, \(String(describing: trigger))")
            // Cut before the mask (in the marker, the identifier's length, the identifier): not readable, so it may.
            for end in [0, 1, 2, 4] {
                #expect(Array(bytes.prefix(end)).withUnsafeBytes { BinaryRequestCodec.mayHaveAttachments($0) })
            }
        }
        #expect(try JSONEncoder().encode(Self.fullRequest(trigger: nil)).withUnsafeBytes { BinaryRequestCodec.mayHaveAttachments($0) }, "JSON rows are decoded to know")
    }

    @Test("the binary form is smaller than the JSON form")
    func compact() throws {
        let request = Self.fullRequest(trigger: .timeInterval(seconds: 60, repeats: false))
        #expect(try BinaryRequestCodec.encode(request).count < JSONEncoder().encode(request).count / 2)
    }

    @Test("what JSON cannot carry is refused when encoding")
    func nonFiniteNumbersAreRefused() {
        var request = Self.fullRequest(trigger: .timeInterval(seconds: .nan, repeats: false))
        #expect(throws: BinaryRequestCodec.EncodingError.self) { try BinaryRequestCodec.encode(request) }
        request.trigger = nil
        request.content.relevanceScore = .infinity
        #expect(throws: BinaryRequestCodec.EncodingError.self) { try BinaryRequestCodec.encode(request) }
        request.content.relevanceScore = 0
        request.content.userInfo = ["x": .double(.nan)]
        #expect(throws: BinaryRequestCodec.EncodingError.self) { try BinaryRequestCodec.encode(request) }
    }

    @Test("every truncation, trailing bytes and foreign bytes are refused")
    func malformedInputIsRefused() throws {
        let bytes = try BinaryRequestCodec.encode(Self.fullRequest(trigger: .timeInterval(seconds: 60, repeats: false)))
        for length in 0..<bytes.count {
            #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(Data(bytes[..<length])) }
        }
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(Data(bytes + [0])) }
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(Data("{}".utf8)) }
    }

    @Test("invalid UTF-8, unknown tags, non-minimal varints and NaN are refused")
    func strictDecoding() throws {
        func request(_ body: [UInt8]) -> Data { Data([BinaryRequestCodec.marker] + body) }
        // identifier "a", no trigger, no content
        #expect(try BinaryRequestCodec.decode(request([1, 0x61, 0, 0])).identifier == "a")
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(request([1, 0xFF, 0, 0])) }
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(request([1, 0x61, 9, 0])) }
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(request([0x81, 0x00, 0x61, 0, 0])) }
        // unknown content field
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(request([0, 0, 0x80, 0x80, 0x04])) }
        // time interval NaN
        let nan = withUnsafeBytes(of: Double.nan.bitPattern.littleEndian) { Array($0) }
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(request([0, 1] + nan + [0, 0])) }
        // a boolean that is neither 0 nor 1
        let sixty = withUnsafeBytes(of: (60.0).bitPattern.littleEndian) { Array($0) }
        #expect(try BinaryRequestCodec.decode(request([0, 1] + sixty + [1, 0])).trigger == .timeInterval(seconds: 60, repeats: true))
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(request([0, 1] + sixty + [2, 0])) }
        // a time-interval trigger smuggled in the JSON form
        let json = Array(try JSONEncoder().encode(TriggerValue.timeInterval(seconds: 60, repeats: false)))
        #expect(throws: BinaryRequestCodec.DecodingError.self) { try BinaryRequestCodec.decode(request([0, 3, UInt8(json.count)] + json + [0])) }
    }
}
