import Foundation
import DequeModule
import HeapModule
import TidingsCore
import TidingsStorage

extension NotificationEngine {
    /// Runs the scheduler until the task is cancelled: recovers the schedule from the store
    /// (requests whose time passed while the daemon was down fire once, now), then fires
    /// each request at its date on the injected clock.
    public func run() async throws {
        try await recover()
        await presentUnpresented()
        let (deliveries, sink) = AsyncStream<@Sendable () async -> Void>.makeStream()
        self.deliveries = sink
        defer {
            sink.finish()
            self.deliveries = nil
        }
        await withDiscardingTaskGroup { group in
            group.addTask {
                // Deliveries run apart from the loop, so a slow delegate delays only its own notification.
                await withDiscardingTaskGroup { inner in
                    for await delivery in deliveries {
                        inner.addTask { await delivery() }
                    }
                }
            }
            await self.loop()
            sink.finish()
        }
    }

    /// Loads the schedule and the location watches from the store.
    public func recover() async throws {
        let entries = try await store.schedule().value
        heap = Heap(entries.map { FireItem(date: $0.nextFire, key: $0.key) })
        for record in try await store.locationPending().value {
            if case .location(let region, _)? = record.request.trigger {
                regions[record.key] = RegionWatch(bundleIdentifier: record.bundleIdentifier, region: region, inside: nil)
            }
        }
    }

    /// The number of requests in the fire queue (a replaced or removed request may still
    /// count until its date passes).
    public var scheduledCount: Int { heap.count }

    func loop() async {
        while !Task.isCancelled {
            poked = false
            fireDue()
            if poked { continue }
            // Never one sleep to a date centuries ahead: wake within `maximumSleep` and look again.
            let deadline = heap.min.map { Self.sleepDeadline(for: $0.date, now: clock.now, maximumSleep: configuration.maximumSleep) }
            await withTaskGroup(of: Void.self) { group in
                if let deadline {
                    group.addTask { [clock] in try? await clock.sleep(until: deadline) }
                }
                group.addTask { await self.park() }
                await group.next()
                self.unpark()
                group.cancelAll()
            }
        }
        unpark()
    }

    /// Where the scheduler's next sleep ends: the fire date, or `maximumSleep` from now if
    /// that comes first (a non-finite or non-positive `maximumSleep` counts as one hour).
    static func sleepDeadline(for date: Date, now: Date, maximumSleep: TimeInterval) -> Date {
        let step = maximumSleep.isFinite && maximumSleep > 0 ? maximumSleep : EngineConfiguration.defaultMaximumSleep
        return min(date, now.addingTimeInterval(step))
    }

