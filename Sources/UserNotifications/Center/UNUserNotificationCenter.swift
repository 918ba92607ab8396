import Foundation
import Synchronization
import TidingsCore

/// The app's connection to the notification system: authorization, scheduling,
/// pending and delivered notifications, categories, the badge, and the delegate.
///
/// `current()` connects to the notification daemon (lazily, on first use) as the app the
/// daemon recognises this process to be. Where Apple crashes — no app identity, no
/// daemon — every call fails with a `UNError` (`.daemonUnavailable` or
/// `.notificationsNotAllowed`) whose message is the daemon's explanation.
///
/// **Threads.** Completion handlers run on a background thread (a Swift concurrency
/// executor), never on the main thread — as on Apple's platforms, hop to the main actor
/// for UI work. The `async` forms run in the caller's isolation. Delegate methods are
/// called on the main actor (the delegate protocol itself is not isolated, as Apple's).
///
/// Fire-and-forget calls (`removePending…`, `removeDelivered…`, `setNotificationCategories`)
/// are sent in order before any later call, so a later call sees their effect.
public final class UNUserNotificationCenter: NSObject, Sendable {
    private struct State: Sendable {
        var transport: (any NotificationServiceTransport)?
        var events: Task<Void, Never>?
        var delegateAnnounced: Bool?
    }

    /// The delegate, weakly, behind a lock of its own: the protocol is not `Sendable` (as
    /// Apple's), and the center only reads it to call it on the main actor.
    private final class WeakDelegate: @unchecked Sendable {
        private let lock = NSLock()
        private weak var stored: (any UNUserNotificationCenterDelegate)?

        var value: (any UNUserNotificationCenterDelegate)? {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
    }

    private let weakDelegate = WeakDelegate()

    private let makeTransport: @Sendable () -> any NotificationServiceTransport
    private let state = Mutex(State())

    /// A center that talks through `transport` — for tests (a fake or in-process daemon)
    /// and for Tidings' own tools. Apps use `current()`.
    @_spi(Tidings) public convenience init(transport: any NotificationServiceTransport) {
        self.init(makeTransport: { transport })
    }

    init(makeTransport: @escaping @Sendable () -> any NotificationServiceTransport) {
        self.makeTransport = makeTransport
        super.init()
    }

    deinit {
        state.withLock { $0.events?.cancel() }
    }

    private static let shared = UNUserNotificationCenter(makeTransport: { makeDefaultTransport() })

    /// Within `$testingCurrent.withValue(center) { … }`, `current()` returns `center`:
    /// lets tests run code written against `current()` with a fake or in-process daemon.
    @_spi(Tidings) @TaskLocal public static var testingCurrent: UNUserNotificationCenter?

    /// The process's notification center, bound to the app the daemon recognises this
    /// process as.
    public class func current() -> UNUserNotificationCenter {
        testingCurrent ?? shared
    }

    // MARK: Transport and events

    private func transport() -> any NotificationServiceTransport {
        let (transport, isNew) = state.withLock { state -> (any NotificationServiceTransport, Bool) in
            if let transport = state.transport { return (transport, false) }
            let transport = makeTransport()
            state.transport = transport
            return (transport, true)
        }
        if isNew {
            let stream = transport.events()
            let task = Task { [weak self] in
                for await event in stream {
                    guard let self else { return }
                    await self.handle(event, transport: transport)
                }
            }
            state.withLock { $0.events = task }
        }
        return transport
    }

    private func handle(_ event: DaemonEvent, transport: any NotificationServiceTransport) async {
        switch event {
        case .willPresent(let eventID, let notificationValue):
            await MainActor.run {
                let once = OnceFlag()
                let decide: @Sendable (UNNotificationPresentationOptions) -> Void = { options in
                    guard once.claim() else { return }
                    transport.send(.presentationDecision(eventID: eventID, options: PresentationOptionsValue(options)))
                }
                guard let delegate = self.delegate else {
                    decide([])
                    return
                }
                delegate.userNotificationCenter(self, willPresent: UNNotification(value: notificationValue), withCompletionHandler: decide)
            }
        case .didReceive(let eventID, let responseValue):
            await MainActor.run {
                let once = OnceFlag()
                let done: @Sendable () -> Void = {
                    guard once.claim() else { return }
                    transport.send(.responseHandled(eventID: eventID))
                }
                guard let delegate = self.delegate else {
                    done()
                    return
                }
                delegate.userNotificationCenter(self, didReceive: UNNotificationResponse.make(responseValue), withCompletionHandler: done)
            }
        case .openSettings(_, let notificationValue):
            await MainActor.run {
                self.delegate?.userNotificationCenter(self, openSettingsFor: notificationValue.map(UNNotification.init(value:)))
            }
        case .settingsChanged:
            // Apple has no callback for settings changes; apps ask again.
            break
        case .remoteNotification(let eventID, _):
            // Background wakes go to the app delegate (`application(_:didReceiveRemoteNotification:
            // fetchCompletionHandler:)`), which this module does not provide: report "no data"
            // (UIBackgroundFetchResult.noData) so the daemon does not wait.
            transport.send(.backgroundFetchCompleted(eventID: eventID, result: 1))
        }
    }

