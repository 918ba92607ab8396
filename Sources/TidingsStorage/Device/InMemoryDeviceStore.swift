import Foundation
import Synchronization
import TidingsCore

struct InMemoryDeviceState {
    struct AppState {
        var settings: NotificationSettingsValue?
        var categories: [CategoryValue] = []
        /// identifier → key
        var pendingByID: [String: Int64] = [:]
        var delivered: [String: DeliveredNotificationValue] = [:]
        var deliveredOrder: [String] = []
        /// identifier → the push it came from
        var deliveredPush: [String: String] = [:]
        var badge = 0
    }

    var appsByID: [String: AppRecord] = [:]
    var state: [String: AppState] = [:]
    var pendingByKey: [Int64: PendingRecord] = [:]
    var nextKey: Int64 = 1
    var held: [Int64: HeldResponse] = [:]
    var nextHeldID: Int64 = 1
    var unpresented: [Int64: UnpresentedNotification] = [:]
    var nextPresentationID: Int64 = 1


    mutating func upsertApp(_ app: AppRecord) { appsByID[app.bundleIdentifier] = app }
    func app(_ bundleIdentifier: String) -> AppRecord? { appsByID[bundleIdentifier] }
    func apps() -> [AppRecord] { appsByID.values.sorted { $0.bundleIdentifier < $1.bundleIdentifier } }

    mutating func removeApp(_ bundleIdentifier: String) -> [AttachmentValue] {
        appsByID[bundleIdentifier] = nil
        let pending = removeAllPending(bundleIdentifier)
        let delivered = removeAllDelivered(bundleIdentifier)
        state[bundleIdentifier] = nil
        held = held.filter { $0.value.bundleIdentifier != bundleIdentifier }
        unpresented = unpresented.filter { $0.value.bundleIdentifier != bundleIdentifier }
        return pending.flatMap(\.content.attachments) + delivered.flatMap(\.request.content.attachments)
    }

    func settings(_ bundleIdentifier: String) -> NotificationSettingsValue? { state[bundleIdentifier]?.settings }
    mutating func setSettings(_ settings: NotificationSettingsValue, for bundleIdentifier: String) {
        state[bundleIdentifier, default: AppState()].settings = settings
    }
    func categories(_ bundleIdentifier: String) -> [CategoryValue] { state[bundleIdentifier]?.categories ?? [] }
    mutating func setCategories(_ categories: [CategoryValue], for bundleIdentifier: String) {
        state[bundleIdentifier, default: AppState()].categories = categories
    }

    mutating func addPending(_ request: NotificationRequestValue, for bundleIdentifier: String, nextFire: Date?, limit: Int?) -> PendingReplacement {
        var app = state[bundleIdentifier, default: AppState()]
        var replaced: NotificationRequestValue?
        if let old = app.pendingByID[request.identifier] {
            replaced = pendingByKey.removeValue(forKey: old)?.request
        }
        let key = nextKey
        nextKey += 1
        app.pendingByID[request.identifier] = key
        pendingByKey[key] = PendingRecord(key: key, bundleIdentifier: bundleIdentifier, request: request, nextFire: nextFire)
        var evicted: [NotificationRequestValue] = []
        if let limit, app.pendingByID.count > limit {
            // Keys grow with every add, so the smallest keys are the oldest added.
            let oldest = app.pendingByID.sorted { $0.value < $1.value }.prefix(app.pendingByID.count - limit)
            for (identifier, key) in oldest {
                app.pendingByID[identifier] = nil
                if let record = pendingByKey.removeValue(forKey: key) { evicted.append(record.request) }
            }
        }
        state[bundleIdentifier] = app
        return PendingReplacement(key: key, replacedPending: replaced, evicted: evicted)
    }

    func pending(_ bundleIdentifier: String) -> [NotificationRequestValue] {
        (state[bundleIdentifier]?.pendingByID.values.sorted() ?? []).compactMap { pendingByKey[$0]?.request }
    }

    func pendingRecord(key: Int64) -> PendingRecord? { pendingByKey[key] }

    func pendingRecords(_ bundleIdentifier: String) -> [PendingRecord] {
        (state[bundleIdentifier]?.pendingByID.values.sorted() ?? []).compactMap { pendingByKey[$0] }
    }

