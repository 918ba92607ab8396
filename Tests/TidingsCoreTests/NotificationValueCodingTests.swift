import Foundation
import Testing
import TidingsCore

@Suite("Notification value coding")
struct NotificationValueCodingTests {
    func roundTrip<T: Codable & Equatable>(_ value: T) throws -> T {
        try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
    }

    @Test("default content encodes to an empty object and decodes back")
    func defaults() throws {
        let content = NotificationContentValue()
        #expect(String(decoding: try JSONEncoder().encode(content), as: UTF8.self) == "{}")
        #expect(try roundTrip(content) == content)
    }

    @Test("every field survives a round trip")
    func everyField() throws {
        var content = NotificationContentValue()
        content.title = "t"
        content.subtitle = "s"
        content.body = "b"
        content.badge = 0
        content.sound = SoundValue(kind: .criticalNamed, name: "alarm.caf", volume: 0.5)
        content.launchImageName = "launch"
        content.userInfo = ["n": .integer(1), "d": .date(Date(timeIntervalSinceReferenceDate: 12.5)), "nested": .dictionary(["a": .array([.bool(true), .double(1.5), .data(Data([1, 2]))])])]
        content.attachments = [AttachmentValue(identifier: "a", path: "/x.png", type: "public.png", options: AttachmentOptions(typeHint: "public.png", thumbnailHidden: true, thumbnailClippingRect: [0, 0, 0.5, 0.5], thumbnailTime: 2))]
        content.categoryIdentifier = "c"
        content.threadIdentifier = "th"
        content.targetContentIdentifier = "target"
        content.summaryArgument = "sum"
        content.summaryArgumentCount = 3
        content.interruptionLevel = .timeSensitive
        content.relevanceScore = 0.75
        content.filterCriteria = "work"
        #expect(try roundTrip(content) == content)
        var components = DateComponents()
        components.hour = 8
        components.timeZone = TimeZone(identifier: "Europe/Berlin")
        let request = NotificationRequestValue(identifier: "r", content: content, trigger: .calendar(components, repeats: true))
        #expect(try roundTrip(request) == request)
    }
}
