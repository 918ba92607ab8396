import Foundation
import Testing
import TidingsCore
@_spi(Tidings) import UserNotifications
import UserNotificationsUI

/// Runs seed 000's examples (Seed000Examples.swift) against a recording daemon and checks
/// that they ask the notification system for what the post says.
@MainActor
@Suite("Seed 000 examples", .serialized, .timeLimit(.minutes(1)))
struct Seed000Tests {
    let daemon = RecordingDaemon()

    @Test func requestAuthorizationAsksForAlertSoundAndBadge() async {
        await withSeedCenter(daemon) {
            seed000_requestAuthorization()
            let asked = await daemon.waitFor { if case .requestAuthorization = $0 { true } else { false } }
            #expect(asked == [.requestAuthorization([.alert, .sound, .badge])])
        }
    }

    @Test func timeIntervalNotificationIsScheduledInFiveSeconds() async {
        await withSeedCenter(daemon) {
            seed000_timeIntervalNotification()
            let added = await daemon.waitFor { if case .add = $0 { true } else { false } }
            guard case .add(let request) = added[0] else { return }
            #expect(request.identifier == "com.onevcat.usernotification.myFirstNotification")
            #expect(request.content.title == "时间戳通知")
            #expect(request.content.body == "我的第一条通知")
            #expect(request.trigger == .timeInterval(seconds: 5, repeats: false))
        }
    }