    func pendingRequest(_ identifier: String, for bundleIdentifier: String) -> NotificationRequestValue? {
        state[bundleIdentifier]?.pendingByID[identifier].flatMap { pendingByKey[$0]?.request }
    }

    mutating func removePending(_ identifiers: [String], for bundleIdentifier: String) -> [NotificationRequestValue] {
        guard var app = state[bundleIdentifier] else { return [] }
        var removed: [NotificationRequestValue] = []
        for identifier in identifiers {
            if let key = app.pendingByID.removeValue(forKey: identifier), let record = pendingByKey.removeValue(forKey: key) {
                removed.append(record.request)
            }
        }
        state[bundleIdentifier] = app
        return removed
    }

    mutating func removeAllPending(_ bundleIdentifier: String) -> [NotificationRequestValue] {
        guard let app = state[bundleIdentifier] else { return [] }
        return removePending(Array(app.pendingByID.keys), for: bundleIdentifier)
    }

    func schedule() -> [ScheduleEntry] {
        pendingByKey.values.compactMap { record in record.nextFire.map { ScheduleEntry(key: record.key, nextFire: $0) } }
    }

    func locationPending() -> [PendingRecord] {
        pendingByKey.values.filter {
            if case .location = $0.request.trigger { return true } else { return false }
        }.sorted { $0.key < $1.key }
    }

    mutating func fire(key: Int64, at date: Date, nextFire: Date?, keepPending: Bool, deliver: Bool, present: UInt8) -> FireOutcome? {
        guard var record = pendingByKey[key] else { return nil }
        let bundleIdentifier = record.bundleIdentifier
        if keepPending {
            record.nextFire = nextFire
            pendingByKey[key] = record
        } else {
            pendingByKey[key] = nil
            state[bundleIdentifier]?.pendingByID[record.request.identifier] = nil
        }
        let notification = DeliveredNotificationValue(request: record.request, date: date)
        let replaced = deliver ? self.deliver(notification, for: bundleIdentifier, push: nil) : nil
        var presentation: Int64?
        if present != 0 {
            presentation = nextPresentationID
            unpresented[nextPresentationID] = UnpresentedNotification(id: nextPresentationID, bundleIdentifier: bundleIdentifier, notification: notification, present: present)
            nextPresentationID += 1
        }
        return FireOutcome(notification: notification, replacedDelivered: replaced, presentation: presentation)
    }

    mutating func deliver(_ notification: DeliveredNotificationValue, for bundleIdentifier: String, push: String?) -> DeliveredNotificationValue? {
        var app = state[bundleIdentifier, default: AppState()]
        let identifier = notification.request.identifier
        let replaced = app.delivered[identifier]
        // A replacement keeps its place in the list.
        if replaced == nil { app.deliveredOrder.append(identifier) }
        app.delivered[identifier] = notification
        app.deliveredPush[identifier] = push
        state[bundleIdentifier] = app
        return replaced
    }

    func delivered(_ bundleIdentifier: String) -> [DeliveredNotificationValue] {
        guard let app = state[bundleIdentifier] else { return [] }
        return app.deliveredOrder.compactMap { app.delivered[$0] }
    }

    func deliveredNotification(_ identifier: String, for bundleIdentifier: String) -> DeliveredNotificationValue? {
        state[bundleIdentifier]?.delivered[identifier]
    }

    mutating func removeDelivered(_ identifiers: [String], for bundleIdentifier: String) -> [DeliveredNotificationValue] {
        guard var app = state[bundleIdentifier] else { return [] }
        var removed: [DeliveredNotificationValue] = []
        let gone = Set(identifiers)
        unpresented = unpresented.filter { $0.value.bundleIdentifier != bundleIdentifier || !gone.contains($0.value.notification.request.identifier) }
        for identifier in identifiers {
            if let notification = app.delivered.removeValue(forKey: identifier) {
                removed.append(notification)
                app.deliveredOrder.removeAll { $0 == identifier }
            }
        }
        state[bundleIdentifier] = app
        return removed
    }

    mutating func trimDelivered(_ bundleIdentifier: String, keeping: Int) -> DeliveredTrim {
        guard let order = state[bundleIdentifier]?.deliveredOrder, order.count > max(0, keeping) else { return DeliveredTrim() }
        let removed = removeDelivered(Array(order.prefix(order.count - max(0, keeping))), for: bundleIdentifier)
        return DeliveredTrim(identifiers: removed.map(\.request.identifier),
                             withAttachments: removed.map(\.request).filter { !$0.content.attachments.isEmpty })
    }

