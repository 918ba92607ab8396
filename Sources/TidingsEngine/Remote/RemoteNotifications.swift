import DequeModule
import Foundation
import TidingsCore
import TidingsStorage

/// The engine's way to the push gateway: the daemon's gateway link implements it
/// (`TidingsDaemon`'s `GatewayLink`), tests may use a double.
public protocol RemoteNotificationLink: Sendable {
    /// The app's device token (topic = bundle ID), issued by the gateway; stable until
    /// the app is removed. Fails when no gateway is reachable.
    func deviceToken(for bundleIdentifier: String) async throws(NotificationError) -> [UInt8]
    /// `unregisterForRemoteNotifications()`: the app's tokens die (providers get `410`).
    func unregister(_ bundleIdentifier: String) async throws(NotificationError)
    /// The app was removed from the device: its tokens die; a reinstall gets a new one.
    /// Must not fail: the link keeps the removal until the gateway has it.
    func appRemoved(_ bundleIdentifier: String) async
    /// A remote notification was shown to the person (delivery inspection).
    func presented(_ push: RemotePush) async
    /// Remote notifications shown together (one hand-off's); by default one `presented` each.
    func presented(_ pushes: [RemotePush]) async
    /// The person answered the remote notification that came from this push (the apns-id
    /// and gateway sequence its delivered notification recorded, `RemotePush.deliveryKey`).
    func answered(apnsID: String, sequence: Int64) async
}

extension RemoteNotificationLink {
    public func presented(_ pushes: [RemotePush]) async {
        for push in pushes { await presented(push) }
    }
}

/// How the engine treats remote notifications.
public struct RemoteConfiguration: Sendable, Hashable {
    /// Silent pushes (`content-available` alone) that wake one app per window; beyond it
    /// the newest is held until the budget allows, or until the person opens the app
    /// (Apple: "don't try to send more than two or three per hour"). 0: no limit.
    public var backgroundBudget: Int = 3
    /// The budget's sliding window, in seconds of the engine's clock.
    public var backgroundWindow: TimeInterval = 3600
    /// Wakes kept for an app that is being launched or has no application delegate yet.
    public var maximumWaitingWakes: Int = 16
    /// The person's languages, for `loc-key`s (first match wins; then `en`, `Base`).
    public var languages: [String] = RemoteNotificationMapping.preferredLanguages()

    public init() {}
}

/// What became of a push.
public enum RemoteOutcome: Sendable, Hashable {
    /// Its `apns-expiration` passed before it could be shown: never shown.
    case expired
    /// No installed app has its bundle ID.
    case unknownApp
    /// The payload is not a JSON object (the gateway refuses those; kept for safety).
    case invalidPayload(String)
    /// Delivered: `presented` when the person saw it (banner or list); `wake` when it
    /// carried `content-available`.
    case delivered(presented: Bool, wake: RemoteWake?)
}

/// What happened to a `content-available` push's wake.
public enum RemoteWake: Sendable, Hashable {
    /// Sent to the app's running process.
    case sent
    /// Waiting for the app's process: launched in the background, or it has no delegate yet.
    case waiting
    /// Over the silent-push budget: held (only the newest) until the budget allows.
    case throttled
}

/// The engine's remote-notification state (a stored property of the engine).
struct RemoteState {
    var link: (any RemoteNotificationLink)?
    var configuration = RemoteConfiguration()
    /// Sessions whose process has an application delegate for silent pushes.
    var delegateSessions: Set<ObjectIdentifier> = []
    /// Wakes waiting for a process with an application delegate, per app.
    var waiting: [String: [[String: PropertyListValue]]] = [:]
    /// The newest silent push over the budget, per app.
    var throttled: [String: [String: PropertyListValue]] = [:]
    /// When each app was woken within the window.
    var wakes: [String: [Date]] = [:]
    var releaseTimers: [String: Task<Void, Never>] = [:]
    /// Background wakes sent and not yet completed: event → app.
    var openWakes: [UInt64: String] = [:]
    /// The latest completion results the apps reported (for inspection and tests; at most 256).
    var completedWakes: [(bundle: String, result: Int)] = []
}

extension NotificationEngine {
    /// Connects the engine to a gateway (`registerForRemoteNotifications` needs one) and
    /// sets how pushes are treated.
    public func setRemote(link: (any RemoteNotificationLink)?, configuration: RemoteConfiguration = RemoteConfiguration()) {
        remote.link = link
        remote.configuration = configuration
    }

