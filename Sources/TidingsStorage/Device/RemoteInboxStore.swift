import Foundation
import Synchronization
import TidingsCore

/// A delivery event (`presented`, `answered`) the gateway has not confirmed yet.
///
/// One event is one stage of one push: equal (and hashed) by stage, apns-id and sequence, not
/// by `occurredAt` — reported twice, it is kept once, with its first time.
public struct PendingDeliveryEvent: Sendable, Hashable {
    public var event: String
    public var apnsID: String
    /// The push's sequence number at the gateway (sent with the event, so the gateway finds
    /// the push by key); nil for events kept before it was recorded.
    public var sequence: Int64?
    /// When it happened (milliseconds since 1970, the daemon's clock), sent with it for the
    /// gateway to record; nil for events kept before the time was.
    public var occurredAt: Int64?

    public init(event: String, apnsID: String, sequence: Int64? = nil, occurredAt: Int64? = nil) {
        self.event = event
        self.apnsID = apnsID
        self.sequence = sequence
        self.occurredAt = occurredAt
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.event == b.event && a.apnsID == b.apnsID && a.sequence == b.sequence
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(event)
        hasher.combine(apnsID)
        hasher.combine(sequence)
    }

    /// As the device channel sends it.
    public var item: DeviceEventItem {
        DeviceEventItem(apnsID: apnsID, event: event, sequence: sequence, occurredAt: occurredAt)
    }
}

/// The daemon's inbox of remote notifications (docs/remote-notifications.md): a push is made
/// durable here, and only then acknowledged to the gateway, so a `kill -9` between receipt and
/// acknowledgement loses nothing; a redelivered push finds its entry and is not handed to the
/// engine twice. Also keeps delivery events until the gateway confirms them and app removals
/// the gateway has not heard of yet.
///
/// Every operation may block on the disk: implementations do that work off Swift's
/// cooperative pool (the SQLite one on its database's own serial queue). Backends:
/// `InMemoryRemoteInbox` (tests) and `SQLiteRemoteInbox` (`remote.sqlite`); one conformance
/// suite (`RemoteInboxConformanceTests`) covers both.
public protocol RemoteInboxStore: Sendable {
    /// Makes the pushes durable together — one transaction, one commit — and returns for each
    /// whether it is new (false: a redelivery of a push already here, by apns-id and
    /// sequence). Nothing is stored if it throws.
    func receive(_ pushes: [RemotePush], at date: Date) async throws -> [Bool]
    /// The pushes received and not yet marked processed, in the order received (what a
    /// restart hands the engine again), after `position` (nil: from the first), at most
    /// `limit`: read in pages, so a large backlog is never in memory at once.
    func unprocessed(after position: RemoteInboxPosition?, limit: Int) async throws -> [(position: RemoteInboxPosition, push: RemotePush)]
    /// Marks pushes as handed to the engine, forgets the events the gateway has confirmed
    /// since the last write (as `clearEvents`) and keeps the delivery events of that hand-off
    /// (as `addPendingEvents`; after the clearing, so an event confirmed and then kept again is
    /// kept), in one write: all or nothing. It needs no fsync: a mark lost to a power failure
    /// only means the push is recovered, and the engine's delivered list keeps it from showing
    /// twice (and has its `presented` event reported again); a clearing lost only means an
    /// event is sent again. Pushes and events not in the inbox are ignored.
    func markProcessed(_ pushes: [RemotePush], keeping events: [PendingDeliveryEvent], clearing confirmed: [PendingDeliveryEvent]) async throws
    /// Forgets processed pushes received before `date` (they can no longer come again).
    /// At most `limit` of them, oldest first, in one write; returns how many (callers repeat
    /// while it returns `limit`, so receipt is never held behind a month of deletions).
    func prune(before date: Date, limit: Int) async throws -> Int
    /// How many pushes the inbox holds, processed or not.
    func count() async throws -> Int