    mutating func removeAllDelivered(_ bundleIdentifier: String) -> [DeliveredNotificationValue] {
        unpresented = unpresented.filter { $0.value.bundleIdentifier != bundleIdentifier }
        guard let app = state[bundleIdentifier] else { return [] }
        return removeDelivered(app.deliveredOrder, for: bundleIdentifier)
    }

    func badge(_ bundleIdentifier: String) -> Int { state[bundleIdentifier]?.badge ?? 0 }
    mutating func setBadge(_ count: Int, for bundleIdentifier: String) { state[bundleIdentifier, default: AppState()].badge = count }

    mutating func holdResponse(_ response: ResponseValue, for bundleIdentifier: String) -> Int64 {
        let id = nextHeldID
        nextHeldID += 1
        held[id] = HeldResponse(id: id, bundleIdentifier: bundleIdentifier, response: response)
        return id
    }

    func heldResponses(_ bundleIdentifier: String) -> [HeldResponse] {
        held.values.filter { $0.bundleIdentifier == bundleIdentifier }.sorted { $0.id < $1.id }
    }

    mutating func releaseResponse(id: Int64) { held[id] = nil }
}

/// A `DeviceStore` in memory: for tests and for an ephemeral daemon. Nothing survives the process.
public final class InMemoryDeviceStore: DeviceStore {
    private let state = Mutex(InMemoryDeviceState())

    public init() {}

    public func upsertApp(_ app: AppRecord) -> StoreTicket<Void> {
        .value(state.withLock { $0.upsertApp(app) })
    }

    public func app(_ bundleIdentifier: String) -> StoreTicket<AppRecord?> {
        .value(state.withLock { $0.app(bundleIdentifier) })
    }

    public func apps() -> StoreTicket<[AppRecord]> {
        .value(state.withLock { $0.apps() })
    }

    public func removeApp(_ bundleIdentifier: String) -> StoreTicket<[AttachmentValue]> {
        .value(state.withLock { $0.removeApp(bundleIdentifier) })
    }

    public func settings(_ bundleIdentifier: String) -> StoreTicket<NotificationSettingsValue?> {
        .value(state.withLock { $0.settings(bundleIdentifier) })
    }

    public func setSettings(_ settings: NotificationSettingsValue, for bundleIdentifier: String) -> StoreTicket<Void> {
        .value(state.withLock { $0.setSettings(settings, for: bundleIdentifier) })
    }

    public func categories(_ bundleIdentifier: String) -> StoreTicket<[CategoryValue]> {
        .value(state.withLock { $0.categories(bundleIdentifier) })
    }

    public func setCategories(_ categories: [CategoryValue], for bundleIdentifier: String) -> StoreTicket<Void> {
        .value(state.withLock { $0.setCategories(categories, for: bundleIdentifier) })
    }

    /// Keeps requests decoded: the bytes are of no use here.
    public func addPending(_ request: NotificationRequestValue, encoded: Data?, for bundleIdentifier: String, nextFire: Date?, limit: Int?) -> StoreTicket<PendingReplacement> {
        .value(state.withLock { $0.addPending(request, for: bundleIdentifier, nextFire: nextFire, limit: limit) })
    }