    /// The remote pipeline for one push (`receiveRemote(_:)` with one).
    public func receiveRemote(_ push: RemotePush) async -> RemoteOutcome {
        await receiveRemote([push])[0]
    }

    /// The remote pipeline: pushes that the device made durable become notifications (through
    /// the app's service extension when one asks for it) and/or background wakes, in order.
    /// Expired pushes are never shown.
    ///
    /// Pushes handed over together are recorded together: each one's delivered-list write is
    /// queued in the store right after the previous one's (one group commit for the lot, not
    /// one commit awaited per push), and each is shown once its write is durable, in order.
    /// Before anything that may take long — a service extension, a foreground app's delegate,
    /// a background wake — what is already recorded is shown first, so a slow step holds up
    /// only the pushes behind it. Returns when every push has been shown (or left out).
    ///
    /// `whenRecorded` is called once every push's write is queued and the lot has its turn
    /// to be shown (remote lots show one at a time, in the order they took their turns):
    /// from then on a lot handed over later is recorded behind this one and shown after it,
    /// so the caller may hand over the next lot while this one waits for its writes.
    public func receiveRemote(_ pushes: [RemotePush], whenRecorded: (@Sendable () -> Void)? = nil) async -> [RemoteOutcome] {
        inFlight += 1
        var perApp: [String: Int] = [:]
        for push in pushes { perApp[push.bundleIdentifier, default: 0] += 1 }
        for (bundle, count) in perApp { remoteInProgress[bundle, default: 0] += count }
        defer {
            for (bundle, count) in perApp {
                let left = (remoteInProgress[bundle] ?? 0) - count
                remoteInProgress[bundle] = left > 0 ? left : nil
            }
            finishedDelivery()
        }
        var outcomes = [RemoteOutcome](repeating: .delivered(presented: false, wake: nil), count: pushes.count)
        var recorded: [RecordedRemote] = []
        for (index, push) in pushes.enumerated() {
            let bundle = push.bundleIdentifier
            if push.isExpired(at: clock.now) {
                logger.info("remote notification expired before it could be shown", metadata: ["app": "\(bundle)", "apns-id": "\(push.apnsID)"])
                outcomes[index] = .expired
                continue
            }
            guard let app = try? await app(bundle) else {
                logger.notice("remote notification for an app that is not installed", metadata: ["app": "\(bundle)", "apns-id": "\(push.apnsID)"])
                outcomes[index] = .unknownApp
                continue
            }
            let plan: RemoteNotificationPlan
            do {
                plan = try RemoteNotificationMapping.plan(push, localizedStrings: app.localizedStrings, languages: remote.configuration.languages)
            } catch {
                logger.warning("remote notification with a bad payload", metadata: ["app": "\(bundle)", "apns-id": "\(push.apnsID)", "error": "\(error)"])
                outcomes[index] = .invalidPayload(error.description)
                continue
            }
            if var request = plan.request {
                if plan.wantsServiceExtension, let runner = configuration.serviceExtensions,
                   let service = app.extensions.first(where: { $0.point == .service }) {
                    await showRecorded(&recorded, outcomes: &outcomes)
                    request.content = await runner.modify(request, app: app, extension: service).content
                    // The runner logs a failure and hands back the best attempt or the original;
                    // it has already moved the extension's attachments into the app's
                    // store through the same validation as `add` (docs/service-extensions.md).
                }
                if let entry = await recordRemote(request, push: push, index: index, flushing: &recorded, outcomes: &outcomes) {
                    recorded.append(entry)
                }
            }
            if plan.wakesApp {
                // After the notification (if any) is shown, as one push at a time did.
                await showRecorded(&recorded, outcomes: &outcomes)
                let wake = await wakeApp(bundle, userInfo: plan.userInfo, countsAgainstBudget: plan.isBackgroundOnly)
                if case .delivered(let presented, _) = outcomes[index] { outcomes[index] = .delivered(presented: presented, wake: wake) }
            }
        }
        await showRecorded(&recorded, outcomes: &outcomes, turnTaken: whenRecorded)
        return outcomes
    }

    /// Keeps `count` more of the app's newest notifications in its delivered list through
    /// trims until `releaseListed`: the gateway link holds a hand-off's pushes there until
    /// their processed mark is written (after `receiveRemote` returns), so a `kill -9` before
    /// the mark finds them in the list and does not show them again.
    public func holdListed(_ bundle: String, count: Int) {
        remoteInProgress[bundle, default: 0] += count
    }

