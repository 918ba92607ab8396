import Foundation
import TidingsCore

/// A pending request as the scheduler sees it.
public struct PendingRecord: Sendable, Hashable {
    /// Store-assigned key; a replaced request gets a new key.
    public var key: Int64
    public var bundleIdentifier: String
    public var request: NotificationRequestValue
    /// When it fires next; nil for location triggers, which wait for a region event.
    public var nextFire: Date?

    public init(key: Int64, bundleIdentifier: String, request: NotificationRequestValue, nextFire: Date?) {
        self.key = key
        self.bundleIdentifier = bundleIdentifier
        self.request = request
        self.nextFire = nextFire
    }
}

/// A pending request's place in the schedule.
public struct ScheduleEntry: Sendable, Hashable {
    public var key: Int64
    public var nextFire: Date
    public init(key: Int64, nextFire: Date) {
        self.key = key
        self.nextFire = nextFire
    }
}

/// What `addPending` displaced.
public struct PendingReplacement: Sendable, Hashable {
    /// The key the new request got.
    public var key: Int64
    /// A pending request with the same identifier, now gone.
    public var replacedPending: NotificationRequestValue?
    /// Requests dropped to keep the per-app limit (oldest added first).
    public var evicted: [NotificationRequestValue]

    public init(key: Int64, replacedPending: NotificationRequestValue?, evicted: [NotificationRequestValue]) {
        self.key = key
        self.replacedPending = replacedPending
        self.evicted = evicted
    }
}

/// What firing a pending request did.
/// What firing a due request records, decided from its record (`DeviceStore.fireDue`).
public struct FireWrite: Sendable, Hashable {
    /// When it fires next, if it stays pending.
    public var nextFire: Date?
    public var keepPending: Bool
    /// Whether it goes to the delivered list.
    public var deliver: Bool
    /// What the presenters are to show (the engine's `Presentation` flags; 0: nothing). A
    /// fire with flags records an entry to present in the same transaction; `presented`
    /// removes it once the presenters have shown it, and `unpresented` lists what a crash
    /// left (docs/architecture.md, "Firing").
    public var present: UInt8

    public init(nextFire: Date?, keepPending: Bool, deliver: Bool, present: UInt8 = 0) {
        self.nextFire = nextFire
        self.keepPending = keepPending
        self.deliver = deliver
        self.present = present
    }
}

/// A fired notification whose presentation was recorded but not yet marked as shown: what
/// the engine presents again when it starts.
public struct UnpresentedNotification: Sendable, Hashable {
    public var id: Int64
    public var bundleIdentifier: String
    public var notification: DeliveredNotificationValue
    /// `FireWrite.present`.
    public var present: UInt8

    public init(id: Int64, bundleIdentifier: String, notification: DeliveredNotificationValue, present: UInt8) {
        self.id = id
        self.bundleIdentifier = bundleIdentifier
        self.notification = notification
        self.present = present
    }
}

/// A due request as `fireDue` found it, with the outcome when it was fired there and then.
public struct DueFire: Sendable, Hashable {
    public var record: PendingRecord
    /// What was recorded and its outcome; nil when `decide` left the firing to the caller.
    public var write: FireWrite?
    public var outcome: FireOutcome?

    public init(record: PendingRecord, write: FireWrite? = nil, outcome: FireOutcome? = nil) {
        self.record = record
        self.write = write
        self.outcome = outcome
    }
}

public struct FireOutcome: Sendable, Hashable {
    public var notification: DeliveredNotificationValue
    /// A delivered notification with the same identifier that this one replaced.
    public var replacedDelivered: DeliveredNotificationValue?
    /// The entry to present that the fire recorded (`FireWrite.present` was not 0): pass it
    /// to `presented` once the presenters have shown the notification.
    public var presentation: Int64?