    public func pending(_ bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> {
        .value(state.withLock { $0.pending(bundleIdentifier) })
    }

    public func pendingRecords(_ bundleIdentifier: String) -> StoreTicket<[PendingRecord]> {
        .value(state.withLock { $0.pendingRecords(bundleIdentifier) })
    }

    public func pendingRequest(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<NotificationRequestValue?> {
        .value(state.withLock { $0.pendingRequest(identifier, for: bundleIdentifier) })
    }

    public func pendingRecord(key: Int64) -> StoreTicket<PendingRecord?> {
        .value(state.withLock { $0.pendingRecord(key: key) })
    }

    public func removePending(_ identifiers: [String], for bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> {
        .value(state.withLock { $0.removePending(identifiers, for: bundleIdentifier) })
    }

    public func removeAllPending(_ bundleIdentifier: String) -> StoreTicket<[NotificationRequestValue]> {
        .value(state.withLock { $0.removeAllPending(bundleIdentifier) })
    }

    public func schedule() -> StoreTicket<[ScheduleEntry]> {
        .value(state.withLock { $0.schedule() })
    }

    public func locationPending() -> StoreTicket<[PendingRecord]> {
        .value(state.withLock { $0.locationPending() })
    }

    public func fireApplied(key: Int64, at date: Date, nextFire: Date?, keepPending: Bool, deliver: Bool, present: UInt8) -> (applied: StoreTicket<FireOutcome?>, durable: StoreTicket<FireOutcome?>) {
        let ticket = StoreTicket<FireOutcome?>.value(state.withLock { $0.fire(key: key, at: date, nextFire: nextFire, keepPending: keepPending, deliver: deliver, present: present) })
        return (ticket, ticket)
    }

    public func presented(_ ids: [Int64]) -> StoreTicket<Void> {
        .value(state.withLock { state in for id in ids { state.unpresented[id] = nil } })
    }

    public func unpresented() -> StoreTicket<[UnpresentedNotification]> {
        .value(state.withLock { $0.unpresented.values.sorted { $0.id < $1.id } })
    }

    public func fireDue(key: Int64, due: Date, at date: Date, decide: @escaping @Sendable (PendingRecord) -> FireWrite?) -> (applied: StoreTicket<DueFire?>, durable: StoreTicket<DueFire?>) {
        let ticket = StoreTicket<DueFire?>.value(state.withLock { state -> DueFire? in
            guard let record = state.pendingByKey[key], record.nextFire == due else { return nil }
            guard let write = decide(record) else { return DueFire(record: record) }
            let outcome = state.fire(key: key, at: date, nextFire: write.nextFire, keepPending: write.keepPending, deliver: write.deliver, present: write.present)
            return DueFire(record: record, write: write, outcome: outcome)
        })
        return (ticket, ticket)
    }

    public func deliver(_ notification: DeliveredNotificationValue, for bundleIdentifier: String, push: String?) -> StoreTicket<DeliveredNotificationValue?> {
        .value(state.withLock { $0.deliver(notification, for: bundleIdentifier, push: push) })
    }

    public func deliveredPush(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<String?> {
        .value(state.withLock { state in
            guard let app = state.state[bundleIdentifier], app.delivered[identifier] != nil else { return nil }
            return app.deliveredPush[identifier]
        })
    }

    public func delivered(_ bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> {
        .value(state.withLock { $0.delivered(bundleIdentifier) })
    }

    public func deliveredNotification(_ identifier: String, for bundleIdentifier: String) -> StoreTicket<DeliveredNotificationValue?> {
        .value(state.withLock { $0.deliveredNotification(identifier, for: bundleIdentifier) })
    }

    public func removeDelivered(_ identifiers: [String], for bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> {
        .value(state.withLock { $0.removeDelivered(identifiers, for: bundleIdentifier) })
    }

    public func removeAllDelivered(_ bundleIdentifier: String) -> StoreTicket<[DeliveredNotificationValue]> {
        .value(state.withLock { $0.removeAllDelivered(bundleIdentifier) })
    }

    public func trimDelivered(_ bundleIdentifier: String, keeping: Int) -> StoreTicket<DeliveredTrim> {
        .value(state.withLock { $0.trimDelivered(bundleIdentifier, keeping: keeping) })
    }

    public func badge(_ bundleIdentifier: String) -> StoreTicket<Int> {
        .value(state.withLock { $0.badge(bundleIdentifier) })
    }

    public func setBadge(_ count: Int, for bundleIdentifier: String) -> StoreTicket<Void> {
        .value(state.withLock { $0.setBadge(count, for: bundleIdentifier) })
    }

    public func holdResponse(_ response: ResponseValue, for bundleIdentifier: String) -> StoreTicket<Int64> {
        .value(state.withLock { $0.holdResponse(response, for: bundleIdentifier) })
    }

    public func heldResponses(_ bundleIdentifier: String) -> StoreTicket<[HeldResponse]> {
        .value(state.withLock { $0.heldResponses(bundleIdentifier) })
    }

    public func releaseResponse(id: Int64) -> StoreTicket<Void> {
        .value(state.withLock { $0.releaseResponse(id: id) })
    }

}