    /// Ends a `holdListed`.
    public func releaseListed(_ bundle: String, count: Int) {
        let left = (remoteInProgress[bundle] ?? 0) - count
        remoteInProgress[bundle] = left > 0 ? left : nil
    }

    /// A remote notification whose delivery is decided and queued in the store, waiting to be shown.
    struct RecordedRemote {
        var index: Int
        var push: RemotePush
        var request: NotificationRequestValue
        var notification: DeliveredNotificationValue
        var presentation: Presentation
        /// The delivered-list write (nil when the presentation does not keep it in the list).
        var written: StoreTicket<DeliveredNotificationValue?>?
    }

    /// Decides how a push's notification is presented (a foreground app's delegate, else the
    /// person's settings) and queues its delivered-list write; nil when it cannot be delivered.
    /// Asking a delegate shows what is recorded first.
    private func recordRemote(_ request: NotificationRequestValue, push: RemotePush, index: Int,
                              flushing recorded: inout [RecordedRemote], outcomes: inout [RemoteOutcome]) async -> RecordedRemote? {
        let bundle = push.bundleIdentifier
        guard let settings = try? await settings(bundle) else { return nil }
        let notification = DeliveredNotificationValue(request: request, date: clock.now)
        if settings.isAllowed, foregroundSession(bundle) != nil {
            await showRecorded(&recorded, outcomes: &outcomes)
        }
        let presentation = await presentation(of: notification, bundle: bundle, settings: settings)
        let written = presentation.list ? store.deliver(notification, for: bundle, push: push.deliveryKey) : nil
        return RecordedRemote(index: index, push: push, request: request, notification: notification, presentation: presentation, written: written)
    }

    /// Shows the recorded notifications in order, each once its delivered-list write is
    /// durable (a crash before leaves the push unprocessed in the daemon's inbox and not in the
    /// list: it is shown after the restart; after, it is in the list and not shown twice),
    /// applies their badges, reports them presented together, and empties `recorded`.
    ///
    /// One lot at a time, in the order the lots took their turns (`turnTaken` is called once
    /// this one has its place, before it waits for anything).
    private func showRecorded(_ recorded: inout [RecordedRemote], outcomes: inout [RemoteOutcome],
                              turnTaken: (@Sendable () -> Void)? = nil) async {
        guard !recorded.isEmpty else {
            turnTaken?()
            return
        }
        let entries = recorded
        recorded.removeAll()
        await takeRemoteShowTurn(then: turnTaken)
        defer { passRemoteShowTurn() }
        var shown: [RemotePush] = []
        var finished: [(RecordedRemote, replaced: DeliveredNotificationValue?, badge: StoreTicket<Void>?)] = []
        shown.reserveCapacity(entries.count)
        finished.reserveCapacity(entries.count)
        for entry in entries {
            let bundle = entry.push.bundleIdentifier
            var replaced: DeliveredNotificationValue?
            do {
                replaced = try await entry.written?.value
            } catch {
                logger.error("could not record a delivery", metadata: ["app": "\(bundle)", "request": "\(entry.request.identifier)", "error": "\(error)"])
                continue
            }
            let badge = await show(entry.request, bundle: bundle, notification: entry.notification, presentation: entry.presentation, replaced: replaced != nil)
            if entry.presentation.isVisible {
                shown.append(entry.push)
                outcomes[entry.index] = .delivered(presented: true, wake: nil)
            }
            finished.append((entry, replaced, badge))
        }
        if !shown.isEmpty, let link = remote.link { await link.presented(shown) }
        var listed: [String: Int] = [:]
        for (entry, replaced, badge) in finished {
            do {
                try await badge?.value
            } catch {
                logger.error("could not record a delivery", metadata: ["app": "\(entry.push.bundleIdentifier)", "request": "\(entry.request.identifier)", "error": "\(error)"])
                continue
            }
            await delivered(entry.request, bundle: entry.push.bundleIdentifier, presentation: entry.presentation, replaced: replaced, keepPending: false)
            if entry.written != nil { listed[entry.push.bundleIdentifier, default: 0] += 1 }
        }
        // After the whole lot is shown: an identifier trimmed here and sent again is withdrawn before it shows again.
        for (bundle, count) in listed { await listGrew(bundle, by: count) }
    }

