import Foundation
import Testing
import TidingsCore
import TidingsTesting
@_spi(Tidings) import UserNotifications

/// The seeds' examples end to end, "as the seeds say": run verbatim against an in-process
/// notification system on a test clock — scheduled, presented, removed, updated, answered.
@MainActor
@Suite("Seed examples end to end", .serialized, .timeLimit(.minutes(1)))
struct SeedBehaviourTests {
    static let bundle = "com.onevcat.UserNotificationDemo"

    /// Starts a system, connects the demo app, grants authorization like the person would,
    /// and runs `body` with `current()` bound to the app's center.
    func withDemoApp(_ body: (NotificationTestSystem) async throws -> Void) async throws {
        let system = try await NotificationTestSystem.start()
        let center = try await system.center(for: Self.bundle)
        do {
            try await SeedClockContext.$clock.withValue(SeedClock()) {
                try await UNUserNotificationCenter.$testingCurrent.withValue(center) {
                    #expect(try await center.requestAuthorization(options: [.alert, .sound, .badge]))
                    try await body(system)
                }
            }
        } catch {
            await system.shutdown()
            throw error
        }
        await system.shutdown()
    }

    func pending(_ system: NotificationTestSystem) async -> [String] {
        ((try? await system.engine.pendingRequests(Self.bundle)) ?? []).map(\.identifier)
    }

    func delivered(_ system: NotificationTestSystem) async -> [String] {
        ((try? await system.engine.deliveredNotifications(Self.bundle)) ?? []).map(\.request.identifier)
    }

    @Test func timeIntervalNotificationIsPresentedAfterFiveSeconds() async throws {
        try await withDemoApp { system in
            seed000_timeIntervalNotification()
            let id = "com.onevcat.usernotification.myFirstNotification"
            #expect(await eventually { await pending(system) == [id] })
            await system.advance(by: 4.9)
            #expect(system.presenter.presentedIdentifiers.isEmpty)
            await system.advance(by: 0.1)
            #expect(system.presenter.presentedIdentifiers == [id])
            #expect(system.presenter.presented.first?.notification.request.content.title == "时间戳通知")
            #expect(await pending(system).isEmpty)
            #expect(await delivered(system) == [id])
        }
    }

    @Test func removedPendingRequestIsNeverPresented() async throws {
        try await withDemoApp { system in
            let title1Content = UNMutableNotificationContent()
            title1Content.title = "Title 1"
            seed000_removePending(title1Content: title1Content)
            #expect(await eventually { await pending(system) == ["pendingRemoval"] })
            await system.advance(by: 2)
            SeedClock.current.advance() // delay(2): removePendingNotificationRequests
            #expect(await eventually { await pending(system).isEmpty })
            await system.advance(by: 10)
            #expect(system.presenter.presentedIdentifiers.isEmpty)
        }
    }

    @Test func deliveredNotificationIsRemovedFromTheList() async throws {
        try await withDemoApp { system in
            let content = UNMutableNotificationContent()
            content.title = "Will be removed"
            seed000_removeDelivered(content: content)
            let id = "com.onevcat.usernotification.notificationWillBeRemovedAfterDisplayed"
            #expect(await eventually { await pending(system) == [id] })
            await system.advance(by: 3)
            #expect(system.presenter.presentedIdentifiers == [id])
            #expect(await delivered(system) == [id])
            await system.advance(by: 1)
            SeedClock.current.advance() // delay(4): removeDeliveredNotifications
            #expect(await eventually { await delivered(system).isEmpty })
            // The list changes when the removal commits; the presenter hears of it just after.
            let withdrawn = RecordingPresenter.Event.withdrawn(bundleIdentifier: Self.bundle, identifiers: [id])
            #expect(await eventually { system.presenter.events.contains(withdrawn) })
        }
    }

