import TidingsStorage

/// The delivery order of one device connection, as a pure state machine.
///
/// When a device connects, its session is attached to the hub first; then its backlog is read
/// from the store in pages by sequence (`GatewayStore.pendingPushes(deviceID:after:limit:)`,
/// the first read preceded by `prepareBacklog`, which applies expiration and the storage
/// policy to the whole backlog). The next page is read only once the device has acknowledged
/// enough: at most `pagesInFlight` pages' worth of pushes are unacknowledged, so memory stays
/// bounded however large the backlog.
///
/// Pushes committed meanwhile (the hub hands them to the session after they are durable):
/// - arriving while no page read runs, they are dropped: the next read starts after they
///   arrived, so it (or a later one) contains them;
/// - arriving while a page read runs, they are held, as the read may or may not contain them.
///   When that read returns a full page, the held pushes are dropped (their sequences are
///   above the page's, so a later read contains them). When it returns a short page (the last),
///   the held pushes above the page's last sequence go out after it, in sequence order, and
///   the connection turns live.
///
/// Live, a push goes out as it commits unless its sequence is not above the highest sent
/// (then it was already sent, or left out by the store). So every push goes out once per
/// connection, in sequence order. Acknowledgements are accepted only for pushes in flight.
///
/// Live or not, at most `inFlightLimit` pushes are unacknowledged: a live connection whose
/// device falls that far behind goes back to paging (what commits meanwhile is in the store
/// and comes from the next pages), so a device that stops reading holds at most that many
/// pushes of the gateway's memory, however fast providers push to it.
struct DeviceDeliveryStateMachine: Sendable {
    /// A page to read: sequences after `after`, at most `limit`; `prepare`: the first read,
    /// which applies expiration and the storage policy to the whole backlog first.
    struct PageRequest: Sendable, Hashable {
        var after: Int64
        var limit: Int
        var prepare: Bool
        /// A catch-up read of a live connection (several nodes: `woken()`), not a backlog page.
        var catchUp: Bool = false
    }

    /// What to do after an event: send these pushes (in this order), then read this page.
    struct Actions: Sendable, Hashable {
        var send: [StoredPush] = []
        var read: PageRequest?
    }

    private enum Phase: Sendable {
        /// Paging the backlog. `reading`: a page read is under way, `held`: pushes committed
        /// since it started.
        case backlog(reading: Bool, held: [StoredPush])
        case live
        /// The connection ended or a page read failed: nothing more is sent or read.
        case closed
    }

    let pageSize: Int
    /// Unacknowledged pushes allowed before the next page: `pagesInFlight` pages' worth.
    let inFlightLimit: Int
    private var phase: Phase = .backlog(reading: false, held: [])
    private var started = false
    /// The highest sequence sent on this connection (or read from the store).
    private(set) var highestSent: Int64 = 0
    private(set) var inFlight: Set<Int64> = []
    /// Several nodes: a catch-up read runs, and a wake-up came while it ran or while the
    /// backlog was read (one more read follows).
    private var catchingUp = false
    private var wokenMeanwhile = false

    init(pageSize: Int = 1_000, pagesInFlight: Int = 2) {
        self.pageSize = max(1, pageSize)
        self.inFlightLimit = self.pageSize * max(1, pagesInFlight)
    }

    /// The session is attached: the first page to read (once).
    mutating func start() -> PageRequest? {
        guard !started, case .backlog = phase else { return nil }
        started = true
        phase = .backlog(reading: true, held: [])
        return PageRequest(after: 0, limit: pageSize, prepare: true)
    }

    /// New commits for this device (in commit order): returns what to send now.
    mutating func committed(_ pushes: [StoredPush]) -> [StoredPush] {
        switch phase {
        case .backlog(reading: true, var held):
            held.append(contentsOf: pushes)
            phase = .backlog(reading: true, held: held)
            return []
        case .backlog(reading: false, _), .closed:
            return []
        case .live:
            var out: [StoredPush] = []
            for p in pushes.sorted(by: { $0.sequence < $1.sequence }) where p.sequence > highestSent {
                guard inFlight.count < inFlightLimit else {
                    // The device is a window behind: page from the store once it acknowledges (a
                    // catch-up read under way is superseded by the pages; its result is ignored).
                    phase = .backlog(reading: false, held: [])
                    catchingUp = false
                    break
                }
                out.append(p)
                highestSent = p.sequence
                inFlight.insert(p.sequence)
            }
            return out
        }
    }

