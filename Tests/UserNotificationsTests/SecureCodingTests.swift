import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

@Suite("NSSecureCoding")
struct SecureCodingTests {
    func roundTrip<T: NSObject & NSSecureCoding>(_ object: T) throws -> T {
        let data = try NSKeyedArchiver.archivedData(withRootObject: object, requiringSecureCoding: true)
        return try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: T.self, from: data))
    }

    @Test func everyValueClassRoundTrips() throws {
        let dir = try Fixtures.TemporaryDirectory()
        let attachment = try UNNotificationAttachment(identifier: "a", url: try dir.file("a.gif", Fixtures.gif), options: [UNNotificationAttachmentOptionsThumbnailHiddenKey: true])
        #expect(try roundTrip(attachment) == attachment)

        let sound = UNNotificationSound.criticalSoundNamed("alarm.caf", withAudioVolume: 0.3)
        #expect(try roundTrip(sound) == sound)

        let icon = UNNotificationActionIcon(templateImageName: "reply")
        let category = UNNotificationCategory(identifier: "c", actions: [
            UNTextInputNotificationAction(identifier: "t", title: "T", options: [.foreground], icon: icon, textInputButtonTitle: "Go", textInputPlaceholder: "…"),
            UNNotificationAction(identifier: "d", title: "D", options: [.destructive]),
        ], intentIdentifiers: ["i"], hiddenPreviewsBodyPlaceholder: "%u", categorySummaryFormat: "%u more", options: [.customDismissAction])
        let decodedCategory = try roundTrip(category)
        #expect(decodedCategory == category)
        #expect(decodedCategory.actions.first is UNTextInputNotificationAction)

        let settings = UNNotificationSettings(.granted([.alert, .badge], provisional: true))
        #expect(try roundTrip(settings) == settings)

        let text = UNNotificationResponse.make(ResponseValue(notification: Fixtures.delivered(), actionIdentifier: "t", userText: "hi"))
        let decodedText = try roundTrip(text)
        #expect(decodedText == text)

        let notification = UNNotification(value: Fixtures.delivered("n"))
        #expect(try roundTrip(notification) == notification)

        let region = CLCircularRegion(center: CLLocationCoordinate2DMake(52.5, 13.4), radius: 200, identifier: "berlin")
        region.notifyOnEntry = false
        let decodedRegion = try roundTrip(region)
        #expect(decodedRegion == region)
        #expect(!decodedRegion.notifyOnEntry)

        let trigger = UNLocationNotificationTrigger(region: region, repeats: true)
        let decodedTrigger = try roundTrip(trigger)
        #expect(decodedTrigger == trigger)
        #expect(decodedTrigger.region == region)
    }
}