    public init(notification: DeliveredNotificationValue, replacedDelivered: DeliveredNotificationValue?, presentation: Int64? = nil) {
        self.notification = notification
        self.replacedDelivered = replacedDelivered
        self.presentation = presentation
    }
}

/// A response the person made that the app has not handled yet.
public struct HeldResponse: Sendable, Hashable {
    public var id: Int64
    public var bundleIdentifier: String
    public var response: ResponseValue

    public init(id: Int64, bundleIdentifier: String, response: ResponseValue) {
        self.id = id
        self.bundleIdentifier = bundleIdentifier
        self.response = response
    }
}

/// The device's durable state: installed apps, and per app its settings, categories,
/// pending requests, delivered notifications, badge and unhandled responses.
///
/// Every operation is queued in call order and returns a `StoreTicket` that completes
/// when the operation is durable (reads: when it has run after everything before it). Backends: `InMemoryDeviceStore`
/// (tests, ephemeral use) and `SQLiteDeviceStore` (the embedded default). One
/// conformance suite (`DeviceStoreConformance`) covers both.
public protocol DeviceStore: Sendable {
    // Apps
    func upsertApp(_ app: AppRecord) -> StoreTicket<Void>
    func app(_ bundleIdentifier: String) -> StoreTicket<AppRecord?>
    func apps() -> StoreTicket<[AppRecord]>
    /// Removes the app and everything it owns; returns its attachments' paths for deletion.
    func removeApp(_ bundleIdentifier: String) -> StoreTicket<[AttachmentValue]>

    // Settings and categories
    func settings(_ bundleIdentifier: String) -> StoreTicket<NotificationSettingsValue?>
    func setSettings(_ settings: NotificationSettingsValue, for bundleIdentifier: String) -> StoreTicket<Void>
    func categories(_ bundleIdentifier: String) -> StoreTicket<[CategoryValue]>
    func setCategories(_ categories: [CategoryValue], for bundleIdentifier: String) -> StoreTicket<Void>