    /// A page read returned (`page` in sequence order, as asked: at most `pageSize`).
    mutating func pageLoaded(_ page: [StoredPush]) -> Actions {
        guard case .backlog(reading: true, let held) = phase else { return Actions() }
        var actions = Actions()
        for p in page.sorted(by: { $0.sequence < $1.sequence }) where p.sequence > highestSent {
            actions.send.append(p)
            highestSent = p.sequence
        }
        if page.count < pageSize {
            // The last page: what committed during this read and is not in it goes after it,
            // as far as the window allows (else the rest comes from the next page).
            var full = false
            for p in held.sorted(by: { $0.sequence < $1.sequence }) where p.sequence > highestSent {
                guard inFlight.count + actions.send.count < inFlightLimit else {
                    full = true
                    break
                }
                actions.send.append(p)
                highestSent = p.sequence
            }
            phase = full ? .backlog(reading: false, held: []) : .live
            if !full, wokenMeanwhile {
                wokenMeanwhile = false
                catchingUp = true
                actions.read = PageRequest(after: highestSent, limit: pageSize, prepare: false, catchUp: true)
            }
        } else {
            phase = .backlog(reading: false, held: [])
        }
        for p in actions.send { inFlight.insert(p.sequence) }
        if actions.read == nil { actions.read = nextPage() }
        return actions
    }

    /// A page read failed: the connection is to be closed with an error. False when it no
    /// longer matters (the connection already ended).
    mutating func pageFailed() -> Bool {
        guard case .backlog(reading: true, _) = phase else { return false }
        phase = .closed
        return true
    }

    /// A device acknowledgement: `accepted` when it names a push in flight on this connection;
    /// `read` when it made room for the next page.
    mutating func acknowledged(_ sequence: Int64) -> (accepted: Bool, read: PageRequest?) {
        let accepted = inFlight.remove(sequence) != nil
        return (accepted, accepted ? nextPage() : nil)
    }

    /// The connection ended.
    mutating func closed() {
        phase = .closed
    }

    /// Several gateway nodes (docs/scaling.md): pushes committed on any node reach this
    /// connection by a read of the store after the highest sequence sent, instead of from the
    /// commit (a node's own commits and another node's arrive in no fixed order, and sequences
    /// are committed in order, so a read after `highestSent` misses none). Live and no read
    /// running: that read. Otherwise it is remembered: the running read, or the end of the
    /// backlog, is followed by one more.
    mutating func woken() -> PageRequest? {
        switch phase {
        case .live where !catchingUp:
            catchingUp = true
            return PageRequest(after: highestSent, limit: pageSize, prepare: false, catchUp: true)
        case .closed:
            return nil
        default:
            wokenMeanwhile = true
            return nil
        }
    }

    /// A catch-up read returned: send what is above `highestSent`; read again if the page was
    /// full or a wake-up came meanwhile.
    mutating func caughtUp(_ page: [StoredPush]) -> Actions {
        guard case .live = phase else { return Actions() }
        catchingUp = false
        var actions = Actions(send: committed(page))
        // A window behind: paging again (`committed`), which reads what is left.
        guard isLive else { return actions }
        if page.count >= pageSize || wokenMeanwhile {
            wokenMeanwhile = false
            catchingUp = true
            actions.read = PageRequest(after: highestSent, limit: pageSize, prepare: false, catchUp: true)
        }
        return actions
    }

    /// A catch-up read failed (the store is down): the connection stays; the next wake-up
    /// (or the wake of every device when the node's wake-up channel comes back) reads again.
    mutating func catchUpFailed() {
        catchingUp = false
    }

    /// The next page, if the backlog is not exhausted, no read runs and there is room.
    private mutating func nextPage() -> PageRequest? {
        guard case .backlog(reading: false, _) = phase, inFlight.count + pageSize <= inFlightLimit else { return nil }
        phase = .backlog(reading: true, held: [])
        return PageRequest(after: highestSent, limit: pageSize, prepare: false)
    }

    var isLive: Bool { if case .live = phase { true } else { false } }
    var isReadingPage: Bool { if case .backlog(reading: true, _) = phase { true } else { false } }
}
