import Foundation
import Logging
import TidingsCore
import TidingsStorage

/// Work whose ordering is settled but whose result comes later: the engine queues an app's
/// request in order and hands back the wait for its durable result, so one app connection
/// can keep many requests in flight (group commit) without reordering them.
public struct Deferred<Value: Sendable>: Sendable {
    public let run: @Sendable () async -> Value
    /// Set when the value arrives by callback (an `add`): `subscribe` calls its argument
    /// once with the value, from whichever thread produced it. A caller that only forwards
    /// the value (the connection handler writing a reply) uses it instead of a task per `run`.
    public let subscribe: (@Sendable (@escaping @Sendable (Value) -> Void) -> Void)?

    public init(_ run: @escaping @Sendable () async -> Value) {
        self.run = run
        self.subscribe = nil
    }

    public init(subscribe: @escaping @Sendable (@escaping @Sendable (Value) -> Void) -> Void) {
        self.subscribe = subscribe
        self.run = { await withCheckedContinuation { continuation in subscribe { continuation.resume(returning: $0) } } }
    }

    public static func now(_ value: Value) -> Deferred {
        Deferred { value }
    }
}

/// A connected app process, as the engine sees it: where its events go.
public protocol AppLink: AnyObject, Sendable {
    func send(_ event: DaemonEvent)
}

/// Starts an app's executable from its manifest when a response or a wake needs it.
public protocol AppLauncher: Sendable {
    /// `state` is how the app should consider itself: `.active` for an action with the
    /// foreground option or the default action, `.background` otherwise.
    /// `reason`: a response waits for the app, or a silent push (docs/app-ipc.md).
    func launch(_ app: AppRecord, state: AppState, reason: LaunchReason) async throws
    /// The same, with the desktop's activation token for the window the app opens
    /// (`XDG_ACTIVATION_TOKEN`; from the notification server's `ActivationToken`), when there is one.
    func launch(_ app: AppRecord, state: AppState, reason: LaunchReason, activationToken: String?) async throws
}

extension AppLauncher {
    /// A launcher that has no use for an activation token launches as without one.
    public func launch(_ app: AppRecord, state: AppState, reason: LaunchReason, activationToken: String?) async throws {
        try await launch(app, state: state, reason: reason)
    }
}

/// A launcher that launches nothing: for an engine with no app processes (tests of the engine alone).
public struct NoLauncher: AppLauncher {
    public init() {}
    public func launch(_ app: AppRecord, state: AppState, reason: LaunchReason) async throws {}
}

public struct EngineConfiguration: Sendable {
    public var clock: any WallClock
    public var store: any DeviceStore
    public var attachments: AttachmentStore
    public var consent: any ConsentProvider
    public var presenters: [any Presenter]
    public var launcher: any AppLauncher
    /// Pending requests kept per app: nil keeps all; 64 is iOS's limit (the most recently
    /// added are kept, older ones dropped silently, as iOS 11 and later do).
    public var pendingLimit: Int?
    /// Delivered notifications kept per app, as the oldest drop off Notification Center: past
    /// it the oldest leave the list and the presenters (`NotificationEngine.listGrew`). The
    /// list is trimmed once a tenth of the limit (at least one) has come since the last trim,
    /// and at an app's first notification after the engine starts, so it never holds more
    /// than the limit plus a tenth of it. Nil keeps all (an unbounded list: tests only).
    public var deliveredLimit: Int?
    /// How long a foreground app's delegate may take to answer `willPresent`; after that
    /// the notification is not presented, as on iOS.
    public var presentationTimeout: TimeInterval
    /// The device's time zone, for calendar triggers without one of their own.
    public var timeZone: TimeZone
    /// Runs service extensions on pushes with `mutable-content`; nil presents pushes as sent.
    public var serviceExtensions: (any ServiceExtensionRunning)?
    public var logger: Logger
    /// The scheduler's longest sleep: it wakes at least this often and looks at its queue
    /// again, so a fire date centuries ahead (or a clock that jumps) never becomes one sleep.
    public var maximumSleep: TimeInterval = EngineConfiguration.defaultMaximumSleep

    /// One hour.
    public static let defaultMaximumSleep: TimeInterval = 3_600

    public init(
        clock: any WallClock = SystemWallClock(),
        store: any DeviceStore,
        attachments: AttachmentStore,
        consent: any ConsentProvider = FixedConsent.autoDeny,
        presenters: [any Presenter] = [],
        launcher: any AppLauncher = NoLauncher(),
        pendingLimit: Int? = nil,
        deliveredLimit: Int? = EngineConfiguration.defaultDeliveredLimit,
        presentationTimeout: TimeInterval = 5,
        timeZone: TimeZone = .current,
        serviceExtensions: (any ServiceExtensionRunning)? = nil,
        logger: Logger = Logger(label: "tidings.engine")
    ) {
        self.serviceExtensions = serviceExtensions
        self.clock = clock
        self.store = store
        self.attachments = attachments
        self.consent = consent
        self.presenters = presenters
        self.launcher = launcher
        self.pendingLimit = pendingLimit
        self.deliveredLimit = deliveredLimit.map { max(1, $0) }
        self.presentationTimeout = presentationTimeout
        self.timeZone = timeZone
        self.logger = logger
    }

    /// iOS's pending limit per app.
    public static let iOSPendingLimit = 64
    /// Delivered notifications kept per app by default.
    public static let defaultDeliveredLimit = 1_000
}

/// One entry of the fire queue: the earliest date first, then the oldest key.
/// A queue entry taken off when due, with the store's answer: nil when it no longer stands;
/// with an outcome when the store fired it there and then (decided by `settings`).
struct FiredEntry: Sendable {
    let item: FireItem
    let now: Date
    let due: DueFire?
    let settings: NotificationSettingsValue?
    let durable: StoreTicket<DueFire?>
}

struct FireItem: Comparable, Sendable {
    var date: Date
    var key: Int64

    static func < (lhs: FireItem, rhs: FireItem) -> Bool {
        lhs.date != rhs.date ? lhs.date < rhs.date : lhs.key < rhs.key
    }
}