    /// Takes the turn to show remote notifications, or a place in line for it (FIFO).
    private func takeRemoteShowTurn(then taken: (@Sendable () -> Void)?) async {
        guard remoteShowTurnTaken else {
            remoteShowTurnTaken = true
            taken?()
            return
        }
        await withCheckedContinuation { waiter in
            remoteShowWaiters.append(waiter)
            taken?()
        }
    }

    /// Hands the turn to the next in line, or frees it.
    private func passRemoteShowTurn() {
        if let next = remoteShowWaiters.popFirst() { next.resume() } else { remoteShowTurnTaken = false }
    }

    /// Whether this push's notification is already in the app's delivered list: how the
    /// daemon avoids showing a push twice after a crash. The delivered notification records
    /// the push it came from, so a service extension's changes do not matter; a notification
    /// recorded before that (no key) is matched by identifier and payload.
    public func hasDeliveredRemote(_ push: RemotePush) async -> Bool {
        await deliveredRemoteDate(push) != nil
    }

    /// When this push's notification was delivered (its date in the delivered list), if it is
    /// there (`hasDeliveredRemote`): when it was shown, for a push recovered after a crash.
    public func deliveredRemoteDate(_ push: RemotePush) async -> Date? {
        guard let delivered = try? await store.deliveredNotification(push.requestIdentifier, for: push.bundleIdentifier).value,
              case .push? = delivered.request.trigger else { return nil }
        if let key = try? await store.deliveredPush(push.requestIdentifier, for: push.bundleIdentifier).value {
            return key == push.deliveryKey ? delivered.date : nil
        }
        guard let plan = try? RemoteNotificationMapping.plan(push) else { return nil }
        return delivered.request.content.userInfo == plan.userInfo ? delivered.date : nil
    }

    /// Background wakes the apps completed: (app, `UIBackgroundFetchResult` raw value).
    public func completedBackgroundWakes() -> [(bundle: String, result: Int)] { remote.completedWakes }

    // MARK: App requests

    func handleRemote(_ request: AppRequest, session id: ObjectIdentifier, bundle: String) async -> Deferred<AppReply> {
        switch request {
        case .registerForRemoteNotifications:
            guard let link = remote.link else { return .now(.failure(Self.noGateway)) }
            return Deferred {
                do throws(NotificationError) {
                    return .deviceToken(try await link.deviceToken(for: bundle))
                } catch {
                    return .failure(error)
                }
            }
        case .unregisterForRemoteNotifications:
            guard let link = remote.link else { return .now(.failure(Self.noGateway)) }
            return Deferred {
                do throws(NotificationError) {
                    try await link.unregister(bundle)
                    return .ok
                } catch {
                    return .failure(error)
                }
            }
        case .setRemoteNotificationDelegate(let present):
            if present {
                remote.delegateSessions.insert(id)
                await flushWakes(bundle, personOpened: sessions[id]?.state == .active)
            } else {
                remote.delegateSessions.remove(id)
            }
            return .now(.ok)
        case .backgroundFetchCompleted(let eventID, let result):
            if let app = remote.openWakes.removeValue(forKey: eventID), app == bundle {
                remote.completedWakes.append((app, result))
                if remote.completedWakes.count > 256 { remote.completedWakes.removeFirst(remote.completedWakes.count - 256) }
                logger.debug("background wake completed", metadata: ["app": "\(bundle)", "result": "\(result)"])
            }
            return .now(.ok)
        default:
            return .now(.failure(NotificationError(.invalidRequest, "not a remote-notification request")))
        }
    }

    static var noGateway: NotificationError {
        NotificationError(.daemonUnavailable,
            "remote notifications are not available: the daemon is not connected to a push gateway (run `tidings serve`, or `tidings daemon --gateway HOST:PORT --gateway-cert PEM`)")
    }

    // MARK: Hooks

    func remoteSessionEnded(_ id: ObjectIdentifier) {
        remote.delegateSessions.remove(id)
        for (eventID, app) in remote.openWakes where !sessions.values.contains(where: { $0.bundleIdentifier == app }) {
            remote.openWakes[eventID] = nil
        }
    }

    func remoteAppRemoved(_ bundle: String) async {
        remote.waiting[bundle] = nil
        remote.throttled[bundle] = nil
        remote.wakes[bundle] = nil
        remote.releaseTimers.removeValue(forKey: bundle)?.cancel()
        if let link = remote.link { await link.appRemoved(bundle) }
    }

