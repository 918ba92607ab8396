import Foundation
import Testing
import TidingsCore
import TidingsSQLite
import TidingsStorage

/// The record of what fires left to present (at-least-once banners), in every backend.
@Suite("DeviceStore: presentations left by a crash")
struct PresentingConformanceTests {
    let bundle = "com.example.presenting"
    let t0 = Date(timeIntervalSinceReferenceDate: 800_000_000.5)

    func request(_ identifier: String) -> NotificationRequestValue {
        var content = NotificationContentValue()
        content.title = identifier
        return NotificationRequestValue(identifier: identifier, content: content, trigger: .timeInterval(seconds: 60, repeats: false))
    }

    @Test("a fire with flags records one entry to present, with its date and flags; presented removes it", arguments: DeviceBackend.allCases)
    func recordAndMark(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        let shown = try await store.addPending(request("shown"), for: bundle, nextFire: t0, limit: nil).value
        let quiet = try await store.addPending(request("quiet"), for: bundle, nextFire: t0, limit: nil).value
        let banner = try await store.addPending(request("banner"), for: bundle, nextFire: t0, limit: nil).value
        let first = try #require(try await store.fireApplied(key: shown.key, at: t0, nextFire: nil, keepPending: false, deliver: true, present: 3).durable.value)
        let none = try #require(try await store.fireApplied(key: quiet.key, at: t0, nextFire: nil, keepPending: false, deliver: true, present: 0).durable.value)
        // Banner only (not listed): still recorded, though the delivered list does not have it.
        let due = try #require(try await store.fireDue(key: banner.key, due: t0, at: t0, decide: { _ in FireWrite(nextFire: nil, keepPending: false, deliver: false, present: 1) }).durable.value)
        #expect(none.presentation == nil)
        let firstID = try #require(first.presentation)
        let bannerID = try #require(due.outcome?.presentation)
        let left = try await store.unpresented().value
        #expect(left.map(\.id) == [firstID, bannerID])
        #expect(left.map(\.notification.request.identifier) == ["shown", "banner"])
        #expect(left.map(\.present) == [3, 1])
        #expect(left.first?.notification.date == t0)
        #expect(left.first?.bundleIdentifier == bundle)

        try await store.presented([firstID]).value
        #expect(try await store.unpresented().value.map(\.id) == [bannerID])
        try await store.presented([bannerID, 9_999]).value
        #expect(try await store.unpresented().value.isEmpty)
    }

    @Test("removing the delivered notification or the app removes what was left to present", arguments: DeviceBackend.allCases)
    func removalsTakeEntries(_ backend: DeviceBackend) async throws {
        let store = try backend.make()
        for identifier in ["a", "b", "c"] {
            let added = try await store.addPending(request(identifier), for: bundle, nextFire: t0, limit: nil).value
            _ = try await store.fireApplied(key: added.key, at: t0, nextFire: nil, keepPending: false, deliver: true, present: 3).durable.value
        }
        _ = try await store.removeDelivered(["a"], for: bundle).value
        #expect(try await store.unpresented().value.map(\.notification.request.identifier) == ["b", "c"])
        _ = try await store.removeAllDelivered(bundle).value
        #expect(try await store.unpresented().value.isEmpty)
        let added = try await store.addPending(request("d"), for: bundle, nextFire: t0, limit: nil).value
        _ = try await store.fireApplied(key: added.key, at: t0, nextFire: nil, keepPending: false, deliver: false, present: 1).durable.value
        _ = try await store.removeApp(bundle).value
        #expect(try await store.unpresented().value.isEmpty)
    }
}
