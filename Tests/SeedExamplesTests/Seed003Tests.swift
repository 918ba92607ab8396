import Foundation
import Testing
import TidingsCore
@_spi(Tidings) import UserNotifications

/// Runs seed 003's examples (Seed003Examples.swift) against a recording daemon.
@MainActor
@Suite("Seed 003 examples", .serialized, .timeLimit(.minutes(1)))
struct Seed003Tests {
    let daemon = RecordingDaemon()

    @Test func registersForAlertAndSound() async {
        await withSeedCenter(daemon) {
            let controller = Seed003ViewController()
            controller.registerNotification()
            #expect(controller.center === UNUserNotificationCenter.current())
            let asked = await daemon.waitFor { if case .requestAuthorization = $0 { true } else { false } }
            #expect(asked == [.requestAuthorization([.alert, .sound])])
        }
    }

    @Test func settingsPrintLikeTheSeedShows() async {
        await withSeedCenter(daemon) {
            let controller = Seed003ViewController()
            controller.center = UNUserNotificationCenter.current()
            controller.printSettings()
            _ = await daemon.waitFor { $0 == .getSettings }
            let description = await UNUserNotificationCenter.current().notificationSettings().description
            // The seed's log: <UNNotificationSettings: 0x16567310; authorizationStatus: Authorized,
            // notificationCenterSetting: Enabled, soundSetting: Enabled, badgeSetting: Enabled,
            // lockScreenSetting: Enabled, alertSetting: NotSupported, carPlaySetting: Enabled, alertStyle: Banner>
            #expect(description.hasPrefix("<UNNotificationSettings: 0x"))
            #expect(description.contains("authorizationStatus: Authorized, notificationCenterSetting: Enabled, soundSetting: Enabled, badgeSetting: Enabled, lockScreenSetting: Enabled"))
            #expect(description.contains("alertStyle: Banner"))
        }
    }

    @Test func localNotificationIsScheduledInFiveSeconds() async {
        await withSeedCenter(daemon) {
            let controller = Seed003ViewController()
            controller.center = UNUserNotificationCenter.current()
            controller.addLocalNotification()
            #expect(controller.curIdentifier == "FiveSecond")
            let added = await daemon.waitFor { if case .add = $0 { true } else { false } }
            guard case .add(let request) = added[0] else { return }
            #expect(request.identifier == "FiveSecond")
            #expect(request.content.title == "Hello!")
            #expect(request.content.subtitle == "副标题看看")
            #expect(request.content.body == "Hello_message_body")
            #expect(request.content.sound == .default)
            #expect(request.content.userInfo == ["name": .string("Adu Test")])
            #expect(request.trigger == .timeInterval(seconds: 5, repeats: false))
            // No name.jpg in the test runner's bundle: no attachment, as on iOS.
            #expect(request.content.attachments.isEmpty)
        }
    }

    @Test func readingAnAttachmentAndAvailabilityRun() throws {
        let dir = try TemporaryDirectory()
        let content = UNMutableNotificationContent()
        content.attachments = [try UNNotificationAttachment(identifier: "a", url: try dir.write("a.jpg", TemporaryDirectory.jpeg))]
        let controller = Seed003ViewController()
        controller.readAttachment(of: UNNotification(request: UNNotificationRequest(identifier: "a", content: content, trigger: nil), date: Date()))
        // The image view shows the attachment's file, read through `attachment.url`.
        #expect(controller.eventImage.image?.data == Data(TemporaryDirectory.jpeg))
        // On Linux `#available(iOS 10.0, *)` holds: the UserNotifications branch runs.
        #expect(controller.adaptedTo == nil)
        controller.adapt()
        #expect(controller.adaptedTo == "UserNotifications")
    }

    @Test func readingAMissingAttachmentShowsNothing() throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("gone.jpg", TemporaryDirectory.jpeg)
        let content = UNMutableNotificationContent()
        content.attachments = [try UNNotificationAttachment(identifier: "a", url: file)]
        try FileManager.default.removeItem(at: file)
        let controller = Seed003ViewController()
        controller.readAttachment(of: UNNotification(request: UNNotificationRequest(identifier: "a", content: content, trigger: nil), date: Date()))
        #expect(controller.eventImage.image == nil)
    }
}