    /// The push a delivered remote notification came from, as the delivered list recorded it
    /// (`RemotePush.deliveryKey`): what an answer to it reports. Nil without a gateway link,
    /// or for a notification delivered before the list kept its push (nothing is reported).
    func remotePush(ofDelivered identifier: String, bundle: String) async -> (apnsID: String, sequence: Int64)? {
        guard remote.link != nil, let key = try? await store.deliveredPush(identifier, for: bundle).value else { return nil }
        return RemotePush.push(ofDeliveryKey: key)
    }

    func remoteAnswered(_ push: (apnsID: String, sequence: Int64)) async {
        if let link = remote.link { await link.answered(apnsID: push.apnsID, sequence: push.sequence) }
    }

    // MARK: Silent pushes

    /// Wakes the app with a push's `userInfo` (`application(_:didReceiveRemoteNotification:
    /// fetchCompletionHandler:)`), within the silent-push budget when it counts.
    func wakeApp(_ bundle: String, userInfo: [String: PropertyListValue], countsAgainstBudget: Bool) async -> RemoteWake {
        let budget = remote.configuration.backgroundBudget
        if countsAgainstBudget, budget > 0 {
            let now = clock.now
            let window = remote.configuration.backgroundWindow
            var recent = remote.wakes[bundle, default: []].filter { now.timeIntervalSince($0) < window }
            if recent.count >= budget {
                remote.wakes[bundle] = recent
                remote.throttled[bundle] = userInfo // Apple keeps only the newest
                scheduleThrottleRelease(bundle, at: recent.min()!.addingTimeInterval(window))
                logger.info("silent push over the budget; holding the newest", metadata: ["app": "\(bundle)", "budget": "\(budget)"])
                return .throttled
            }
            recent.append(now)
            remote.wakes[bundle] = recent
        }
        return await dispatchWake(bundle, userInfo: userInfo)
    }

    private func dispatchWake(_ bundle: String, userInfo: [String: PropertyListValue]) async -> RemoteWake {
        if let target = wakeTarget(bundle) {
            send(wake: userInfo, bundle: bundle, to: target)
            return .sent
        }
        var queue = remote.waiting[bundle, default: []]
        queue.append(userInfo)
        if queue.count > remote.configuration.maximumWaitingWakes { queue.removeFirst(queue.count - remote.configuration.maximumWaitingWakes) }
        remote.waiting[bundle] = queue
        if !sessions.values.contains(where: { $0.bundleIdentifier == bundle }) {
            await launch(bundle, state: .background, reason: .remoteNotification)
        }
        return .waiting
    }

    private func wakeTarget(_ bundle: String) -> (any AppLink)? {
        sessions.first { remote.delegateSessions.contains($0.key) && $0.value.bundleIdentifier == bundle }?.value.link
    }

    private func send(wake userInfo: [String: PropertyListValue], bundle: String, to link: any AppLink) {
        let eventID = nextEventID
        nextEventID += 1
        remote.openWakes[eventID] = bundle
        link.send(.remoteNotification(eventID: eventID, userInfo: userInfo))
    }

    /// A process with an application delegate appeared: it gets the wakes that waited for
    /// it, and — when the person opened the app — the one held over the budget.
    private func flushWakes(_ bundle: String, personOpened: Bool) async {
        guard let target = wakeTarget(bundle) else { return }
        for userInfo in remote.waiting.removeValue(forKey: bundle) ?? [] {
            send(wake: userInfo, bundle: bundle, to: target)
        }
        if personOpened, let held = remote.throttled.removeValue(forKey: bundle) {
            remote.releaseTimers.removeValue(forKey: bundle)?.cancel()
            send(wake: held, bundle: bundle, to: target)
        }
    }

    private func scheduleThrottleRelease(_ bundle: String, at date: Date) {
        guard remote.releaseTimers[bundle] == nil else { return }
        let clock = self.clock
        remote.releaseTimers[bundle] = Task { [weak self] in
            do { try await clock.sleep(until: date) } catch { return }
            await self?.releaseThrottled(bundle)
        }
    }

    private func releaseThrottled(_ bundle: String) async {
        remote.releaseTimers[bundle] = nil
        guard let held = remote.throttled.removeValue(forKey: bundle) else { return }
        _ = await wakeApp(bundle, userInfo: held, countsAgainstBudget: true)
    }
}
