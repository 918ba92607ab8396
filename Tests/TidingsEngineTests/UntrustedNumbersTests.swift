import Foundation
import Logging
import Synchronization
import Testing
import TidingsCore
import TidingsEngine
import TidingsSQLite
import TidingsStorage
import TidingsTesting

/// A clock that remembers every deadline it was asked to sleep until, and sleeps on another.
final class RecordingClock<Inner: WallClock>: WallClock {
    let inner: Inner
    private let deadlines = Mutex<[Date]>([])

    init(_ inner: Inner) { self.inner = inner }

    var now: Date { inner.now }
    var requested: [Date] { deadlines.withLock { $0 } }

    func sleep(until deadline: Date) async throws {
        deadlines.withLock { $0.append(deadline) }
        try await inner.sleep(until: deadline)
    }
}

/// An engine over a store and clock of the test's choosing, and its scheduler task.
struct EngineUnderTest {
    let engine: NotificationEngine
    let runner: Task<Void, Never>

    static func start(clock: any WallClock, store: any DeviceStore, directory: URL, presenters: [any Presenter] = [RecordingPresenter()]) async throws -> EngineUnderTest {
        var logger = Logger(label: "tidings.test")
        logger.logLevel = .critical
        let configuration = EngineConfiguration(
            clock: clock, store: store, attachments: AttachmentStore(root: directory.appendingPathComponent("attachments")),
            consent: FixedConsent.autoGrant, presenters: presenters, timeZone: TimeZone(identifier: "UTC")!, logger: logger)
        let engine = NotificationEngine(configuration: configuration)
        let runner = Task { _ = try? await engine.run() }
        return EngineUnderTest(engine: engine, runner: runner)
    }

    func stop() async {
        runner.cancel()
        await runner.value
    }
}

@Suite("Untrusted numbers in triggers, content and the clock")
struct UntrustedNumbersTests {
    static let utc = TimeZone(identifier: "UTC")!

