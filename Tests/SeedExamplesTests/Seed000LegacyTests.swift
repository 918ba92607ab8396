import Foundation
import Testing
import TidingsCore
import TidingsTesting
@_spi(Tidings) import TidingsApplication
@_spi(Tidings) import UserNotifications

/// Runs seed 000's pre-iOS 10 code (Seed000LegacyExamples.swift) on an in-process engine:
/// it asks for the same authorization and schedules the request UserNotifications would.
@MainActor
@Suite("Seed 000, before iOS 10", .serialized, .timeLimit(.minutes(1)))
struct Seed000LegacyTests {
    @Test func registersAndSchedulesThroughTheSameEngine() async throws {
        let system = try await NotificationTestSystem.start()
        let center = try await system.center(for: "com.onevcat.legacy")
        let application = UIApplication(transport: try await system.connect("com.onevcat.legacy"), notificationCenter: center)
        seed000_legacyRegister(application)
        #expect(await eventually { await center.notificationSettings().authorizationStatus == .authorized })
        let settings = await center.notificationSettings()
        #expect(settings.alertSetting == .enabled && settings.soundSetting == .enabled && settings.badgeSetting == .enabled)

        let before = Date()
        seed000_legacySchedule(application)
        let request = try #require(await center.pendingNotificationRequests().first)
        #expect(request.content.body == "重大新闻：xxxx xxxx被调查了....")
        #expect(request.content.sound == UNNotificationSound(named: UNNotificationSoundName("sound.wav")))
        #expect(request.content.badge == 5)
        #expect(request.content.userInfo["title"] as? String == "重大新闻")
        // A fire date with a time zone is wall-clock time: floating calendar components, 5 s ahead.
        let trigger = try #require(request.trigger as? UNCalendarNotificationTrigger)
        #expect(trigger.dateComponents.timeZone == nil && !trigger.repeats)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = .current
        let fire = try #require(calendar.date(from: trigger.dateComponents))
        #expect(abs(fire.timeIntervalSince(before) - 5) < 2)
        // Read back as the post's object.
        let scheduled = try #require(application.scheduledLocalNotifications?.first)
        #expect(scheduled.alertBody == request.content.body && scheduled.soundName == "sound.wav" && scheduled.applicationIconBadgeNumber == 5)
        await system.shutdown()
    }
}