    // Pending
    /// Adds a request, replacing a pending one with the same identifier; when `limit` is
    /// set, drops the app's oldest-added requests beyond it. `encoded`: the request in
    /// `BinaryRequestCodec`'s form if the caller has it (the bytes the app sent, which decode
    /// to `request`); a store that keeps that form stores them as they are.
    func addPending(_ request: NotificationRequestValue, encoded: Data?, for bundleIdentifier: String, nextFire: Date?, limit: Int?) -> StoreTicket<PendingReplacement>
    func pending(_ bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]>
    /// The app's pending requests with their next fire dates, in the order they were added.
    func pendingRecords(_ bundleIdentifier: String) -> StoreTicket<[PendingRecord]>
    func pendingRecord(key: Int64) -> StoreTicket<PendingRecord?>
    /// The app's pending request with this identifier.
    func pendingRequest(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<NotificationRequestValue?>
    /// Removes pending requests by identifier; returns the removed ones.
    func removePending(_ identifiers: [String], for bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]>
    func removeAllPending(_ bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]>
    /// Every pending request's key and next fire date (scheduler recovery).
    func schedule() -> StoreTicket<[ScheduleEntry]>
    /// Every pending request waiting for a location event.
    func locationPending() -> StoreTicket<[PendingRecord]>

    /// Fires a pending request atomically: it becomes delivered (replacing a delivered
    /// notification with the same identifier), and stays pending with `nextFire` if it
    /// repeats or leaves the pending set if not. nil when the key is gone. With `deliver`
    /// false the notification is not kept as delivered (not shown in a list).
    /// The first ticket completes once the operation has run in its place in the store's
    /// order (later operations see its effect), the second once it is durable. The engine
    /// presents on the first and finishes on the second (docs/architecture.md, "Firing").
    /// `present`: as `FireWrite.present`.
    func fireApplied(key: Int64, at date: Date, nextFire: Date?, keepPending: Bool, deliver: Bool, present: UInt8) -> (applied: StoreTicket<FireOutcome?>, durable: StoreTicket<FireOutcome?>)
    /// The scheduler's step for a due queue entry, in one operation: reads the request with
    /// `key` (nil when it is gone or now fires at another date than `due`), and fires it at
    /// `date` as `fireApplied` does with the write `decide` returns for its record; when
    /// `decide` returns nil nothing changes and the caller fires it later. `decide` runs
    /// inside the store's operation: it must be quick and must not block.
    func fireDue(key: Int64, due: Date, at date: Date, decide: @escaping @Sendable (PendingRecord) -> FireWrite?) -> (applied: StoreTicket<DueFire?>, durable: StoreTicket<DueFire?>)

    /// Marks recorded presentations as shown: their entries go (`FireOutcome.presentation`).
    func presented(_ ids: [Int64]) -> StoreTicket<Void>
    /// The presentations recorded by fires and not marked as shown, oldest first: a crash
    /// came between a fire's commit and `presented`.
    func unpresented() -> StoreTicket<[UnpresentedNotification]>

    // Delivered
    /// Records a notification as delivered (remote and immediate ones), replacing one with the same identifier.
    /// `push`: the key of the remote notification it came from (`RemotePush.deliveryKey`).
    func deliver(_ notification: DeliveredNotificationValue, for bundleIdentifier: String, push: String?) -> StoreTicket<DeliveredNotificationValue?>
    /// The key of the push the delivered notification with this identifier came from; nil
    /// when it is not delivered or was not a push (or was recorded before keys were kept).
    func deliveredPush(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<String?>
    func delivered(_ bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]>
    func deliveredNotification(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<DeliveredNotificationValue?>
    func removeDelivered(_ identifiers: [String], for bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]>
    func removeAllDelivered(_ bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]>
    /// Removes the app's oldest delivered notifications past the newest `keeping` (a replaced
    /// notification counts where it first came, as the list orders it); `keeping` below zero
    /// counts as zero.
    func trimDelivered(_ bundleIdentifier: String, keeping: Int) -> StoreTicket<DeliveredTrim>

    // Badge
    func badge(_ bundleIdentifier: String) -> StoreTicket<Int>
    func setBadge(_ count: Int, for bundleIdentifier: String) -> StoreTicket<Void>

    // Responses waiting for their app
    func holdResponse(_ response: ResponseValue, for bundleIdentifier: String) -> StoreTicket<Int64>
    func heldResponses(_ bundleIdentifier: String) -> StoreTicket<[HeldResponse]>
    func releaseResponse(id: Int64) -> StoreTicket<Void>
}

/// What `trimDelivered` took out of a delivered list.
public struct DeliveredTrim: Sendable, Hashable {
    /// Their identifiers, oldest first.
    public var identifiers: [String] = []
    /// Those of their requests that may name attachment files (to release them); the others
    /// are not decoded.
    public var withAttachments: [NotificationRequestValue] = []

    public init(identifiers: [String] = [], withAttachments: [NotificationRequestValue] = []) {
        self.identifiers = identifiers
        self.withAttachments = withAttachments
    }
}

extension DeviceStore {
    /// `fireApplied` that records nothing to present.
    public func fireApplied(key: Int64, at date: Date, nextFire: Date?, keepPending: Bool, deliver: Bool) -> (applied: StoreTicket<FireOutcome?>, durable: StoreTicket<FireOutcome?>) {
        fireApplied(key: key, at: date, nextFire: nextFire, keepPending: keepPending, deliver: deliver, present: 0)
    }

    /// `addPending` without the request's bytes: the store encodes it if it needs to.
    public func addPending(_ request: NotificationRequestValue, for bundleIdentifier: String, nextFire: Date?, limit: Int?) -> StoreTicket<PendingReplacement> {
        addPending(request, encoded: nil, for: bundleIdentifier, nextFire: nextFire, limit: limit)
    }

}
