import Foundation
import Testing
import TidingsCore
@_spi(Tidings) import UserNotifications

/// Runs seed 001's examples (Seed001Examples.swift) against a recording daemon.
@MainActor
@Suite("Seed 001 examples", .serialized, .timeLimit(.minutes(1)))
struct Seed001Tests {
    @Test(arguments: [true, false])
    func requestAuthorizationHandlesGrantAndDenial(granted: Bool) async {
        let daemon = RecordingDaemon(settings: granted ? .granted([.alert, .sound, .badge], provisional: false) : .deniedSettings)
        await withSeedCenter(daemon) {
            Seed001.requestAuthorization()
            let asked = await daemon.waitFor { if case .requestAuthorization = $0 { true } else { false } }
            #expect(asked == [.requestAuthorization([.alert, .sound, .badge])])
        }
    }

    @Test func settingsExamplePrintsStatusAndBadgeSetting() async {
        let daemon = RecordingDaemon()
        await withSeedCenter(daemon) {
            Seed001.printSettings()
            _ = await daemon.waitFor { $0 == .getSettings }
            // What the example prints:
            let settings = await UNUserNotificationCenter.current().notificationSettings()
            #expect("\(settings.authorizationStatus)" == "authorized")
            #expect("\(settings.badgeSetting)" == "enabled")
        }
    }

    @Test func deliveredNotificationIsRemovedAfterFourSeconds() async {
        let daemon = RecordingDaemon()
        await withSeedCenter(daemon) {
            Seed001.removeDelivered(content: UNMutableNotificationContent())
            _ = await daemon.waitFor { if case .add = $0 { true } else { false } }
            SeedClock.current.advance()
            #expect(daemon.requests.last == .removeDelivered(["com.onevcat.usernotification.notificationWillBeRemovedAfterDisplayed"]))
        }
    }

    @Test func handlerPresentsForegroundNotificationsWithAlertAndSound() async {
        let daemon = RecordingDaemon()
        await withSeedCenter(daemon) {
            let handler = Seed001.NotificationHandler()
            UNUserNotificationCenter.current().delegate = handler
            daemon.emit(.willPresent(eventID: 5, notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: "x", content: NotificationContentValue(), trigger: nil), date: Date())))
            let decision = await daemon.waitFor { if case .presentationDecision = $0 { true } else { false } }
            #expect(decision == [.presentationDecision(eventID: 5, options: [.alert, .sound])])
            // The handler does not implement didReceive: the response completes at once.
            daemon.emit(.didReceive(eventID: 6, response: ResponseValue(notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: "x", content: NotificationContentValue(), trigger: nil), date: Date()), actionIdentifier: UNNotificationDefaultActionIdentifier)))
            _ = await daemon.waitFor { $0 == .responseHandled(eventID: 6) }
            withExtendedLifetime(handler) {}
        }
    }

    @Test func respondersReadTheUserInfoAndComplete() async {
        let daemon = RecordingDaemon()
        await withSeedCenter(daemon) {
            let simple = Seed001.SimpleResponder()
            let named = Seed001.NameResponder()
            func notification(_ userInfo: [String: PropertyListValue]) -> DeliveredNotificationValue {
                var content = NotificationContentValue()
                content.userInfo = userInfo
                return DeliveredNotificationValue(request: NotificationRequestValue(identifier: "n", content: content, trigger: nil), date: Date())
            }
            let greetingsBefore = SeedOutput.lines(containing: "I know it's you!").count
            // The simple responder completes.
            UNUserNotificationCenter.current().delegate = simple
            daemon.emit(.didReceive(eventID: 7, response: ResponseValue(notification: notification(["name": .string("onevcat")]), actionIdentifier: UNNotificationDefaultActionIdentifier)))
            #expect(await daemon.waitFor { $0 == .responseHandled(eventID: 7) } == [.responseHandled(eventID: 7)])
            // The name responder reads `name` from the userInfo, greets, and completes; without a name it only completes.
            UNUserNotificationCenter.current().delegate = named
            daemon.emit(.didReceive(eventID: 8, response: ResponseValue(notification: notification(["name": .string("onevcat")]), actionIdentifier: UNNotificationDefaultActionIdentifier)))
            daemon.emit(.didReceive(eventID: 9, response: ResponseValue(notification: notification(["city": .string("Tokyo")]), actionIdentifier: UNNotificationDefaultActionIdentifier)))
            #expect(await daemon.waitFor { $0 == .responseHandled(eventID: 8) } == [.responseHandled(eventID: 8)])
            #expect(await daemon.waitFor { $0 == .responseHandled(eventID: 9) } == [.responseHandled(eventID: 9)], "\(daemon.requests)")
            #expect(SeedOutput.lines(containing: "I know it's you!").dropFirst(greetingsBefore) == ["I know it's you! onevcat"])
            withExtendedLifetime((simple, named)) {}
        }
    }

    @Test func serviceExtensionRewritesTheBody() {
        let content = UNMutableNotificationContent()
        content.title = "Greetings"
        content.body = "Long time no see"
        let request = UNNotificationRequest(identifier: "mutableContent", content: content, trigger: nil)
        var bodies: [String] = []
        Seed001.NotificationService().didReceive(request) { bodies.append($0.body) }
        #expect(bodies == ["Long time no see, onevcat"])
    }

    @Test func readingAnAttachmentRuns() throws {
        let dir = try TemporaryDirectory()
        let content = UNMutableNotificationContent()
        content.attachments = [try UNNotificationAttachment(identifier: "a", url: try dir.write("a.png", TemporaryDirectory.png))]
        let notification = UNNotification(request: UNNotificationRequest(identifier: "a", content: content, trigger: nil), date: Date())
        Seed001.readAttachment(of: notification)
        #expect(notification.request.content.attachments.first?.url.startAccessingSecurityScopedResource() == true)
    }
}