    private func call(_ request: AppRequest) async throws(UNError) -> AppReply {
        let reply: AppReply
        do {
            reply = try await transport().call(request)
        } catch {
            throw UNError(error)
        }
        if case .failure(let error) = reply {
            throw UNError(error)
        }
        return reply
    }

    private static func unexpected(_ reply: AppReply, to request: String) -> UNError {
        UNError(.daemonUnavailable, "The notification daemon answered \(request) with an unexpected reply (\(reply)); the app and the daemon speak different protocol versions.")
    }

    /// Runs `operation` in a new task and hands its result to `completion`.
    private func complete<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T, _ completion: @escaping @Sendable (Result<T, any Error>) -> Void) {
        Task {
            do {
                completion(.success(try await operation()))
            } catch {
                completion(.failure(error))
            }
        }
    }

    // MARK: Delegate

    /// The delegate, held weakly. Set it before the app finishes launching: responses that
    /// launched the app are held by the daemon until a delegate is set.
    public var delegate: (any UNUserNotificationCenterDelegate)? {
        get { weakDelegate.value }
        set {
            let isSet = newValue != nil
            weakDelegate.value = newValue
            let announce = state.withLock { state -> Bool? in
                guard state.delegateAnnounced != isSet else { return nil }
                state.delegateAnnounced = isSet
                return isSet
            }
            if let announce {
                transport().send(.setDelegate(announce))
            }
        }
    }

    /// Whether the system can show content extensions' custom interfaces. Tidings' daemon
    /// hosts content extensions declared in an app's manifest.
    public var supportsContentExtensions: Bool { true }

    // MARK: Authorization and settings

    /// Asks the person to allow notifications with `options`. The first request asks;
    /// later requests report the remembered answer without asking. `.provisional` is
    /// granted without asking and delivers quietly.
    public func requestAuthorization(options: UNAuthorizationOptions = [], completionHandler: @escaping @Sendable (Bool, (any Error)?) -> Void) {
        complete({ try await self.requestAuthorization(options: options) }) { result in
            switch result {
            case .success(let granted): completionHandler(granted, nil)
            case .failure(let error): completionHandler(false, error)
            }
        }
    }

    public nonisolated(nonsending) func requestAuthorization(options: UNAuthorizationOptions = []) async throws -> Bool {
        let reply = try await call(.requestAuthorization(AuthorizationOptionsValue(options)))
        guard case .authorization(let granted) = reply else { throw Self.unexpected(reply, to: "requestAuthorization") }
        return granted
    }

    /// The person's current settings for the app.
    public func getNotificationSettings(completionHandler: @escaping @Sendable (UNNotificationSettings) -> Void) {
        Task {
            let value: NotificationSettingsValue
            do {
                value = try await self.settingsValue()
            } catch {
                // Apple's handler takes no error: an unreachable daemon reads as "not determined".
                value = NotificationSettingsValue()
            }
            completionHandler(UNNotificationSettings(value))
        }
    }

    /// The person's current settings for the app. Without a daemon, settings read as
    /// `.notDetermined` with every setting `.notSupported` (Apple's signature cannot throw).
    public nonisolated(nonsending) func notificationSettings() async -> UNNotificationSettings {
        UNNotificationSettings((try? await settingsValue()) ?? NotificationSettingsValue())
    }

    private func settingsValue() async throws(UNError) -> NotificationSettingsValue {
        let reply = try await call(.getSettings)
        guard case .settings(let value) = reply else { throw Self.unexpected(reply, to: "getNotificationSettings") }
        return value
    }

    // MARK: Categories

    /// Registers the app's **complete** set of categories, replacing the previous set.
    public func setNotificationCategories(_ categories: Set<UNNotificationCategory>) {
        let values = categories.map(\.value).sorted { $0.identifier < $1.identifier }
        transport().send(.setCategories(values))
    }

    public func getNotificationCategories(completionHandler: @escaping @Sendable (Set<UNNotificationCategory>) -> Void) {
        Task {
            let values = (try? await self.categoryValues()) ?? []
            completionHandler(Set(values.map(UNNotificationCategory.init(value:))))
        }
    }

    /// The registered categories (empty when the daemon cannot be reached).
    public nonisolated(nonsending) func notificationCategories() async -> Set<UNNotificationCategory> {
        let values = (try? await categoryValues()) ?? []
        return Set(values.map(UNNotificationCategory.init(value:)))
    }

    private func categoryValues() async throws(UNError) -> [CategoryValue] {
        let reply = try await call(.getCategories)
        guard case .categories(let values) = reply else { throw Self.unexpected(reply, to: "getNotificationCategories") }
        return values
    }