    func park() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if poked || Task.isCancelled {
                    continuation.resume()
                } else {
                    wake = continuation
                }
            }
        } onCancel: {
            // Registration and this wake-up both run on the actor, in either order.
            Task { await self.unpark() }
        }
    }

    func unpark() {
        wake?.resume()
        wake = nil
    }

    /// Wakes the loop: something earlier than its deadline was scheduled.
    func poke() {
        poked = true
        unpark()
    }

    func schedule(_ item: FireItem) {
        let earliest = heap.min?.date
        heap.insert(item)
        if earliest == nil || item.date < earliest! { poke() }
    }

    /// Takes what is due off the queue and fires it through the store, one operation per
    /// entry: the store reads the request (is it still pending, for this date?) and, where no
    /// delegate needs asking and the person's settings are at hand, fires it right there
    /// (docs/architecture.md, "Firing"). The operations run on the store's writer in the
    /// order submitted, so their answers reach `firedInbox` in firing order.
    func fireDue() {
        let now = clock.now
        if let first = heap.min, first.date <= now {
            // Apps whose delegate is asked, or whose earlier notifications still wait, are
            // fired by the delivery path, in order.
            var waiting = Set(appDeliveries.keys)
            for session in sessions.values where session.state == .active && session.hasDelegate { waiting.insert(session.bundleIdentifier) }
            let asked = waiting
            let logger = logger
            let settings = settingsCache
            let timeZone = configuration.timeZone
            let decide: @Sendable (PendingRecord) -> FireWrite? = { record in
                guard !asked.contains(record.bundleIdentifier), let settings = settings[record.bundleIdentifier], let due = record.nextFire else { return nil }
                let presentation = Presentation(settings: settings, content: record.request.content)
                let next = record.request.trigger.flatMap { TriggerSchedule.nextFire($0, fired: due, now: now, timeZone: timeZone) }
                return FireWrite(nextFire: next, keepPending: next != nil, deliver: presentation.list, present: presentation.recordedFlags)
            }
            while let top = heap.min, top.date <= now {
                heap.removeMin()
                inFlight += 1
                let tickets = store.fireDue(key: top.key, due: top.date, at: now, decide: decide)
                tickets.applied.whenComplete { [self] result in
                    let due: DueFire?
                    switch result {
                    case .success(let found): due = found
                    case .failure(let error):
                        // It stays pending with a past date in the store and fires at the next start.
                        logger.error("could not fire a request", metadata: ["key": "\(top.key)", "error": "\(error)"])
                        due = nil
                    }
                    let entry = FiredEntry(item: top, now: now, due: due, settings: due.flatMap { settings[$0.record.bundleIdentifier] }, durable: tickets.durable)
                    if firedInbox.append(entry) { Task { await self.drainFiredInbox() } }
                }
            }
        }
        processedThrough = max(processedThrough, now)
        resumeSettled()
    }

    /// Shows what the store fired, unless its app has earlier notifications waiting; queues
    /// the rest behind its app's earlier ones. One drain at a time, so apps keep their order.
    func drainFiredInbox() async {
        while let entries = firedInbox.takeUnlessEmpty() {
            for entry in entries {
                guard let due = entry.due else {
                    finishedDelivery()
                    continue
                }
                let bundle = due.record.bundleIdentifier
                if appDeliveries[bundle] != nil {
                    appDeliveries[bundle]!.append(entry)
                } else if due.outcome != nil {
                    await showFired(entry)
                    finishedDelivery()
                } else {
                    appDeliveries[bundle] = [entry]
                    enqueueDelivery { [self] in await self.deliverFired(for: bundle) }
                }
            }
        }
    }

    /// Delivers an app's queued entries one after another until none is waiting.
    func deliverFired(for bundle: String) async {
        while let entry = appDeliveries[bundle]?.popFirst() {
            if entry.due?.outcome != nil {
                await showFired(entry)
            } else if let record = entry.due?.record {
                let trigger = record.request.trigger
                let next = trigger.flatMap { TriggerSchedule.nextFire($0, fired: entry.item.date, now: entry.now, timeZone: configuration.timeZone) }
                await deliver(record.request, bundle: bundle, date: entry.now, pendingKey: record.key, nextFire: next)
                if let next { schedule(FireItem(date: next, key: record.key)) }
            }
            finishedDelivery()
        }
        appDeliveries[bundle] = nil
    }

    /// Presents a request the store has fired already, once its fire is durable; what
    /// waits for the badge's commit (deleting replaced attachments) runs when it comes,
    /// without holding up the next one.
    func showFired(_ entry: FiredEntry) async {
        guard let due = entry.due, let write = due.write, let outcome = due.outcome else { return }
        let request = due.record.request
        let bundle = due.record.bundleIdentifier
        if write.keepPending, let next = write.nextFire { schedule(FireItem(date: next, key: due.record.key)) }
        // Shown only once the fire is durable (docs/architecture.md, "Firing"): a crash
        // before leaves the request pending with a past date, and it fires once at the next
        // start; a crash after leaves its entry to present, shown at the next start.
        do {
            _ = try await entry.durable.value
        } catch {
            logger.error("could not record a delivery", metadata: ["app": "\(bundle)", "request": "\(request.identifier)", "error": "\(error)"])
            return
        }
        let presentation = entry.settings.map { Presentation(settings: $0, content: request.content) } ?? .none
        let badgeStored = await show(request, bundle: bundle, notification: outcome.notification, presentation: presentation, replaced: outcome.replacedDelivered != nil)
        markPresented(outcome.presentation)
        let replaced = outcome.replacedDelivered
        if write.deliver { await listGrew(bundle, by: 1) }
        let filesMayGo = !(replaced?.request.content.attachments.isEmpty ?? true) || (!request.content.attachments.isEmpty && !write.deliver && !write.keepPending)
        guard filesMayGo || badgeStored != nil else { return }
        let logger = logger
        inFlight += 1
        Task {
            do {
                try await badgeStored?.value
                await self.delivered(request, bundle: bundle, presentation: presentation, replaced: replaced, keepPending: write.keepPending)
            } catch {
                logger.error("could not record a delivery", metadata: ["app": "\(bundle)", "request": "\(request.identifier)", "error": "\(error)"])
            }
            self.finishedDelivery()
        }
    }

    /// The presenters have shown a fired notification: its recorded entry goes, so the next
    /// start does not show it again. Until that commits, a crash shows it once more.
    func markPresented(_ id: Int64?) {
        guard let id else { return }
        let logger = logger
        store.presented([id]).whenComplete { result in
            if case .failure(let error) = result {
                logger.error("could not mark a notification as presented; it is shown again at the next start", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Shows what fires recorded for the presenters and a crash kept from being shown or
    /// marked (at-least-once banners), oldest first, then marks them. Runs at start,
    /// before anything new fires.
    func presentUnpresented() async {
        let entries: [UnpresentedNotification]
        do {
            entries = try await store.unpresented().value
        } catch {
            logger.error("could not read the notifications left to present", metadata: ["error": "\(error)"])
            return
        }
        guard !entries.isEmpty else { return }
        inFlight += 1
        defer { finishedDelivery() }
        for entry in entries {
            let presentation = Presentation(recordedFlags: entry.present)
            let badgeStored = await show(entry.notification.request, bundle: entry.bundleIdentifier, notification: entry.notification, presentation: presentation, replaced: false)
            _ = try? await badgeStored?.value
            markPresented(entry.id)
            // A banner the delivered list does not keep: its files go now, as `delivered`
            // lets them go after a fire (unless a pending or delivered entry still has them).
            if !presentation.list {
                await releaseAttachments(of: [entry.notification.request], bundle: entry.bundleIdentifier)
            }
        }
        logger.notice("presented notifications a crash had kept from being shown", metadata: ["count": "\(entries.count)"])
    }

    func enqueueDelivery(_ work: @escaping @Sendable () async -> Void) {
        if let deliveries {
            deliveries.yield(work)
        } else {
            // No scheduler running (an engine driven by hand): do it in line.
            Task { await work() }
        }
    }

    func finishedDelivery() {
        inFlight -= 1
        resumeSettled()
    }

    /// Adds whose commit has not yet put them in the heap are done.
    func addsFinished(_ count: Int) {
        guard count > 0 else { return }
        addsInFlight -= count
        resumeSettled()
    }

    func resumeSettled() {
        guard inFlight == 0, addsInFlight == 0 else { return }
        let nextDate = heap.min?.date ?? .distantFuture
        var waiting: [(Date, CheckedContinuation<Void, Never>)] = []
        for (date, continuation) in settleWaiters {
            if date <= processedThrough, nextDate > date {
                continuation.resume()
            } else {
                waiting.append((date, continuation))
            }
        }
        settleWaiters = waiting
    }

    /// Returns once everything due at or before `date` on the engine's clock has been fired
    /// and delivered: for tests that advance a test clock.
    public func settled(through date: Date) async {
        if inFlight == 0, addsInFlight == 0, processedThrough >= date, (heap.min?.date ?? .distantFuture) > date { return }
        await withCheckedContinuation { continuation in
            settleWaiters.append((date, continuation))
            poke()
        }
    }

    // MARK: Location

    func watch(key: Int64, bundle: String, region: CircularRegionValue) {
        var watch = RegionWatch(bundleIdentifier: bundle, region: region, inside: nil)
        if let last = lastLocation {
            watch.inside = Geo.contains(region, latitude: last.latitude, longitude: last.longitude)
        }
        regions[key] = watch
    }

    /// A new position of the device. Region triggers fire on the transitions they ask for:
    /// entering (outside → inside) or leaving (inside → outside). The first position only
    /// establishes where the device is, as Core Location's region monitoring does.
    public func locationChanged(latitude: Double, longitude: Double) async {
        // A position off the globe (NaN, 200°) would make every region look left: ignored.
        guard TriggerSchedule.isValidPosition(latitude: latitude, longitude: longitude) else {
            logger.warning("ignored an invalid position", metadata: ["latitude": "\(latitude)", "longitude": "\(longitude)"])
            return
        }
        lastLocation = (latitude, longitude)
        let now = clock.now
        var fired: [(Int64, RegionWatch)] = []
        for (key, var watch) in regions {
            let inside = Geo.contains(watch.region, latitude: latitude, longitude: longitude)
            defer { regions[key]?.inside = inside }
            guard let was = watch.inside, was != inside else { continue }
            if (inside && watch.region.notifyOnEntry) || (!inside && watch.region.notifyOnExit) {
                watch.inside = inside
                fired.append((key, watch))
            }
        }
        for (key, watch) in fired.sorted(by: { $0.0 < $1.0 }) {
            guard let record = try? await store.pendingRecord(key: key).value else {
                regions[key] = nil
                continue
            }
            let repeats = record.request.trigger?.repeats ?? false
            if !repeats { regions[key] = nil }
            inFlight += 1
            await deliver(record.request, bundle: watch.bundleIdentifier, date: now, pendingKey: key, nextFire: nil, keepPending: repeats)
            finishedDelivery()
        }
    }

    /// The regions being watched (for inspection and tests).
    public var watchedRegionCount: Int { regions.count }
}
