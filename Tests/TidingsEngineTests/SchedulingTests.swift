import Foundation
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting

@Suite("Scheduling local notifications")
struct SchedulingTests {
    @Test("a time-interval request fires once at its date, then leaves the pending set", arguments: [NotificationTestSystem.Storage.memory, .sqlite])
    func timeIntervalFires(storage: NotificationTestSystem.Storage) async throws {
        let system = try await NotificationTestSystem.start(storage: storage)
        let app = try await system.connect("com.example.timer")
        _ = await app.request(.requestAuthorization([.alert, .sound, .badge]))
        #expect(await app.add("tea", trigger: .timeInterval(seconds: 300, repeats: false)).isSuccess)
        #expect(await app.pendingIdentifiers() == ["tea"])

        await system.advance(by: 299)
        #expect(system.presenter.presented.isEmpty)
        await system.advance(by: 1)
        #expect(system.presenter.presentedIdentifiers == ["tea"])
        #expect(await app.pendingIdentifiers() == [])
        #expect(await app.deliveredIdentifiers() == ["tea"])
        await system.shutdown()
    }

    @Test("a nil trigger delivers right away")
    func nilTriggerDeliversNow() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.now")
        _ = await app.request(.requestAuthorization([.alert]))
        #expect(await app.add("now", trigger: nil).isSuccess)
        await system.settle()
        #expect(system.presenter.presentedIdentifiers == ["now"])
        await system.shutdown()
    }

    @Test("invalid time intervals are errors, not crashes, and nothing is scheduled")
    func invalidIntervals() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.bad")
        _ = await app.request(.requestAuthorization([.alert]))
        #expect(await app.add("zero", trigger: .timeInterval(seconds: 0, repeats: false)).failureCode == .invalidTrigger)
        #expect(await app.add("negative", trigger: .timeInterval(seconds: -5, repeats: false)).failureCode == .invalidTrigger)
        #expect(await app.add("fast", trigger: .timeInterval(seconds: 59, repeats: true)).failureCode == .invalidTrigger)
        #expect(await app.add("ok", trigger: .timeInterval(seconds: 60, repeats: true)).isSuccess)
        #expect(await app.pendingIdentifiers() == ["ok"])
        await system.shutdown()
    }

    @Test("a repeating request stays pending and fires every interval")
    func repeatingInterval() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite)
        let app = try await system.connect("com.example.repeat")
        _ = await app.request(.requestAuthorization([.alert]))
        #expect(await app.add("tick", trigger: .timeInterval(seconds: 60, repeats: true)).isSuccess)
        for round in 1...3 {
            await system.advance(by: 60)
            #expect(system.presenter.presented.count == round)
        }
        #expect(await app.pendingIdentifiers() == ["tick"])
        await system.shutdown()
    }

    @Test("adding with a pending identifier replaces the pending request")
    func replacePending() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite)
        let app = try await system.connect("com.example.replace")
        _ = await app.request(.requestAuthorization([.alert]))
        _ = await app.add("r", title: "old", trigger: .timeInterval(seconds: 100, repeats: false))
        _ = await app.add("r", title: "new", trigger: .timeInterval(seconds: 200, repeats: false))
        #expect(await app.pendingIdentifiers() == ["r"])
        await system.advance(by: 100)
        #expect(system.presenter.presented.isEmpty, "the replaced request must not fire at its old date")
        await system.advance(by: 100)
        #expect(system.presenter.presented.map(\.notification.request.content.title) == ["new"])
        await system.shutdown()
    }

    @Test("adding with a delivered identifier replaces the delivered notification in place")
    func replaceDelivered() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite)
        let app = try await system.connect("com.example.update")
        _ = await app.request(.requestAuthorization([.alert]))
        _ = await app.add("a", title: "first", trigger: nil)
        _ = await app.add("b", title: "other", trigger: nil)
        await system.settle()
        _ = await app.add("a", title: "second", trigger: nil)
        await system.settle()
        guard case .notifications(let delivered) = await app.request(.getDelivered) else { Issue.record("no list"); return }
        #expect(delivered.map(\.request.identifier) == ["a", "b"])
        #expect(delivered.first?.request.content.title == "second")
        await system.shutdown()
    }

    @Test("remove pending and delivered by identifier and all")
    func removals() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.remove")
        _ = await app.request(.requestAuthorization([.alert]))
        for id in ["p1", "p2", "p3"] { _ = await app.add(id, trigger: .timeInterval(seconds: 100, repeats: false)) }
        for id in ["d1", "d2", "d3"] { _ = await app.add(id, trigger: nil) }
        await system.settle()
        app.send(.removePending(["p1", "unknown"]))
        app.send(.removeDelivered(["d2"]))
        #expect(await app.pendingIdentifiers() == ["p2", "p3"])
        #expect(await app.deliveredIdentifiers() == ["d1", "d3"])
        app.send(.removeAllPending)
        app.send(.removeAllDelivered)
        #expect(await app.pendingIdentifiers() == [])
        #expect(await app.deliveredIdentifiers() == [])
        await system.advance(by: 100)
        #expect(system.presenter.presentedIdentifiers == ["d1", "d2", "d3"], "removed requests never fire")
        await system.shutdown()
    }

    @Test("iOS-compatible mode keeps the 64 most recently added requests per app")
    func iOSPendingLimit() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite, pendingLimit: EngineConfiguration.iOSPendingLimit)
        let app = try await system.connect("com.example.limit")
        _ = await app.request(.requestAuthorization([.alert]))
        for i in 0..<70 { _ = await app.add("n\(i)", trigger: .timeInterval(seconds: 1000, repeats: false)) }
        let pending = await app.pendingIdentifiers()
        #expect(pending.count == 64)
        #expect(pending.first == "n6")
        #expect(pending.last == "n69")
        await system.shutdown()
    }

    @Test("without a limit an app keeps thousands pending")
    func noLimitByDefault() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite)
        let app = try await system.connect("com.example.many")
        _ = await app.request(.requestAuthorization([.alert]))
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<2_000 {
                group.addTask { _ = await app.add("n\(i)", trigger: .timeInterval(seconds: Double(1000 + i), repeats: false)) }
            }
        }
        #expect(await app.pendingIdentifiers().count == 2_000)
        #expect(await system.engine.scheduledCount == 2_000)
        await system.shutdown()
    }

    @Test("badge: set, negative is badgeInputInvalid, content badge applies on delivery")
    func badge() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.badge")
        _ = await app.request(.requestAuthorization([.alert, .badge]))
        #expect(await app.request(.setBadge(3)).isSuccess)
        #expect(try await system.engine.badge("com.example.badge") == 3)
        #expect(await app.request(.setBadge(-1)).failureCode == .badgeInputInvalid)
        #expect(try await system.engine.badge("com.example.badge") == 3)
        _ = await app.add("b", trigger: nil, badge: 7)
        await system.settle()
        #expect(try await system.engine.badge("com.example.badge") == 7)
        await system.shutdown()
    }
}