    @Test func pendingRequestIsRemovedTwoSecondsLater() async {
        await withSeedCenter(daemon) {
            let title1Content = UNMutableNotificationContent()
            title1Content.title = "Title 1"
            seed000_removePending(title1Content: title1Content)
            _ = await daemon.waitFor { if case .add = $0 { true } else { false } }
            SeedClock.current.advance()
            #expect(SeedClock.current.elapsed == 2)
            #expect(daemon.requests.suffix(2) == [
                .add(NotificationRequestValue(identifier: "pendingRemoval", content: { var c = NotificationContentValue(); c.title = "Title 1"; return c }(), trigger: .timeInterval(seconds: 3, repeats: false))),
                .removePending(["pendingRemoval"]),
            ])
        }
    }

    @Test func deliveredNotificationIsRemovedFourSecondsLater() async {
        await withSeedCenter(daemon) {
            seed000_removeDelivered(content: UNMutableNotificationContent())
            _ = await daemon.waitFor { if case .add = $0 { true } else { false } }
            SeedClock.current.advance()
            #expect(SeedClock.current.elapsed == 4)
            #expect(daemon.requests.last == .removeDelivered(["com.onevcat.usernotification.notificationWillBeRemovedAfterDisplayed"]))
        }
    }

    @Test func updateAddsANewRequestWithTheSameIdentifier() async {
        await withSeedCenter(daemon) {
            let content = UNMutableNotificationContent()
            content.title = "Old"
            let newContent = UNMutableNotificationContent()
            newContent.title = "New"
            let identifier = UserNotificationType.pendingUpdate.rawValue
            let request = UNNotificationRequest(identifier: identifier, content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 3, repeats: false))
            seed000_update(request: request, identifier: identifier, newContent: newContent)
            _ = await daemon.waitFor { if case .add = $0 { true } else { false } }
            SeedClock.current.advance()
            let adds = await daemon.waitFor(2) { if case .add = $0 { true } else { false } }
            guard case .add(let first) = adds[0], case .add(let second) = adds[1] else { return }
            #expect(first.identifier == second.identifier)
            #expect(first.content.title == "Old")
            #expect(second.content.title == "New")
            #expect(second.trigger == .timeInterval(seconds: 1, repeats: false))
        }
    }

    @Test func appDelegateInstallsTheHandlerThatPresentsWithAlertAndSound() async {
        await withSeedCenter(daemon) {
            let appDelegate = AppDelegate()
            #expect(appDelegate.application(didFinishLaunchingWithOptions: nil))
            #expect(UNUserNotificationCenter.current().delegate === appDelegate.notificationHandler)
            #expect(daemon.requests.contains(.setDelegate(true)))

            daemon.emit(.willPresent(eventID: 1, notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: "fg", content: NotificationContentValue(), trigger: nil), date: Date())))
            let decision = await daemon.waitFor { if case .presentationDecision = $0 { true } else { false } }
            #expect(decision == [.presentationDecision(eventID: 1, options: [.alert, .sound])])

            daemon.emit(.didReceive(eventID: 2, response: ResponseValue(notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: "fg", content: NotificationContentValue(), trigger: nil), date: Date()), actionIdentifier: UNNotificationDefaultActionIdentifier)))
            _ = await daemon.waitFor { $0 == .responseHandled(eventID: 2) }
            withExtendedLifetime(appDelegate) {}
        }
    }

    @Test func saySomethingCategoryIsRegistered() async {
        await withSeedCenter(daemon) {
            seed000_registerNotificationCategory()
            guard case .setCategories(let categories)? = daemon.requests.last else {
                Issue.record("no categories sent: \(daemon.requests)")
                return
            }
            #expect(categories.count == 1)
            let category = categories[0]
            #expect(category.identifier == "saySomethingCategory")
            #expect(category.options == CategoryValue.customDismissAction)
            #expect(category.actions.map(\.identifier) == ["action.input", "action.goodbye", "action.cancel"])
            #expect(category.actions[0].textInput == ActionValue.TextInput(buttonTitle: "发送", placeholder: "你想说什么..."))
            #expect(category.actions[0].options == ActionValue.foreground)
            #expect(category.actions[1].textInput == nil)
            #expect(category.actions[2].options == ActionValue.destructive)
        }
    }

    @Test(arguments: [("action.input", "你好" as String?), ("action.goodbye", nil), ("action.cancel", nil), (UNNotificationDismissActionIdentifier, nil)])
    func actionableResponsesAreHandled(action: String, userText: String?) async {
        await withSeedCenter(daemon) {
            let handler = ActionableNotificationHandler()
            UNUserNotificationCenter.current().delegate = handler
            var content = NotificationContentValue()
            content.categoryIdentifier = "saySomethingCategory"
            let notification = DeliveredNotificationValue(request: NotificationRequestValue(identifier: "say", content: content, trigger: nil), date: Date())
            daemon.emit(.didReceive(eventID: 3, response: ResponseValue(notification: notification, actionIdentifier: action, userText: userText)))
            let handled = await daemon.waitFor { $0 == .responseHandled(eventID: 3) }
            #expect(handled.count == 1)
            withExtendedLifetime(handler) {}
        }
    }

    @Test func serviceExtensionAppendsToTheBody() {
        let content = UNMutableNotificationContent()
        content.body = "Greetings"
        let request = UNNotificationRequest(identifier: "mutableContent", content: content, trigger: nil)
        let service = NotificationService()
        var delivered: [UNNotificationContent] = []
        service.didReceive(request) { delivered.append($0) }
        #expect(delivered.map(\.body) == ["Greetings, 科比·布莱恩特"])
        #expect(request.content.body == "Greetings")
        service.serviceExtensionTimeWillExpire()
        #expect(delivered.count == 2)

        let other = UNNotificationRequest(identifier: "other", content: content, trigger: nil)
        NotificationService().didReceive(other) { delivered.append($0) }
        #expect(delivered.last?.body == "Greetings")
    }

    @Test func bundleMediaExampleBuildsContent() {
        let content = seed000_mediaAttachmentFromBundle()
        #expect(content.title == "精彩瞬间")
        // The test runner's main bundle has no image.jpg, so `try?` leaves no attachment,
        // as on iOS when the resource is missing.
        #expect(content.attachments.isEmpty)
    }

    @Test func downloadedImageBecomesAnAttachment() async throws {
        let server = try OneShotHTTPServer(body: TemporaryDirectory.png, contentType: "image/png")
        let image = server.url("hover-fly.png")
        let content = UNMutableNotificationContent()
        content.title = "Image Notification"
        content.userInfo = ["image": image.absoluteString]
        let request = UNNotificationRequest(identifier: "media", content: content, trigger: nil)
        let service = ImageNotificationService()
        // The content handler runs on URLSession's queue: hand back what it delivered as Sendable strings.
        let attachments: [[String]] = await withCheckedContinuation { continuation in
            service.didReceive(request) { content in
                continuation.resume(returning: content.attachments.map { [$0.identifier, $0.type, $0.url.path] })
            }
        }
        let cached = URL(fileURLWithPath: FileManager.default.cachesDirectory).appendingPathComponent(image.absoluteString.md5).appendingPathExtension("png")
        defer { try? FileManager.default.removeItem(at: cached) }
        #expect(attachments == [["image_downloaded", "public.png", cached.path]])
    }

    @Test func contentExtensionShowsItemsAndSwitches() async throws {
        let dir = try TemporaryDirectory()
        let first = try UNNotificationAttachment(identifier: "1", url: try dir.write("one.png", TemporaryDirectory.png))
        let second = try UNNotificationAttachment(identifier: "2", url: try dir.write("two.jpg", TemporaryDirectory.jpeg))
        let content = UNMutableNotificationContent()
        content.categoryIdentifier = "customUI"
        content.userInfo = ["items": [["title": "A", "text": "first"], ["title": "B", "text": "second"]]]
        content.attachments = [first, second]
        let notification = UNNotification(request: UNNotificationRequest(identifier: "ui", content: content, trigger: nil), date: Date())

        let controller = NotificationViewController()
        controller.didReceive(notification)
        #expect(controller.items.map(\.title) == ["A", "B"])
        #expect(controller.items.map(\.url) == [first.url, second.url])
        #expect(controller.index == 0)

        func respond(_ action: String) async -> UNNotificationContentExtensionResponseOption {
            let response = UNNotificationResponse(notification: notification, actionIdentifier: action)
            return await withCheckedContinuation { continuation in
                controller.didReceive(response) { continuation.resume(returning: $0) }
            }
        }
        #expect(await respond("switch") == .doNotDismiss)
        #expect(controller.index == 1)
        #expect(await respond("switch") == .doNotDismiss)
        #expect(controller.index == 0)
        #expect(await respond("open") == .dismissAndForwardAction)
        #expect(await respond("dismiss") == .dismiss)
        #expect(await respond(UNNotificationDefaultActionIdentifier) == .dismissAndForwardAction)
    }
}
