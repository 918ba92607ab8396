import Foundation
import Testing
import TidingsCore
import TidingsTesting
@_spi(Tidings) import UserNotifications
import UserNotificationsUI

/// Runs APIInventory.swift (iOS code, Swift 5 mode) against an in-process notification
/// system: what it schedules, registers and reads back.
@MainActor
@Suite("API inventory", .serialized, .timeLimit(.minutes(1)))
struct APIInventoryTests {
    @Test func valuesHaveApplesNumbers() {
        #expect(inventoryOfValues() == [0b111_1111, 0b1_1000_0000, 5, 3, 3, 3, 0b11111, 4, 0b11111, 0b111, 3, 3, 12])
    }

    @Test func theCenterDoesWhatTheInventoryAsks() async throws {
        let system = try await NotificationTestSystem.start()
        let center = try await system.center(for: "com.example.inventory")
        let directory = try TemporaryDirectory()
        let image = try directory.write("image.png", TemporaryDirectory.png)
        let report = try await UNUserNotificationCenter.$testingCurrent.withValue(center) {
            try await inventoryOfTheCenter(attachmentURL: image)
        }
        #expect(report.granted)
        #expect(report.settings?.authorizationStatus == .authorized)
        #expect(Set(report.categories.map(\.identifier)) == ["inventory.category", "inventory.hidden", "inventory.summary"])
        let category = try #require(report.categories.first { $0.identifier == "inventory.category" })
        #expect(category.actions.map(\.identifier) == ["plain", "icon", "reply", "reply.icon"])
        #expect(category.actions[2] is UNTextInputNotificationAction)
        #expect(report.categories.first { $0.identifier == "inventory.summary" }?.categorySummaryFormat == "%u more from %@")
        // "inventory.now" was delivered at once; "inventory.completion" was removed while pending.
        #expect(report.pendingIdentifiers == ["inventory.later"])
        #expect(report.deliveredIdentifiers == ["inventory.now"])
        #expect((report.badgeError as? UNError)?.code == .badgeInputInvalid)
        #expect(await center.pendingNotificationRequests().isEmpty)
        await system.shutdown()
    }

    @Test func delegatesAndExtensionsAnswerAsImplemented() async throws {
        let system = try await NotificationTestSystem.start()
        let center = try await system.center(for: "com.example.inventory")
        let delegate = InventoryDelegate()
        center.delegate = delegate
        _ = try await center.requestAuthorization(options: [.alert])
        center.setNotificationCategories(inventoryCategories())
        try await center.add(UNNotificationRequest(identifier: "shown", content: try inventoryContent(attachmentURL: nil), trigger: nil))
        #expect(await eventually { await MainActor.run { delegate.seen.contains("willPresent shown true") } })
        #expect(await eventually { await center.deliveredNotifications().count == 1 })
        try await system.engine.respond(bundle: "com.example.inventory", identifier: "shown", actionIdentifier: "reply", userText: "hi")
        #expect(await eventually { await MainActor.run { delegate.seen.contains("didReceive shown reply hi false false") } })

        let service = InventoryServiceExtension()
        var titles: [String] = []
        service.didReceive(UNNotificationRequest(identifier: "s", content: UNMutableNotificationContent.plain("T"), trigger: nil)) { titles.append($0.title) }
        #expect(titles == ["T [modified]"])

        let content = InventoryContentExtension()
        #expect(content.mediaPlayPauseButtonType == .overlay)
        let response = UNNotificationResponse.make(ResponseValue(notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: "c", content: NotificationContentValue(), trigger: nil), date: Date()), actionIdentifier: "x"))
        let option = await withCheckedContinuation { continuation in
            AsyncInventoryContentExtension().didReceive(response) { continuation.resume(returning: $0) }
        }
        #expect(option == .doNotDismiss)

        let remote = UNNotification(value: DeliveredNotificationValue(request: NotificationRequestValue(identifier: "r", content: NotificationContentValue(), trigger: .push), date: Date()))
        let (updatingError, isRemote) = inventoryOfProvidersAndTriggers(remote)
        #expect(isRemote)
        #expect((updatingError as? UNError)?.code == .contentProvidingObjectNotAllowed)
        withExtendedLifetime(delegate) {}
        await system.shutdown()
    }
}
