import Foundation
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting
@_spi(Tidings) @testable import UserNotifications

/// The center against a real engine in the same process (TidingsTesting), on a test clock.
@MainActor
@Suite("UNUserNotificationCenter against the engine", .timeLimit(.minutes(1)))
struct CenterIntegrationTests {
    static let bundle = "com.example.integration"

    func withSystem(consent: FixedConsent = .autoGrant, _ body: (NotificationTestSystem, UNUserNotificationCenter) async throws -> Void) async throws {
        let system = try await NotificationTestSystem.start(consent: consent)
        do {
            let center = try await system.center(for: Self.bundle)
            try await body(system, center)
        } catch {
            await system.shutdown()
            throw error
        }
        await system.shutdown()
    }

    @Test func authorizationIsRememberedAndDenialReportsFalse() async throws {
        try await withSystem(consent: .autoDeny) { _, center in
            #expect(await center.notificationSettings().authorizationStatus == .notDetermined)
            let first = try await center.requestAuthorization(options: [.alert])
            #expect(!first)
            #expect(await center.notificationSettings().authorizationStatus == .denied)
            let second = try await center.requestAuthorization(options: [.alert])
            #expect(!second)
            let request = UNNotificationRequest(identifier: "x", content: { let c = UNMutableNotificationContent(); c.title = "t"; return c }(), trigger: nil)
            await #expect { try await center.add(request) } throws: { ($0 as? UNError) != nil }
        }
    }

    @Test func provisionalAuthorizationIsGrantedQuietly() async throws {
        try await withSystem(consent: .autoDeny) { _, center in
            let granted = try await center.requestAuthorization(options: [.provisional, .alert, .sound])
            #expect(granted)
            let settings = await center.notificationSettings()
            #expect(settings.authorizationStatus == .provisional)
            #expect(settings.alertSetting == .disabled)
            #expect(settings.notificationCenterSetting == .enabled)
        }
    }