    /// Keeps delivery events until the gateway confirms them (`clearEvents`), in one write;
    /// an event already kept (the same push — sequence and apns-id — and stage) is kept once.
    /// Past `maximumPendingEvents` kept, the oldest are dropped.
    func addPendingEvents(_ events: [PendingDeliveryEvent]) async throws
    /// The oldest events not yet confirmed, at most `limit`, oldest first: in the order of
    /// their pushes at the gateway (by sequence; events kept without one first), then by
    /// apns-id and stage.
    func pendingEvents(limit: Int) async throws -> [PendingDeliveryEvent]
    /// Forgets events the gateway confirmed (each by sequence, apns-id and stage).
    func clearEvents(_ events: [PendingDeliveryEvent]) async throws

    /// Keeps an app removal until the gateway confirms it (`clearRemoval`).
    func addRemoval(_ bundle: String) async throws
    /// The removals not yet confirmed, by bundle ID.
    func removals() async throws -> [String]
    func clearRemoval(_ bundle: String) async throws
}

extension RemoteInboxStore {
    /// Marks pushes as handed to the engine (`markProcessed(_:keeping:clearing:)` without events).
    public func markProcessed(_ pushes: [RemotePush]) async throws {
        try await markProcessed(pushes, keeping: [], clearing: [])
    }

    /// Marks pushes and keeps their hand-off's events, clearing none.
    public func markProcessed(_ pushes: [RemotePush], keeping events: [PendingDeliveryEvent]) async throws {
        try await markProcessed(pushes, keeping: events, clearing: [])
    }

    /// Every push not yet marked processed, in the order received (tests and tools; the
    /// gateway link reads them in pages).
    public func unprocessed() async throws -> [RemotePush] {
        var all: [RemotePush] = []
        var after: RemoteInboxPosition?
        while true {
            let page = try await unprocessed(after: after, limit: 1_000)
            all.append(contentsOf: page.map(\.push))
            guard let last = page.last else { return all }
            after = last.position
        }
    }
}

/// Where a push stands in the inbox's order of receipt: the time received (milliseconds),
/// then the gateway's sequence, then the apns-id.
public struct RemoteInboxPosition: Sendable, Hashable, Comparable {
    public var receivedAt: Int64
    public var sequence: Int64
    public var apnsID: String

    public init(receivedAt: Int64, sequence: Int64, apnsID: String) {
        self.receivedAt = receivedAt
        self.sequence = sequence
        self.apnsID = apnsID
    }

    public static func < (a: RemoteInboxPosition, b: RemoteInboxPosition) -> Bool {
        (a.receivedAt, a.sequence, a.apnsID) < (b.receivedAt, b.sequence, b.apnsID)
    }
}

public enum RemoteInboxDefaults {
    /// Delivery events kept for the gateway at most; past it the oldest are dropped (delivery
    /// inspection only; a gateway away that long has its pushes expire too).
    public static let maximumPendingEvents = 10_000
    /// Processed pushes are forgotten this long after receipt: the gateway keeps a push at
    /// most 30 days, so it never sends one again after that.
    public static let processedRetention: TimeInterval = 31 * 24 * 3600
}

/// The inbox in memory: nothing survives the process (tests, ephemeral use).
public final class InMemoryRemoteInbox: RemoteInboxStore {
    private struct Entry {
        var push: RemotePush
        var receivedAt: Date
        var processed = false
    }

    private struct Key: Hashable {
        let apnsID: String
        let sequence: Int64
    }

    private struct State {
        /// In the order received.
        var entries: [Entry] = []
        var index: [Key: Int] = [:]
        var events: [PendingDeliveryEvent] = []
        var removals: Set<String> = []

        mutating func reindex() {
            index = [:]
            for (i, e) in entries.enumerated() { index[Key(apnsID: e.push.apnsID, sequence: e.push.sequence)] = i }
        }
    }

    private let state = Mutex(State())
    public let maximumPendingEvents: Int

    public init(maximumPendingEvents: Int = RemoteInboxDefaults.maximumPendingEvents) {
        self.maximumPendingEvents = maximumPendingEvents
    }

