import Foundation
import DequeModule
import HeapModule
import Logging
import Synchronization
import TidingsCore
import TidingsStorage

/// The device's notification system: authorization, pending requests and their scheduler,
/// delivered notifications, presentation, and the person's responses routed to apps.
///
/// Apps reach it through `handle(_:from:)` (the daemon's socket or an in-process link);
/// the person through `respond(…)`, `updateSettings(…)` and location updates. `run()`
/// drives the scheduler until cancelled.
public actor NotificationEngine {
    struct Session {
        let link: any AppLink
        let bundleIdentifier: String
        var state: AppState
        var hasDelegate: Bool
    }

    public let configuration: EngineConfiguration
    var store: any DeviceStore { configuration.store }
    var clock: any WallClock { configuration.clock }
    var logger: Logger { configuration.logger }

    var sessions: [ObjectIdentifier: Session] = [:]
    var apps: [String: AppRecord] = [:]
    var settingsCache: [String: NotificationSettingsValue] = [:]
    var categoriesCache: [String: [CategoryValue]] = [:]
    var consentInFlight: [String: Task<NotificationSettingsValue, Never>] = [:]

    var heap = Heap<FireItem>()
    /// Added requests whose commit completed, waiting to enter the heap (see `add`).
    nonisolated let addedInbox = HandOff<AddedEntry>()
    /// Fired queue entries whose record has been read, in the order they fired.
    nonisolated let firedInbox = HandOff<FiredEntry>()
    /// Per app, fired requests waiting to be delivered, in the order they fired: one app's
    /// notifications arrive in order, and a slow delegate holds up only its own app.
    var appDeliveries: [String: Deque<FiredEntry>] = [:]
    var regions: [Int64: RegionWatch] = [:]
    var lastLocation: (latitude: Double, longitude: Double)?

    var nextEventID: UInt64 = 1
    var presentationWaiters: [UInt64: CheckedContinuation<PresentationOptionsValue?, Never>] = [:]
    var presentationSession: [UInt64: ObjectIdentifier] = [:]
    /// didReceive event → held response id, released when the app calls the completion handler.
    var responseEvents: [UInt64: (session: ObjectIdentifier, heldID: Int64)] = [:]
    /// Held responses sent to a process and not yet handled.
    var dispatchedResponses: Set<Int64> = []
    /// Held responses the app has handled, per app, until a listing of its held responses no
    /// longer has them: a listing read before the release committed must not send them again.
    var handledResponses: [String: Set<Int64>] = [:]
    /// Apps whose held responses are being sent, and those asked for again meanwhile: one
    /// dispatch per app at a time, so listings are read in order.
    var dispatchingResponses: Set<String> = []
    var redispatchResponses: Set<String> = []
    var launching: Set<String> = []

    // Scheduler state
    var wake: CheckedContinuation<Void, Never>?
    var poked = false
    var inFlight = 0
    /// Notifications put in each app's delivered list since its last trim (`listGrew`); an
    /// app not here is trimmed at its next one.
    var listedSinceTrim: [String: Int] = [:]
    /// Per app, the pushes of the remote hand-offs in progress (`receiveRemote`): a trim keeps
    /// at least that many, so it never takes a push whose processed mark is not yet written —
    /// after a `kill -9` there, the restart finds it in the delivered list and does not show it again.
    var remoteInProgress: [String: Int] = [:]
    /// Remote lots show one at a time, in the order they asked (`showRecorded`): whether one
    /// is showing, and the ones waiting for their turn.
    var remoteShowTurnTaken = false
    var remoteShowWaiters: Deque<CheckedContinuation<Void, Never>> = []
    /// Adds accepted whose commit has not yet reached the heap: `settled` waits for them.
    var addsInFlight = 0
    var processedThrough = Date.distantPast
    var settleWaiters: [(Date, CheckedContinuation<Void, Never>)] = []
    var deliveries: AsyncStream<@Sendable () async -> Void>.Continuation?

    /// Remote notifications: the gateway link, silent-push budget and wakes (Remote/).
    var remote = RemoteState()

    struct RegionWatch {
        var bundleIdentifier: String
        var region: CircularRegionValue
        var inside: Bool?
    }

    public init(configuration: EngineConfiguration) {
        self.configuration = configuration
    }

    // MARK: Apps

    /// Installs (or updates) an app from its manifest record. Its bundle identifier must
    /// be valid (`BundleIdentifier.check`, `invalidRequest`): it names the app's folders.
    public func install(_ app: AppRecord) async throws {
        try BundleIdentifier.check(app.bundleIdentifier)
        try await store.upsertApp(app).value
        apps[app.bundleIdentifier] = app
    }

    /// Removes an app and everything it owns; its attachment files are deleted.
    public func uninstall(_ bundleIdentifier: String) async throws {
        let attachments = try await store.removeApp(bundleIdentifier).value
        configuration.attachments.delete(attachments, bundleIdentifier: bundleIdentifier)
        await remoteAppRemoved(bundleIdentifier)
        apps[bundleIdentifier] = nil
        settingsCache[bundleIdentifier] = nil
        categoriesCache[bundleIdentifier] = nil
        for (id, session) in sessions where session.bundleIdentifier == bundleIdentifier {
            sessions[id] = nil
        }
    }

    public func app(_ bundleIdentifier: String) async throws -> AppRecord? {
        if let app = apps[bundleIdentifier] { return app }
        let app = try await store.app(bundleIdentifier).value
        if let app { apps[bundleIdentifier] = app }
        return app
    }

    public func installedApps() async throws -> [AppRecord] {
        try await store.apps().value
    }

    // MARK: Connections

    /// Registers a connected app process. Held responses flow once it sets a delegate.
    public func connect(_ link: any AppLink, app: AppRecord, state: AppState) async {
        apps[app.bundleIdentifier] = app
        sessions[ObjectIdentifier(link)] = Session(link: link, bundleIdentifier: app.bundleIdentifier, state: state, hasDelegate: false)
        launching.remove(app.bundleIdentifier)
        _ = try? await settings(app.bundleIdentifier)
        _ = try? await categories(app.bundleIdentifier)
    }

    public func disconnect(_ link: any AppLink) {
        let id = ObjectIdentifier(link)
        sessions[id] = nil
        remoteSessionEnded(id)
        for (eventID, session) in presentationSession where session == id {
            presentationSession[eventID] = nil
            presentationWaiters.removeValue(forKey: eventID)?.resume(returning: nil)
        }
        for (eventID, entry) in responseEvents where entry.session == id {
            responseEvents[eventID] = nil
            dispatchedResponses.remove(entry.heldID)
        }
    }

    /// Whether the app has a running process whose delegate is set.
    public func isRunning(_ bundleIdentifier: String) -> Bool {
        sessions.values.contains { $0.bundleIdentifier == bundleIdentifier }
    }

    /// Handles one request of a connected app. The returned `Deferred` waits for the
    /// request's durable result; requests are applied in the order `handle` is called.
    /// `encoded` is an `add`'s request in `BinaryRequestCodec`'s form as the app sent it:
    /// the engine still decodes and validates, but stores those bytes instead of encoding
    /// the request again.
    public func handle(_ request: AppRequest, from link: any AppLink, encoded: Data? = nil) async -> Deferred<AppReply> {
        let id = ObjectIdentifier(link)
        guard let session = sessions[id] else {
            return .now(.failure(NotificationError(.daemonUnavailable, "the connection has not identified its app")))
        }
        let bundle = session.bundleIdentifier
        do {
            switch request {
            case .hello, .adminHello:
                return .now(.failure(NotificationError(.invalidRequest, "hello was already sent")))
            case .admin:
                return .now(.failure(NotificationError(.notificationsNotAllowed, "an app connection cannot make admin requests")))
            case .requestAuthorization(let options):
                let granted = try await requestAuthorization(bundle, options: options)
                return .now(.authorization(granted: granted))
            case .getSettings:
                return .now(.settings(try await settings(bundle)))
            case .setCategories(let categories):
                return try await setCategories(categories, for: bundle)
            case .getCategories:
                return .now(.categories(try await self.categories(bundle)))
            case .add(let request):
                return try await add(request, encoded: encoded, for: bundle)
            case .getPending:
                let ticket = store.pending(bundle)
                return Deferred { await Self.reply { .requests(try await ticket.value) } }
            case .getPendingScheduled:
                let ticket = store.pendingRecords(bundle)
                return Deferred {
                    await Self.reply {
                        .pendingRequests(try await ticket.value.map { PendingRequestValue(request: $0.request, nextTriggerDate: $0.nextFire) })
                    }
                }
            case .removePending(let identifiers):
                return removePending(store.removePending(identifiers, for: bundle), bundle: bundle)
            case .removeAllPending:
                return removePending(store.removeAllPending(bundle), bundle: bundle)
            case .getDelivered:
                let ticket = store.delivered(bundle)
                return Deferred { await Self.reply { .notifications(try await ticket.value) } }
            case .removeDelivered(let identifiers):
                return removeDelivered(store.removeDelivered(identifiers, for: bundle), bundle: bundle)
            case .removeAllDelivered:
                return removeDelivered(store.removeAllDelivered(bundle), bundle: bundle)
            case .setBadge(let count):
                return try setBadge(count, for: bundle)
            case .setDelegate(let present):
                sessions[id]?.hasDelegate = present
                if present { await dispatchHeldResponses(bundle) }
                return .now(.ok)
            case .setState(let state):
                sessions[id]?.state = state
                return .now(.ok)
            case .presentationDecision(let eventID, let options):
                if presentationSession[eventID] == id {
                    presentationSession[eventID] = nil
                    presentationWaiters.removeValue(forKey: eventID)?.resume(returning: options)
                }
                return .now(.ok)
            case .responseHandled(let eventID):
                if let entry = responseEvents[eventID], entry.session == id {
                    responseEvents[eventID] = nil
                    dispatchedResponses.remove(entry.heldID)
                    handledResponses[bundle, default: []].insert(entry.heldID)
                    let ticket = store.releaseResponse(id: entry.heldID)
                    return Deferred { await Self.reply { try await ticket.value; return .ok } }
                }
                return .now(.ok)
            case .backgroundFetchCompleted, .registerForRemoteNotifications, .unregisterForRemoteNotifications, .setRemoteNotificationDelegate:
                return await handleRemote(request, session: id, bundle: bundle)
            }
        } catch let error as NotificationError {
            return .now(.failure(error))
        } catch {
            return .now(.failure(NotificationError(.invalidRequest, "\(error)")))
        }
    }

    static func reply(_ body: () async throws -> AppReply) async -> AppReply {
        do {
            return try await body()
        } catch let error as NotificationError {
            return .failure(error)
        } catch {
            return .failure(NotificationError(.invalidRequest, "storage failed: \(error)"))
        }
    }

    // MARK: Settings and authorization

    public func settings(_ bundle: String) async throws -> NotificationSettingsValue {
        if let cached = settingsCache[bundle] { return cached }
        let stored = try await store.settings(bundle).value ?? NotificationSettingsValue()
        settingsCache[bundle] = stored
        return stored
    }

    func requestAuthorization(_ bundle: String, options: AuthorizationOptionsValue) async throws -> Bool {
        let current = try await settings(bundle)
        switch current.authorizationStatus {
        case .authorized, .ephemeral:
            return true
        case .denied:
            return false
        case .provisional where options.contains(.provisional):
            return true
        case .notDetermined where options.contains(.provisional):
            // Provisional authorization is granted without asking; delivery is quiet.
            let granted = NotificationSettingsValue.granted(options, provisional: true)
            try await storeSettings(granted, for: bundle)
            return true
        case .notDetermined, .provisional:
            let decided: NotificationSettingsValue
            if let asking = consentInFlight[bundle] {
                decided = await asking.value
            } else {
                let appName = (try? await app(bundle))?.displayName ?? bundle
                let consent = configuration.consent
                let task = Task { () -> NotificationSettingsValue in
                    let allowed = await consent.requestConsent(appName: appName, bundleIdentifier: bundle, options: options)
                    return allowed ? .granted(options, provisional: false) : .deniedSettings
                }
                consentInFlight[bundle] = task
                decided = await task.value
                consentInFlight[bundle] = nil
                // The answer is remembered: later requests report it without asking.
                try await storeSettings(decided, for: bundle)
            }
            return decided.isAllowed
        }
    }

    /// Changes an app's settings as the person does in Settings; the app hears about it.
    public func updateSettings(_ bundle: String, _ change: (inout NotificationSettingsValue) -> Void) async throws -> NotificationSettingsValue {
        var settings = try await settings(bundle)
        change(&settings)
        try await storeSettings(settings, for: bundle)
        return settings
    }

    func storeSettings(_ settings: NotificationSettingsValue, for bundle: String) async throws {
        try await store.setSettings(settings, for: bundle).value
        settingsCache[bundle] = settings
        for session in sessions.values where session.bundleIdentifier == bundle {
            session.link.send(.settingsChanged(settings))
        }
        for presenter in configuration.presenters { await presenter.settingsChanged(bundleIdentifier: bundle, settings: settings) }
    }

    // MARK: Categories

    public func categories(_ bundle: String) async throws -> [CategoryValue] {
        if let cached = categoriesCache[bundle] { return cached }
        let stored = try await store.categories(bundle).value
        categoriesCache[bundle] = stored
        return stored
    }

    func setCategories(_ categories: [CategoryValue], for bundle: String) async throws -> Deferred<AppReply> {
        var seen = Set<String>()
        // A set replaces the whole set; duplicates by identifier keep the last, like a Set of categories.
        let unique = categories.reversed().filter { seen.insert($0.identifier).inserted }.reversed()
        categoriesCache[bundle] = Array(unique)
        let ticket = store.setCategories(Array(unique), for: bundle)
        return Deferred { await Self.reply { try await ticket.value; return .ok } }
    }

    // MARK: Badge

    func setBadge(_ count: Int, for bundle: String) throws -> Deferred<AppReply> {
        guard count >= 0 else {
            throw NotificationError(.badgeInputInvalid, "badge count must not be negative (got \(count))")
        }
        let ticket = store.setBadge(count, for: bundle)
        let presenters = configuration.presenters
        return Deferred {
            await Self.reply {
                try await ticket.value
                for presenter in presenters { await presenter.badgeChanged(bundleIdentifier: bundle, count: count) }
                return .ok
            }
        }
    }

    public func badge(_ bundle: String) async throws -> Int {
        try await store.badge(bundle).value
    }

    // MARK: Adding and removing requests

    func add(_ request: NotificationRequestValue, encoded: Data? = nil, for bundle: String) async throws -> Deferred<AppReply> {
        let settings = try await settings(bundle)
        guard settings.authorizationStatus != .denied else {
            throw NotificationError(.notificationsNotAllowed, "notifications are not allowed for \(bundle): the person denied them (change with `tidings settings \(bundle) --allow`)")
        }
        try TriggerSchedule.validate(request.trigger)
        let content = try request.content.withCheckedNumbers()
        guard content.hasAlertContent || content.sound != nil || content.badge != nil || !content.attachments.isEmpty else {
            throw NotificationError(.notificationInvalidNoContent, "the notification has no title, subtitle, body, sound, badge or attachment")
        }
        let now = clock.now
        let firstFire = try TriggerSchedule.firstFire(request.trigger, now: now, timeZone: configuration.timeZone)
        var stored = request
        stored.content = content
        if !content.attachments.isEmpty {
            // Off the actor: reading and copying files may block (AttachmentStore.ingestOffActor).
            // Only then: an add without attachments (the hot path) makes no hop.
            let appDirectory = try await app(bundle)?.directory
            stored.content.attachments = try await configuration.attachments.ingestOffActor(content.attachments, bundleIdentifier: bundle, appDirectory: appDirectory)
        }
        // The bytes as received describe `stored` exactly unless attachments moved or a
        // number was clamped.
        let body = request.content.attachments.isEmpty && content == request.content ? encoded : nil
        let ticket = store.addPending(stored, encoded: body, for: bundle, nextFire: firstFire, limit: configuration.pendingLimit)
        let attachments = configuration.attachments
        var region: CircularRegionValue?
        if firstFire == nil, case .location(let watched, _)? = stored.trigger { region = watched }
        // The commit's completion schedules the request and then lets the reply go, without
        // a task per add: the writer thread hands the result to `addedInbox`, and one hop onto
        // the actor per batch puts the requests in the heap. It is registered now, not when
        // the reply is subscribed to, so a request is scheduled even if nobody waits for it.
        let (replied, reply) = StoreTicket<AppReply>.make()
        addsInFlight += 1
        ticket.whenComplete { [self, stored, region] result in
            switch result {
            case .success(let result):
                // The app needs the request back only when attachments moved into the store.
                let answer: AppReply = stored.content.attachments.isEmpty ? .ok : .added(stored)
                let entry = AddedEntry(key: result.key, bundle: bundle, nextFire: firstFire, region: region,
                                       released: (result.evicted + [result.replacedPending].compactMap { $0 }).filter { !$0.content.attachments.isEmpty },
                                       reply: { reply(.success(answer)) })
                if self.addedInbox.append(entry) { Task { await self.drainAddedInbox() } }
            case .failure(let error):
                // Not scheduled: the files we took go away with it.
                attachments.delete(stored.content.attachments, bundleIdentifier: bundle)
                Task { await self.addsFinished(1) }
                reply(.success(.failure(NotificationError(.invalidRequest, "the request could not be stored: \(error)"))))
            }
        }
        return Deferred(subscribe: { done in
            replied.whenComplete { result in
                switch result {
                case .success(let answer): done(answer)
                case .failure(let error): done(.failure(NotificationError(.invalidRequest, "\(error)")))
                }
            }
        })
    }

    /// Puts the requests the inbox collected in the heap (or watches their regions), lets
    /// their replies go, then deletes the files of the requests they evicted or replaced.
    func drainAddedInbox() {
        while let entries = addedInbox.takeUnlessEmpty() {
            var finished = 0
            for entry in entries {
                if let next = entry.nextFire {
                    schedule(FireItem(date: next, key: entry.key))
                } else if let region = entry.region {
                    watch(key: entry.key, bundle: entry.bundle, region: region)
                }
                entry.reply()
                if entry.released.isEmpty {
                    finished += 1
                } else {
                    Task {
                        await releaseAttachments(of: entry.released, bundle: entry.bundle)
                        addsFinished(1)
                    }
                }
            }
            addsFinished(finished)
        }
    }

    func removePending(_ ticket: StoreTicket<[NotificationRequestValue]>, bundle: String) -> Deferred<AppReply> {
        Deferred { [self] in
            await Self.reply {
                let removed = try await ticket.value
                await self.releaseAttachments(of: removed, bundle: bundle)
                return .ok
            }
        }
    }

    func removeDelivered(_ ticket: StoreTicket<[DeliveredNotificationValue]>, bundle: String) -> Deferred<AppReply> {
        let presenters = configuration.presenters
        return Deferred { [self] in
            await Self.reply {
                let removed = try await ticket.value
                if !removed.isEmpty {
                    let identifiers = removed.map(\.request.identifier)
                    for presenter in presenters { await presenter.withdraw(bundleIdentifier: bundle, identifiers: identifiers) }
                }
                await self.releaseAttachments(of: removed.map(\.request), bundle: bundle)
                return .ok
            }
        }
    }

    /// Deletes the attachment files of `requests` that no pending or delivered notification
    /// refers to any more. A file in the store belongs to one request; only a pending
    /// request and a delivered notification with the same identifier can share it (a
    /// repeating request and its last delivery), so only those two are looked up.
    func releaseAttachments(of requests: [NotificationRequestValue], bundle: String) async {
        for request in requests where !request.content.attachments.isEmpty {
            var referenced = Set<String>()
            if let pending = try? await store.pendingRequest(request.identifier, for: bundle).value {
                for a in pending.content.attachments { referenced.insert(a.path) }
            }
            if let delivered = try? await store.deliveredNotification(request.identifier, for: bundle).value {
                for a in delivered.request.content.attachments { referenced.insert(a.path) }
            }
            configuration.attachments.delete(request.content.attachments.filter { !referenced.contains($0.path) }, bundleIdentifier: bundle)
        }
    }
}