    @Test func pendingRequestsComeBackAsTheirClasses() async throws {
        try await withSystem { _, center in
            _ = try await center.requestAuthorization(options: [.alert])
            let content = UNMutableNotificationContent()
            content.title = "Every Monday"
            content.userInfo = ["k": ["nested": true]]
            var components = DateComponents()
            components.weekday = 2
            components.hour = 8
            try await center.add(UNNotificationRequest(identifier: "monday", content: content, trigger: UNCalendarNotificationTrigger(dateMatching: components, repeats: true)))
            try await center.add(UNNotificationRequest(identifier: "soon", content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 120, repeats: false)))
            let pending = await center.pendingNotificationRequests().sorted { $0.identifier < $1.identifier }
            #expect(pending.map(\.identifier) == ["monday", "soon"])
            let monday = try #require(pending.first?.trigger as? UNCalendarNotificationTrigger)
            #expect(monday.dateComponents.weekday == 2 && monday.dateComponents.hour == 8 && monday.repeats)
            #expect(pending.first?.content.title == "Every Monday")
            #expect((pending.first?.content.userInfo["k"] as? [String: Any])?["nested"] as? Bool == true)
            center.removePendingNotificationRequests(withIdentifiers: ["soon", "unknown"])
            #expect(await center.pendingNotificationRequests().map(\.identifier) == ["monday"])
            center.removeAllPendingNotificationRequests()
            #expect(await center.pendingNotificationRequests().isEmpty)
        }
    }

    @Test func pendingTimeIntervalTriggersReportTheDateTheyFire() async throws {
        try await withSystem { system, center in
            _ = try await center.requestAuthorization(options: [.alert])
            let content = UNMutableNotificationContent()
            content.title = "t"
            let added = system.clock.now
            try await center.add(UNNotificationRequest(identifier: "once", content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 3600, repeats: false)))
            try await center.add(UNNotificationRequest(identifier: "hourly", content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 3600, repeats: true)))
            await system.advance(by: 600)
            // As on iOS: the date the request fires, not the interval counted from now.
            var pending = await center.pendingNotificationRequests().sorted { $0.identifier < $1.identifier }
            let hourly = try #require(pending.first?.trigger as? UNTimeIntervalNotificationTrigger)
            let once = try #require(pending.last?.trigger as? UNTimeIntervalNotificationTrigger)
            #expect(once.nextTriggerDate() == added.addingTimeInterval(3600))
            #expect(hourly.nextTriggerDate() == added.addingTimeInterval(3600))
            #expect(once.timeInterval == 3600 && hourly.repeats)

            // After a fire, a repeating request reports its next date.
            await system.advance(by: 3000)
            pending = await center.pendingNotificationRequests()
            #expect(pending.map(\.identifier) == ["hourly"])
            #expect(pending.first?.trigger?.repeats == true)
            #expect((pending.first?.trigger as? UNTimeIntervalNotificationTrigger)?.nextTriggerDate() == added.addingTimeInterval(7200))
        }
    }

    @Test func invalidTriggersNeverReachTheEngine() async throws {
        try await withSystem { system, center in
            _ = try await center.requestAuthorization(options: [.alert])
            let content = UNMutableNotificationContent()
            content.title = "t"
            await #expect { try await center.add(UNNotificationRequest(identifier: "bad", content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 30, repeats: true))) } throws: {
                ($0 as? UNError)?.code == .invalidTrigger
            }
            #expect(try await system.engine.pendingRequests(Self.bundle).isEmpty)
        }
    }

    @Test func attachmentIsReadableFromTheDeliveredNotification() async throws {
        try await withSystem { system, center in
            _ = try await center.requestAuthorization(options: [.alert])
            let dir = try Fixtures.TemporaryDirectory()
            let file = try dir.file("photo.png", Fixtures.png)
            let content = UNMutableNotificationContent()
            content.title = "Photo"
            content.attachments = [try UNNotificationAttachment(identifier: "photo", url: file)]
            try await center.add(UNNotificationRequest(identifier: "p", content: content, trigger: nil))
            await system.settle()
            let delivered = await center.deliveredNotifications()
            let attachment = try #require(delivered.first?.request.content.attachments.first)
            #expect(attachment.identifier == "photo")
            #expect(attachment.type == "public.png")
            #expect(attachment.url.startAccessingSecurityScopedResource())
            #expect(try Data(contentsOf: attachment.url) == Data(Fixtures.png))
            attachment.url.stopAccessingSecurityScopedResource()
            center.removeAllDeliveredNotifications()
            #expect(await center.deliveredNotifications().isEmpty)
        }
    }

    @Test func badgeCountReachesThePresenters() async throws {
        try await withSystem { system, center in
            _ = try await center.requestAuthorization(options: [.badge])
            try await center.setBadgeCount(3)
            #expect(system.presenter.events.contains(.badge(bundleIdentifier: Self.bundle, count: 3)))
            await #expect { try await center.setBadgeCount(-1) } throws: { ($0 as? UNError)?.code == .badgeInputInvalid }
        }
    }

    @Test func categoriesReplaceTheWholeSet() async throws {
        try await withSystem { _, center in
            let a = UNNotificationCategory(identifier: "a", actions: [UNNotificationAction(identifier: "x", title: "X")], intentIdentifiers: [], options: [])
            let b = UNNotificationCategory(identifier: "b", actions: [], intentIdentifiers: [], options: [.customDismissAction])
            center.setNotificationCategories([a, b])
            #expect(await center.notificationCategories() == [a, b])
            center.setNotificationCategories([b])
            #expect(await center.notificationCategories() == [b])
        }
    }

    @Test func foregroundDelegateDecidesAndReceivesTextReplies() async throws {
        try await withSystem { system, center in
            _ = try await center.requestAuthorization(options: [.alert, .sound])
            let input = UNTextInputNotificationAction(identifier: "reply", title: "Reply", options: [], textInputButtonTitle: "Send", textInputPlaceholder: "…")
            center.setNotificationCategories([UNNotificationCategory(identifier: "chat", actions: [input], intentIdentifiers: [], options: [])])
            let delegate = RecordingDelegate()
            delegate.options = [.list]
            center.delegate = delegate
            let content = UNMutableNotificationContent()
            content.title = "Message"
            content.categoryIdentifier = "chat"
            try await center.add(UNNotificationRequest(identifier: "m", content: content, trigger: UNTimeIntervalNotificationTrigger(timeInterval: 10, repeats: false)))
            await system.advance(by: 10)
            #expect(await eventually { @MainActor in delegate.presented.count == 1 })
            #expect(await eventually { await (try? system.engine.deliveredNotifications(Self.bundle))?.count == 1 })
            try await system.engine.respond(bundle: Self.bundle, identifier: "m", actionIdentifier: "reply", userText: "On my way")
            #expect(await eventually { @MainActor in delegate.responses.count == 1 })
            let response = try #require(delegate.responses.first as? UNTextInputNotificationResponse)
            #expect(response.userText == "On my way")
            #expect(response.actionIdentifier == "reply")
            #expect(response.notification.request.content.categoryIdentifier == "chat")
        }
    }
}