    public func receive(_ pushes: [RemotePush], at date: Date) async throws -> [Bool] {
        state.withLock { s in
            pushes.map { push in
                let key = Key(apnsID: push.apnsID, sequence: push.sequence)
                guard s.index[key] == nil else { return false }
                s.index[key] = s.entries.count
                s.entries.append(Entry(push: push, receivedAt: date))
                return true
            }
        }
    }

    public func unprocessed(after position: RemoteInboxPosition?, limit: Int) async throws -> [(position: RemoteInboxPosition, push: RemotePush)] {
        state.withLock { s in
            // As SQLite orders them: by the time received (milliseconds), then sequence, then apns-id.
            let all = s.entries.filter { !$0.processed }.map { e in
                (position: RemoteInboxPosition(receivedAt: Int64((e.receivedAt.timeIntervalSince1970 * 1000).rounded(.down)),
                                               sequence: e.push.sequence, apnsID: e.push.apnsID), push: e.push)
            }
            return Array(all.filter { position == nil || $0.position > position! }.sorted { $0.position < $1.position }.prefix(max(0, limit)))
        }
    }

    public func markProcessed(_ pushes: [RemotePush], keeping events: [PendingDeliveryEvent], clearing confirmed: [PendingDeliveryEvent]) async throws {
        state.withLock { s in
            for push in pushes {
                if let i = s.index[Key(apnsID: push.apnsID, sequence: push.sequence)] { s.entries[i].processed = true }
            }
            clear(confirmed, in: &s)
            keep(events, in: &s)
        }
    }

    public func prune(before date: Date, limit: Int) async throws -> Int {
        state.withLock { s in
            var removed = 0
            s.entries.removeAll { entry in
                guard removed < limit, entry.processed, entry.receivedAt < date else { return false }
                removed += 1
                return true
            }
            s.reindex()
            return removed
        }
    }

    public func count() async throws -> Int { state.withLock { $0.entries.count } }

    /// Where an event stands in the order of `pendingEvents`, and its identity: as the SQLite
    /// inbox's key `(sequence, apns_id, event)`, an event without a sequence first.
    private static func order(_ e: PendingDeliveryEvent) -> (Int64, String, String) { (e.sequence ?? .min, e.apnsID, e.event) }

    public func addPendingEvents(_ events: [PendingDeliveryEvent]) async throws {
        state.withLock { keep(events, in: &$0) }
    }

    /// Keeps events in `s.events`, in order: each goes where its key sorts, once; past the
    /// limit the oldest go.
    private func keep(_ events: [PendingDeliveryEvent], in s: inout State) {
        for event in events {
            let key = Self.order(event)
            var i = 0, end = s.events.count
            while i < end {
                let middle = (i + end) / 2
                if Self.order(s.events[middle]) < key { i = middle + 1 } else { end = middle }
            }
            if i == s.events.endIndex || Self.order(s.events[i]) != key { s.events.insert(event, at: i) }
        }
        if s.events.count > maximumPendingEvents { s.events.removeFirst(s.events.count - maximumPendingEvents) }
    }

    public func pendingEvents(limit: Int) async throws -> [PendingDeliveryEvent] {
        state.withLock { Array($0.events.prefix(max(0, limit))) }
    }

    public func clearEvents(_ events: [PendingDeliveryEvent]) async throws {
        state.withLock { clear(events, in: &$0) }
    }

    private func clear(_ events: [PendingDeliveryEvent], in s: inout State) {
        guard !events.isEmpty else { return }
        let gone = Set(events.map { PendingDeliveryEvent(event: $0.event, apnsID: $0.apnsID, sequence: $0.sequence ?? .min) })
        s.events.removeAll { gone.contains(PendingDeliveryEvent(event: $0.event, apnsID: $0.apnsID, sequence: $0.sequence ?? .min)) }
    }

    public func addRemoval(_ bundle: String) async throws { _ = state.withLock { $0.removals.insert(bundle) } }
    public func removals() async throws -> [String] { state.withLock { $0.removals.sorted() } }
    public func clearRemoval(_ bundle: String) async throws { _ = state.withLock { $0.removals.remove(bundle) } }
}