/// Results produced on the store's writer thread, handed to the engine in batches: the
/// first `append` after a drain asks for one, and that drain takes batches until none is
/// left — one hop onto the actor per burst instead of a task per result.
final class HandOff<Entry: Sendable>: Sendable {
    private struct State {
        var entries: [Entry] = []
        var scheduled = false
    }

    private let state = Mutex(State())

    /// Adds an entry; true when the caller must schedule a drain.
    func append(_ entry: Entry) -> Bool {
        state.withLock { state -> Bool in
            state.entries.append(entry)
            guard !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
    }

    /// For the drain, which stays the only one until it has taken everything: the entries,
    /// or nil (and the next `append` asks for a new drain) when none arrived.
    func takeUnlessEmpty() -> [Entry]? {
        state.withLock { state in
            guard !state.entries.isEmpty else {
                state.scheduled = false
                return nil
            }
            defer { state.entries.removeAll(keepingCapacity: true) }
            return state.entries
        }
    }
}

/// A committed add: where it goes (the fire queue, or a region to watch), the requests it
/// evicted or replaced whose files may go, and its reply to let go once it is in place.
struct AddedEntry: Sendable {
    let key: Int64
    let bundle: String
    let nextFire: Date?
    let region: CircularRegionValue?
    let released: [NotificationRequestValue]
    let reply: @Sendable () -> Void
}
