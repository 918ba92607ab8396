import Foundation
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting

@Suite("Durability and recovery")
struct DurabilityTests {
    @Test("pending, delivered, categories and settings survive a restart; missed triggers fire once")
    func restartRecovers() async throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-durable-")
        let start = Date(timeIntervalSince1970: 1_795_348_800)
        let system = try await NotificationTestSystem.start(storage: .sqlite, clock: TestWallClock(now: start), directory: directory)
        let app = try await system.connect("com.example.durable", state: .background)
        _ = await app.request(.requestAuthorization([.alert]))
        _ = await app.request(.setCategories([CategoryValue(identifier: "c", actions: [ActionValue(identifier: "ok", title: "OK")])]))
        _ = await app.add("delivered", trigger: nil)
        _ = await app.add("ten", trigger: .timeInterval(seconds: 10, repeats: false))
        _ = await app.add("twenty", trigger: .timeInterval(seconds: 20, repeats: false))
        _ = await app.add("minutely", trigger: .timeInterval(seconds: 60, repeats: true))
        _ = await app.add("later", trigger: .timeInterval(seconds: 10_000, repeats: false))
        await system.settle()
        #expect(system.presenter.presentedIdentifiers == ["delivered"])
        await system.shutdown(removeFiles: false)

        // The daemon was down for 200 s.
        let restarted = try await NotificationTestSystem.start(storage: .sqlite, clock: TestWallClock(now: start.addingTimeInterval(200)), directory: directory)
        await restarted.settle()
        #expect(Set(restarted.presenter.presentedIdentifiers) == ["ten", "twenty", "minutely"], "each missed trigger fires once")
        let app2 = try await restarted.connect("com.example.durable", state: .background)
        #expect(await app2.pendingIdentifiers() == ["minutely", "later"])
        #expect(Set(await app2.deliveredIdentifiers()) == ["delivered", "ten", "twenty", "minutely"])
        #expect(await app2.request(.getCategories) == .categories([CategoryValue(identifier: "c", actions: [ActionValue(identifier: "ok", title: "OK")])]))
        guard case .settings(let settings) = await app2.request(.getSettings) else { Issue.record("no settings"); return }
        #expect(settings.authorizationStatus == .authorized)

        // The repeating request goes on at its interval from the fire it missed.
        restarted.presenter.reset()
        await restarted.advance(by: 39)
        #expect(restarted.presenter.presented.isEmpty)
        await restarted.advance(by: 1)
        #expect(restarted.presenter.presentedIdentifiers == ["minutely"])
        await restarted.shutdown()
    }
}

@Suite("Calendar and location triggers")
struct TriggerTests {
    @Test("a calendar trigger fires at the next matching date and repeats daily")
    func calendarDaily() async throws {
        // 2026-11-22 12:00 UTC; fire daily at 08:30 UTC.
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.cal", state: .background)
        _ = await app.request(.requestAuthorization([.alert]))
        var components = DateComponents()
        components.hour = 8
        components.minute = 30
        #expect(await app.add("wake", trigger: .calendar(components, repeats: true)).isSuccess)
        await system.advance(by: 20 * 3600 + 29 * 60)   // 08:29 the next day
        #expect(system.presenter.presented.isEmpty)
        await system.advance(by: 60)
        #expect(system.presenter.presentedIdentifiers == ["wake"])
        await system.advance(by: 24 * 3600)
        #expect(system.presenter.presentedIdentifiers == ["wake", "wake"])
        #expect(await app.pendingIdentifiers() == ["wake"])
        await system.shutdown()
    }

    @Test("calendar components that never match are notificationInvalidNoDate")
    func calendarNoDate() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.nodate")
        _ = await app.request(.requestAuthorization([.alert]))
        var past = DateComponents()
        past.year = 2001
        past.month = 1
        past.day = 1
        #expect(await app.add("never", trigger: .calendar(past, repeats: false)).failureCode == .notificationInvalidNoDate)
        await system.shutdown()
    }

    @Test("a location trigger fires on entry, not on the first fix inside, and repeats if asked")
    func locationEntry() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.geo", state: .background)
        _ = await app.request(.requestAuthorization([.alert]))
        // Marienplatz, Munich, 200 m.
        let region = CircularRegionValue(identifier: "center", latitude: 48.1374, longitude: 11.5755, radius: 200, notifyOnEntry: true, notifyOnExit: false)
        #expect(await app.add("arrive", trigger: .location(region, repeats: true)).isSuccess)
        #expect(await app.add("once", trigger: .location(CircularRegionValue(identifier: "exit", latitude: 48.1374, longitude: 11.5755, radius: 200, notifyOnEntry: false, notifyOnExit: true), repeats: false)).isSuccess)
        await system.engine.locationChanged(latitude: 48.1500, longitude: 11.5800)  // 1.4 km away
        #expect(system.presenter.presented.isEmpty)
        await system.engine.locationChanged(latitude: 48.1375, longitude: 11.5756)  // enter
        #expect(system.presenter.presentedIdentifiers == ["arrive"])
        await system.engine.locationChanged(latitude: 48.1500, longitude: 11.5800)  // leave
        #expect(system.presenter.presentedIdentifiers == ["arrive", "once"])
        await system.engine.locationChanged(latitude: 48.1375, longitude: 11.5756)  // enter again
        #expect(system.presenter.presentedIdentifiers == ["arrive", "once", "arrive"])
        #expect(await app.pendingIdentifiers() == ["arrive"], "the repeating trigger stays, the other is gone")
        await system.shutdown()
    }

    @Test("bad regions are rejected")
    func badRegion() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.badgeo")
        _ = await app.request(.requestAuthorization([.alert]))
        let zero = CircularRegionValue(identifier: "z", latitude: 0, longitude: 0, radius: 0)
        #expect(await app.add("z", trigger: .location(zero, repeats: false)).failureCode == .invalidTrigger)
        let off = CircularRegionValue(identifier: "o", latitude: 95, longitude: 0, radius: 10)
        #expect(await app.add("o", trigger: .location(off, repeats: false)).failureCode == .invalidTrigger)
        await system.shutdown()
    }
}