    // MARK: Scheduling

    /// Schedules `request`. A request with the identifier of a pending or delivered
    /// notification replaces it; a nil trigger delivers now. `completionHandler` gets nil
    /// on success or a `UNError`: an invalid trigger, a `userInfo` that is no property
    /// list, an attachment the daemon refuses, no authorization, no daemon.
    public func add(_ request: UNNotificationRequest, withCompletionHandler completionHandler: (@Sendable ((any Error)?) -> Void)? = nil) {
        let value: NotificationRequestValue
        do {
            value = try request.value()
        } catch {
            Task { completionHandler?(error) }
            return
        }
        // Sent now, so a fire-and-forget call made after this one reaches the daemon after it.
        transport().start(.add(value)) { result in
            switch result {
            case .success(.failure(let error)), .failure(let error): completionHandler?(UNError(error))
            case .success(.added), .success(.ok): completionHandler?(nil)
            case .success(let reply): completionHandler?(Self.unexpected(reply, to: "add"))
            }
        }
    }

    public nonisolated(nonsending) func add(_ request: UNNotificationRequest) async throws {
        try await add(try request.value())
    }

    private func add(_ value: NotificationRequestValue) async throws(UNError) {
        let reply = try await call(.add(value))
        switch reply {
        case .added, .ok: return
        default: throw Self.unexpected(reply, to: "add")
        }
    }

    public func getPendingNotificationRequests(completionHandler: @escaping @Sendable ([UNNotificationRequest]) -> Void) {
        Task {
            let values = (try? await self.pendingValues()) ?? []
            completionHandler(values.map(UNNotificationRequest.init(pending:)))
        }
    }

    /// Requests scheduled and not yet delivered (repeating requests stay pending). Empty
    /// when the daemon cannot be reached.
    public nonisolated(nonsending) func pendingNotificationRequests() async -> [UNNotificationRequest] {
        ((try? await pendingValues()) ?? []).map(UNNotificationRequest.init(pending:))
    }

    /// The pending requests with their scheduled dates, so a time-interval trigger's
    /// `nextTriggerDate()` is the date the request fires, as on iOS.
    private func pendingValues() async throws(UNError) -> [PendingRequestValue] {
        let reply = try await call(.getPendingScheduled)
        switch reply {
        case .pendingRequests(let values): return values
        default: throw Self.unexpected(reply, to: "getPendingNotificationRequests")
        }
    }

    /// Cancels pending requests; unknown identifiers are ignored.
    public func removePendingNotificationRequests(withIdentifiers identifiers: [String]) {
        transport().send(.removePending(identifiers))
    }

    public func removeAllPendingNotificationRequests() {
        transport().send(.removeAllPending)
    }

    // MARK: Delivered

    public func getDeliveredNotifications(completionHandler: @escaping @Sendable ([UNNotification]) -> Void) {
        Task {
            let values = (try? await self.deliveredValues()) ?? []
            completionHandler(values.map(UNNotification.init(value:)))
        }
    }

    /// Notifications still shown in the notification center. Empty when the daemon cannot
    /// be reached.
    public nonisolated(nonsending) func deliveredNotifications() async -> [UNNotification] {
        ((try? await deliveredValues()) ?? []).map(UNNotification.init(value:))
    }

    private func deliveredValues() async throws(UNError) -> [DeliveredNotificationValue] {
        let reply = try await call(.getDelivered)
        guard case .notifications(let values) = reply else { throw Self.unexpected(reply, to: "getDeliveredNotifications") }
        return values
    }

    /// Removes delivered notifications (local or remote); unknown identifiers are ignored.
    public func removeDeliveredNotifications(withIdentifiers identifiers: [String]) {
        transport().send(.removeDelivered(identifiers))
    }

    public func removeAllDeliveredNotifications() {
        transport().send(.removeAllDelivered)
    }

    // MARK: Badge

    /// Sets the app's badge; 0 removes it. A negative count fails with
    /// `UNError.Code.badgeInputInvalid` without contacting the daemon.
    public func setBadgeCount(_ newBadgeCount: Int, withCompletionHandler completionHandler: (@Sendable ((any Error)?) -> Void)? = nil) {
        complete({ try await self.setBadge(newBadgeCount) }) { result in
            switch result {
            case .success: completionHandler?(nil)
            case .failure(let error): completionHandler?(error)
            }
        }
    }

    public nonisolated(nonsending) func setBadgeCount(_ newBadgeCount: Int) async throws {
        try await setBadge(newBadgeCount)
    }

    private func setBadge(_ count: Int) async throws(UNError) {
        guard count >= 0 else {
            throw UNError(.badgeInputInvalid, "setBadgeCount(\(count)): the badge count must be 0 (remove the badge) or greater.")
        }
        let reply = try await call(.setBadge(count))
        guard case .ok = reply else { throw Self.unexpected(reply, to: "setBadgeCount") }
    }
}