    @Test func updatedPendingRequestIsPresentedWithTheNewContentOnly() async throws {
        try await withDemoApp { system in
            let identifier = UserNotificationType.pendingUpdate.rawValue
            let content = UNMutableNotificationContent()
            content.title = "Old"
            let newContent = UNMutableNotificationContent()
            newContent.title = "New"
            let request = UNNotificationRequest(identifier: identifier, content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 3, repeats: false))
            seed000_update(request: request, identifier: identifier, newContent: newContent)
            #expect(await eventually { await pending(system) == [identifier] })
            await system.advance(by: 2)
            SeedClock.current.advance() // delay(2): add the new request, same identifier, in 1 s
            #expect(await eventually {
                (try? await system.engine.pendingRequests(Self.bundle))?.first?.content.title == "New"
            })
            await system.advance(by: 1)
            await system.advance(by: 5)
            #expect(system.presenter.presentedIdentifiers == [identifier])
            #expect(system.presenter.presented.first?.notification.request.content.title == "New")
        }
    }

    @Test func foregroundAppPresentsWithAlertAndSound() async throws {
        try await withDemoApp { system in
            let appDelegate = AppDelegate()
            _ = appDelegate.application(didFinishLaunchingWithOptions: nil)
            // The app is active and has a delegate: the engine asks it how to present.
            seed000_timeIntervalNotification()
            #expect(await eventually { await pending(system).contains("com.onevcat.usernotification.myFirstNotification") })
            await system.advance(by: 5)
            #expect(await eventually { system.presenter.presentedIdentifiers == ["com.onevcat.usernotification.myFirstNotification"] })
            let presentation = system.presenter.presented.first?.presentation
            #expect(presentation?.sound == true)
            #expect(presentation?.isVisible == true)
            withExtendedLifetime(appDelegate) {}
        }
    }

    /// Seed 000's actionable handler, observed: records what it handled.
    final class ObservedActionableHandler: ActionableNotificationHandler {
        var handled: [(action: String, text: String?)] = []
        override func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping () -> Void) {
            handled.append((response.actionIdentifier, (response as? UNTextInputNotificationResponse)?.userText))
            super.userNotificationCenter(center, didReceive: response, withCompletionHandler: completionHandler)
        }
    }

    @Test func actionableNotificationIsAnsweredWithTextAndDismissal() async throws {
        try await withDemoApp { system in
            seed000_registerNotificationCategory()
            #expect(await eventually { ((try? await system.engine.categories(Self.bundle)) ?? []).map(\.identifier) == ["saySomethingCategory"] })
            // Delivered while the app has no delegate, so the person's settings present them
            // (a foreground delegate without willPresent would present nothing, as on iOS).
            for id in ["say1", "say2", "say3"] {
                let content = UNMutableNotificationContent()
                content.title = "Say something"
                content.categoryIdentifier = "saySomethingCategory"
                try await UNUserNotificationCenter.current().add(UNNotificationRequest(identifier: id, content: content, trigger: nil))
            }
            await system.settle()
            #expect(await eventually { await delivered(system).count == 3 })
            let handler = ObservedActionableHandler()
            UNUserNotificationCenter.current().delegate = handler

            try await system.engine.respond(bundle: Self.bundle, identifier: "say1", actionIdentifier: "action.input", userText: "你好")
            try await system.engine.respond(bundle: Self.bundle, identifier: "say2", actionIdentifier: "action.goodbye")
            try await system.engine.respond(bundle: Self.bundle, identifier: "say3", actionIdentifier: UNNotificationDismissActionIdentifier)
            #expect(await eventually { @MainActor in handler.handled.count == 3 })
            #expect(handler.handled.map(\.action) == ["action.input", "action.goodbye", UNNotificationDismissActionIdentifier])
            #expect(handler.handled.map(\.text) == ["你好", nil, nil])
            #expect(await eventually { ((try? await system.engine.heldResponses(Self.bundle)) ?? []).isEmpty })
            #expect(await delivered(system).isEmpty)
        }
    }

    @Test func seed003LocalNotificationIsPresentedWithSubtitleAndSound() async throws {
        try await withDemoApp { system in
            let controller = Seed003ViewController()
            controller.center = UNUserNotificationCenter.current()
            controller.addLocalNotification()
            #expect(await eventually { await pending(system) == ["FiveSecond"] })
            await system.advance(by: 5)
            let shown = system.presenter.presented.first
            #expect(shown?.notification.request.content.subtitle == "副标题看看")
            #expect(shown?.notification.request.content.sound == SoundValue.default)
            #expect(shown?.notification.request.content.userInfo["name"] == .string("Adu Test"))
        }
    }
}