    static func date(_ year: Int, _ month: Int, _ day: Int) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = utc
        return calendar.date(from: DateComponents(year: year, month: month, day: day))!
    }

    // MARK: Sleeping

    @Test("the system clock sleeps towards a deadline centuries ahead (or infinitely far) without trapping")
    func systemClockFarDeadline() async throws {
        for deadline in [Date().addingTimeInterval(1e10), Date().addingTimeInterval(1e300), Date(timeIntervalSinceReferenceDate: .infinity)] {
            // Cancelled at once: the conversion to a Duration happens before the sleep looks at
            // cancellation, and it used to trap (Double → Int64 nanoseconds) for anything past 292 years.
            let sleeper = Task { try await SystemWallClock().sleep(until: deadline) }
            sleeper.cancel()
            await #expect(throws: CancellationError.self) { try await sleeper.value }
        }
        #expect(SystemWallClock.step(until: Date(timeIntervalSinceReferenceDate: .infinity), now: Date()) == .seconds(SystemWallClock.maximumStep))
        #expect(SystemWallClock.step(until: Date(timeIntervalSinceReferenceDate: .nan), now: Date()) == nil, "no date is no sleep")
        let now = Date()
        #expect(SystemWallClock.step(until: now.addingTimeInterval(-1e300), now: now) == nil)
        #expect(SystemWallClock.step(until: now.addingTimeInterval(0.25), now: now) == .milliseconds(250))
    }

    @Test("the scheduler never sleeps longer than maximumSleep, however far the next fire date")
    func schedulerSleepsInSteps() async throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-sleep-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = RecordingClock(TestWallClock())
        let store = InMemoryDeviceStore()
        let start = clock.now
        let presenter = RecordingPresenter()
        let system = try await EngineUnderTest.start(clock: clock, store: store, directory: directory, presenters: [presenter])
        let app = try await connect(system.engine, "com.example.far", directory: directory)
        _ = await app.request(.requestAuthorization([.alert]))
        #expect(await app.add("far", trigger: .timeInterval(seconds: 1e10, repeats: false)).isSuccess)
        await system.engine.settled(through: clock.now)
        #expect(await eventually { clock.requested.count >= 1 })
        let limit = EngineConfiguration.defaultMaximumSleep
        #expect(clock.requested.allSatisfy { $0 <= start.addingTimeInterval(limit) }, "\(clock.requested.map { $0.timeIntervalSince(start) })")

        // Each step wakes, looks at the queue and sleeps again; the request fires at its date.
        clock.inner.advance(by: limit)
        #expect(await eventually { clock.requested.count >= 2 })
        #expect(presenter.presented.isEmpty)
        clock.inner.advance(to: start.addingTimeInterval(1e10))
        await system.engine.settled(through: clock.now)
        #expect(presenter.presentedIdentifiers == ["far"])
        await system.stop()
    }

    @Test("requests centuries ahead survive a restart on the system clock, stay pending with their dates, and fire when due")
    func farFutureSurvivesRestart() async throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-far-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let start = Date(timeIntervalSince1970: 1_795_348_800)
        let first = try await NotificationTestSystem.start(storage: .sqlite, clock: TestWallClock(now: start), directory: directory)
        let app = try await first.connect("com.example.centuries", state: .background)
        _ = await app.request(.requestAuthorization([.alert]))
        #expect(await app.add("interval", trigger: .timeInterval(seconds: 1e10, repeats: false)).isSuccess)
        #expect(await app.add("y2400", trigger: .calendar(DateComponents(year: 2400, month: 1, day: 1), repeats: false)).isSuccess)
        #expect(await app.add("huge", trigger: .timeInterval(seconds: .greatestFiniteMagnitude, repeats: true)).isSuccess)
        await first.shutdown(removeFiles: false)

        // The daemon starts again on the real clock: it used to trap in its first sleep, and
        // again at every start, since the request is stored.
        let path = directory.appendingPathComponent("device.sqlite").path
        let clock = RecordingClock(SystemWallClock())
        let store = try SQLiteDeviceStore(path: path)
        let restarted = try await EngineUnderTest.start(clock: clock, store: store, directory: directory)
        #expect(await eventually { clock.requested.count >= 1 })
        await restarted.stop()
        let records = try await store.pendingRecords("com.example.centuries").value
        #expect(records.map(\.request.identifier) == ["interval", "y2400", "huge"])
        #expect(records[0].nextFire == start.addingTimeInterval(1e10))
        #expect(records[1].nextFire == Self.date(2400, 1, 1))
        #expect(records[2].nextFire == start.addingTimeInterval(.greatestFiniteMagnitude))

        // On a clock that reaches those dates, they fire (the repeating one never comes).
        let later = try await NotificationTestSystem.start(storage: .sqlite, clock: TestWallClock(now: start), directory: directory)
        await later.advance(by: 1e10 - 1)
        #expect(later.presenter.presented.isEmpty)
        await later.advance(by: 1)
        #expect(later.presenter.presentedIdentifiers == ["interval"])
        later.clock.advance(to: Self.date(2400, 1, 1))
        await later.settle()
        #expect(later.presenter.presentedIdentifiers == ["interval", "y2400"])
        let again = try await later.connect("com.example.centuries", state: .background)
        #expect(await again.pendingIdentifiers() == ["huge"])
        await later.shutdown()
    }

    // MARK: Triggers at their extremes

    @Test("time intervals at every extreme: invalid ones are invalidTrigger, huge ones are kept with the right date")
    func intervalExtremes() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.intervals")
        _ = await app.request(.requestAuthorization([.alert]))
        let invalid: [(Double, Bool)] = [
            (.nan, false), (.infinity, false), (-.infinity, false), (-1, false), (0, false), (-0.0, false),
            (-.greatestFiniteMagnitude, false), (59.999, true), (.leastNonzeroMagnitude, true), (.nan, true), (.infinity, true),
        ]
        for (seconds, repeats) in invalid {
            #expect(await app.add("bad", trigger: .timeInterval(seconds: seconds, repeats: repeats)).failureCode == .invalidTrigger, "\(seconds) repeats \(repeats)")
        }
        #expect(await app.pendingIdentifiers() == [])
        let valid: [(String, Double, Bool)] = [
            ("tiny", .leastNonzeroMagnitude, false), ("minute", 60, true), ("far", 1e10, false), ("max", .greatestFiniteMagnitude, false),
        ]
        for (identifier, seconds, repeats) in valid {
            #expect(await app.add(identifier, trigger: .timeInterval(seconds: seconds, repeats: repeats)).isSuccess, "\(seconds)")
        }
        guard case .pendingRequests(let pending) = await app.request(.getPendingScheduled) else { Issue.record("no pending"); return }
        let dates = Dictionary(uniqueKeysWithValues: pending.map { ($0.request.identifier, $0.nextTriggerDate) })
        let now = system.clock.now
        #expect(dates["minute"] == now.addingTimeInterval(60))
        #expect(dates["far"] == now.addingTimeInterval(1e10))
        #expect(dates["max"] == now.addingTimeInterval(.greatestFiniteMagnitude))
        await system.settle()
        #expect(system.presenter.presentedIdentifiers == ["tiny"], "an interval below the clock's resolution fires at once")
        await system.shutdown()
    }

    @Test("calendar components at every extreme are refused at once, never searched without end")
    func calendarExtremes() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.calendar")
        _ = await app.request(.requestAuthorization([.alert]))
        let fields: [WritableKeyPath<DateComponents, Int?>] = [
            \.era, \.year, \.month, \.day, \.hour, \.minute, \.second, \.nanosecond, \.weekday,
            \.weekdayOrdinal, \.quarter, \.weekOfMonth, \.weekOfYear, \.yearForWeekOfYear,
        ]
        for field in fields {
            for value in [Int.min, -1, 1_000_000_000] {
                var components = DateComponents()
                components[keyPath: field] = value
                #expect(await app.add("bad", trigger: .calendar(components, repeats: false)).failureCode == .invalidTrigger, "\(field) = \(value)")
            }
            // Int.max is Foundation's "undefined" (NSDateComponentUndefined): nothing is set, no date.
            var undefined = DateComponents()
            undefined[keyPath: field] = .max
            #expect(await app.add("bad", trigger: .calendar(undefined, repeats: false)).failureCode == .notificationInvalidNoDate, "\(field) = Int.max")
        }
        // Foundation's own search never ends for a 6th or 7th weekday of a month.
        for ordinal in [6, 7, 0, -1] {
            #expect(await app.add("ordinal", trigger: .calendar(DateComponents(weekday: 2, weekdayOrdinal: ordinal), repeats: true)).failureCode == .invalidTrigger)
        }
        // Nor for week 0 of a month in the ISO 8601 calendar (found by FuzzTrigger).
        var iso = DateComponents(weekday: 1, weekOfMonth: 0)
        iso.calendar = Calendar(identifier: .iso8601)
        #expect(await app.add("week0", trigger: .calendar(iso, repeats: true)).failureCode == .invalidTrigger)
        // In range but never matching: answered at once, never scheduled.
        for never in [DateComponents(month: 2, day: 30), DateComponents(month: 4, day: 31), DateComponents(year: 2100, month: 2, day: 29),
                      DateComponents(weekOfYear: 53, yearForWeekOfYear: 2027), DateComponents(hour: 12, second: 60),
                      DateComponents(year: 2020, nanosecond: 5)] {
            let started = ContinuousClock.now
            #expect(await app.add("never", trigger: .calendar(never, repeats: true)).failureCode == .notificationInvalidNoDate, "\(never)")
            #expect(ContinuousClock.now - started < .seconds(5), "\(never) took \(ContinuousClock.now - started)")
        }
        #expect(await app.pendingIdentifiers() == [])
        // The edges that do exist are kept.
        #expect(await app.add("fifth", trigger: .calendar(DateComponents(weekday: 2, weekdayOrdinal: 5), repeats: true)).isSuccess)
        #expect(await app.add("leap", trigger: .calendar(DateComponents(month: 2, day: 29, hour: 23, minute: 59, second: 59), repeats: true)).isSuccess)
        #expect(await app.add("last", trigger: .calendar(DateComponents(year: CalendarMatching.maximumYear, month: 12, day: 31), repeats: false)).isSuccess)
        #expect(await app.add("past", trigger: .calendar(DateComponents(year: CalendarMatching.maximumYear + 1), repeats: false)).failureCode == .invalidTrigger)
        #expect(await app.pendingIdentifiers() == ["fifth", "leap", "last"])
        await system.shutdown()
    }

    @Test("regions with NaN, infinite or huge values: refused or harmless; positions off the globe are ignored")
    func locationExtremes() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.regions", state: .background)
        _ = await app.request(.requestAuthorization([.alert]))
        let bad: [CircularRegionValue] = [
            .init(identifier: "a", latitude: .nan, longitude: 0, radius: 10),
            .init(identifier: "b", latitude: 0, longitude: .infinity, radius: 10),
            .init(identifier: "c", latitude: 0, longitude: 0, radius: .nan),
            .init(identifier: "d", latitude: 0, longitude: 0, radius: .infinity),
            .init(identifier: "e", latitude: 0, longitude: 0, radius: -.greatestFiniteMagnitude),
            .init(identifier: "f", latitude: -90.000001, longitude: 0, radius: 10),
        ]
        for region in bad {
            #expect(await app.add(region.identifier, trigger: .location(region, repeats: false)).failureCode == .invalidTrigger, "\(region)")
        }
        let everywhere = CircularRegionValue(identifier: "everywhere", latitude: 0, longitude: 0, radius: .greatestFiniteMagnitude, notifyOnEntry: false, notifyOnExit: true)
        #expect(await app.add("everywhere", trigger: .location(everywhere, repeats: false)).isSuccess)
        await system.engine.locationChanged(latitude: 10, longitude: 10)
        // A NaN position used to count as outside every region: an exit that never happened.
        await system.engine.locationChanged(latitude: .nan, longitude: 10)
        await system.engine.locationChanged(latitude: 10, longitude: .infinity)
        await system.engine.locationChanged(latitude: 91, longitude: 10)
        #expect(system.presenter.presented.isEmpty)
        #expect(await app.pendingIdentifiers() == ["everywhere"])
        await system.shutdown()
    }

    // MARK: Content numbers

    @Test("a negative badge is badgeInputInvalid; relevanceScore and volume are clamped, NaN never stored")
    func contentNumbers() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite)
        let app = try await system.connect("com.example.numbers", state: .background)
        _ = await app.request(.requestAuthorization([.alert, .badge, .sound]))
        #expect(await app.add("negative", trigger: nil, badge: -1).failureCode == .badgeInputInvalid)
        #expect(await app.add("min", trigger: nil, badge: .min).failureCode == .badgeInputInvalid)
        #expect(await app.add("max", trigger: .timeInterval(seconds: 60, repeats: false), badge: .max).isSuccess)

        let scores: [(String, Double, Double)] = [("nan", .nan, 0), ("inf", .infinity, 1), ("-inf", -.infinity, 0), ("big", 5, 1), ("half", 0.5, 0.5)]
        for (identifier, score, _) in scores {
            var content = NotificationContentValue()
            content.title = identifier
            content.relevanceScore = score
            content.sound = SoundValue(kind: .defaultCritical, volume: score.isNaN ? .nan : Float(score))
            content.summaryArgumentCount = .min
            #expect(await app.request(.add(NotificationRequestValue(identifier: identifier, content: content, trigger: .timeInterval(seconds: 60, repeats: false)))).isSuccess)
        }
        guard case .requests(let pending) = await app.request(.getPending) else { Issue.record("no pending"); return }
        let byID = Dictionary(uniqueKeysWithValues: pending.map { ($0.identifier, $0.content) })
        for (identifier, _, expected) in scores {
            #expect(byID[identifier]?.relevanceScore == expected, "\(identifier)")
            #expect(byID[identifier]?.summaryArgumentCount == 0)
            let volume = byID[identifier]?.sound?.volume
            #expect(volume == nil || (0...1).contains(volume!), "\(identifier): \(String(describing: volume))")
        }
        await system.advance(by: 60)
        #expect(try await system.engine.badge("com.example.numbers") == .max)
        await system.shutdown()
    }

    func connect(_ engine: NotificationEngine, _ bundle: String, directory: URL) async throws -> InProcessTransport {
        try await EngineUnderTest.connect(engine, bundle, directory: directory)
    }
}

extension EngineUnderTest {
    /// Installs an app and connects it as a background process.
    static func connect(_ engine: NotificationEngine, _ bundle: String, directory: URL) async throws -> InProcessTransport {
        let appDirectory = directory.appendingPathComponent("apps/\(bundle)")
        try FileManager.default.createDirectory(at: appDirectory, withIntermediateDirectories: true)
        let record = AppRecord(bundleIdentifier: bundle, displayName: bundle, executable: "/usr/bin/true", directory: appDirectory.path, installedAt: Date())
        try await engine.install(record)
        return await InProcessTransport.connect(engine: engine, app: record, state: .background)
    }
}
