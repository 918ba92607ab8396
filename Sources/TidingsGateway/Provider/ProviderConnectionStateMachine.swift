import NIOCore
import NIOHTTP2
import TidingsCore
import TidingsStorage

/// One request stream while its headers and body arrive.
struct ProviderRequestStream {
    var head: Result<ProviderRequestHead, ProviderRequestError>
    /// The largest body kept (the push type's limit; 0 after a header error).
    let bodyLimit: Int
    /// The `content-length` announced, which the body must match (`HTTP2HeaderBlockRules`).
    let contentLength: Int?
    var body: ByteBuffer?
    var bodyBytes = 0
    /// Flow-controlled bytes received on the stream and not yet given back.
    var unacknowledged = 0
    /// When the headers came (the gateway's clock): `IdleTimeout` counts from here.
    let openedAt: EpochMilliseconds

    init(head: Result<ProviderRequestHead, ProviderRequestError>, contentLength: Int?, openedAt: EpochMilliseconds) {
        self.head = head
        self.contentLength = contentLength
        self.openedAt = openedAt
        if case .success(let h) = head { bodyLimit = h.maximumPayloadSize } else { bodyLimit = 0 }
    }

    /// The `apns-id` an answer carries.
    var apnsID: String {
        switch head {
        case .success(let head): return head.apnsID.rawValue
        case .failure(let failure): return failure.apnsIDEcho
        }
    }

    /// One DATA frame: the body grows (up to the push type's limit; beyond it only the
    /// count, for `PayloadTooLarge`); `windowUpdate` is set when the stream's credit is due.
    /// Returns false when the body has outgrown its `content-length`.
    mutating func received(_ payload: HTTP2Frame.FramePayload.Data, flowControlled: Int, windowUpdateThreshold: Int,
                           windowUpdate: inout Int) -> Bool {
        if !payload.endStream {
            unacknowledged += flowControlled
            if unacknowledged >= windowUpdateThreshold {
                windowUpdate = unacknowledged
                unacknowledged = 0
            }
        }
        if case .byteBuffer(var chunk) = payload.data, chunk.readableBytes > 0 {
            bodyBytes += chunk.readableBytes
            if bodyBytes <= bodyLimit {
                if body == nil { body = chunk } else { body!.writeBuffer(&chunk) }
            }
        }
        if let contentLength, bodyBytes > contentLength { return false }
        return true
    }
}

/// The life of a provider connection's streams, and of the connection itself, as a pure
/// state machine: `ProviderConnectionHandler` feeds it what happened (a stream's headers, its
/// data, its end, a lookup done, a commit done, a reset from the client, a timer tick,
/// shutdown) and executes the action it returns. Nothing here touches a channel or a clock.
///
/// A stream is, in order:
/// 1. *receiving* — headers came, the body may still come (`receiving`);
/// 2. *processing* — the request ended and is being checked, looked up or committed
///    (`processing`); a reset from the client marks it *cancelled*: its answer is dropped
///    (a cancelled lookup is abandoned; a commit already under way still stores the push);
/// 3. *closed* — answered, refused, reset, or timed out: the machine forgets it.
///
/// Until the connection's first valid provider token, only `unauthenticatedStreamLimit`
/// streams may be receiving or processing at once: another is refused (`REFUSED_STREAM`),
/// whatever the client made of the SETTINGS frame that says so.
struct ProviderConnectionStateMachine {
    struct Configuration {
        var unauthenticatedStreamLimit: Int
        /// A request whose stream has not ended this long after its headers: `IdleTimeout`.
        var requestTimeout: EpochMilliseconds
        /// A connection that has not authenticated a request this long after it began: GOAWAY.
        var authenticationTimeout: EpochMilliseconds
        /// An authenticated connection that received nothing this long: PING.
        var pingInterval: EpochMilliseconds
        /// A PING not acknowledged this long after it was sent: GOAWAY and close.
        var pingTimeout: EpochMilliseconds

        init(unauthenticatedStreamLimit: Int, requestTimeout: EpochMilliseconds, authenticationTimeout: EpochMilliseconds,
             pingInterval: EpochMilliseconds, pingTimeout: EpochMilliseconds) {
            self.unauthenticatedStreamLimit = unauthenticatedStreamLimit
            self.requestTimeout = requestTimeout
            self.authenticationTimeout = authenticationTimeout
            self.pingInterval = pingInterval
            self.pingTimeout = pingTimeout
        }

        init(_ configuration: GatewayConfiguration) {
            self.init(unauthenticatedStreamLimit: configuration.unauthenticatedStreamLimit,
                      requestTimeout: configuration.providerRequestTimeout.milliseconds,
                      authenticationTimeout: configuration.providerAuthenticationTimeout.milliseconds,
                      pingInterval: configuration.providerPingInterval.milliseconds,
                      pingTimeout: configuration.providerPingTimeout.milliseconds)
        }
    }

    let configuration: Configuration
    /// Streams whose request has not ended.
    private(set) var receiving: [HTTP2StreamID: ProviderRequestStream] = [:]
    /// Requests that ended and are not answered yet, and whether the client reset each since.
    private var processing = ProcessingStreams()
    private var cancelledCount = 0
    private(set) var isAuthenticated = false
    /// The highest stream whose request was taken (every GOAWAY's `last_stream_id`).
    private(set) var highestStreamID: HTTP2StreamID = .rootStream
    private(set) var isShuttingDown = false
    private var isClosed = false

    private let connectedAt: EpochMilliseconds
    private var lastReadAt: EpochMilliseconds
    private var readSinceTick = false
    private var pingSentAt: EpochMilliseconds?
    private var pingsSent: UInt64 = 0

    init(configuration: Configuration, now: EpochMilliseconds) {
        self.configuration = configuration
        self.connectedAt = now
        self.lastReadAt = now
    }

    /// Requests taken and not answered (cancelled ones included: their commit may be under way).
    var inFlight: Int { processing.count }

    /// Streams that count against the stream limit: receiving, or processing and not reset.
    var activeStreams: Int { receiving.count + processing.count - cancelledCount }

    // MARK: Streams

    enum OpenAction: Equatable {
        /// The stream is receiving.
        case opened
        /// `RST_STREAM(REFUSED_STREAM)`: too many streams before the first valid token.
        case refused
    }

    /// A new stream's valid header block.
    mutating func streamOpened(_ streamID: HTTP2StreamID, _ stream: ProviderRequestStream) -> OpenAction {
        if !isAuthenticated, activeStreams >= configuration.unauthenticatedStreamLimit { return .refused }
        receiving[streamID] = stream
        if streamID > highestStreamID { highestStreamID = streamID }
        return .opened
    }

    /// Whether the stream is receiving (its next HEADERS are trailers). A new stream's ID is
    /// above every earlier one (RFC 9113 § 5.1.1; NIOHTTP2 refuses a lower one), so its HEADERS
    /// need no lookup.
    func isReceiving(_ streamID: HTTP2StreamID) -> Bool { streamID <= highestStreamID && receiving[streamID] != nil }

    enum DataAction: Equatable {
        /// Not a stream this machine knows (ended, refused, reset): ignored.
        case unknownStream
        /// Kept; `windowUpdate` > 0: the stream's credit is due.
        case received(windowUpdate: Int)
        /// The body outgrew its `content-length`: reset the stream with `PROTOCOL_ERROR`.
        case malformed
    }

    /// One DATA frame of a receiving stream (changed in place: a copy out of the dictionary
    /// and back retained and released every string of the request's head per frame).
    mutating func receivedData(_ streamID: HTTP2StreamID, _ payload: HTTP2Frame.FramePayload.Data, flowControlled: Int,
                               windowUpdateThreshold: Int) -> DataAction {
        var windowUpdate = 0
        let within: Bool? = receiving[streamID]?.received(payload, flowControlled: flowControlled,
                                                         windowUpdateThreshold: windowUpdateThreshold, windowUpdate: &windowUpdate)
        guard let within else { return .unknownStream }
        guard within else {
            receiving[streamID] = nil
            return .malformed
        }
        return .received(windowUpdate: windowUpdate)
    }

    /// A malformed block or body on a receiving stream: it is reset and forgotten.
    mutating func streamMalformed(_ streamID: HTTP2StreamID) {
        receiving[streamID] = nil
    }

    enum EndAction {
        /// Not a receiving stream.
        case none
        /// The body does not match its `content-length`: `RST_STREAM(PROTOCOL_ERROR)`.
        case malformed
        /// The head was invalid: answer the error now (the stream is closed by it).
        case reject(ProviderRequestError)
        /// Check, authenticate, look up and commit; answer through `answer(_:)`.
        case process(ProviderRequestHead, body: ByteBuffer?, bodyBytes: Int)
    }

    /// The request's stream ended (END_STREAM on its headers, data or trailers).
    mutating func requestEnded(_ streamID: HTTP2StreamID) -> EndAction {
        guard let stream = receiving.removeValue(forKey: streamID) else { return .none }
        if let contentLength = stream.contentLength, stream.bodyBytes != contentLength { return .malformed }
        switch stream.head {
        case .failure(let failure):
            return .reject(failure)
        case .success(let head):
            processing.add(streamID)
            return .process(head, body: stream.body, bodyBytes: stream.bodyBytes)
        }
    }

    /// `RST_STREAM` from the client: a receiving stream is forgotten; a processing one is
    /// cancelled (its answer will be dropped: writing it would be an error on a closed stream).
    mutating func streamReset(_ streamID: HTTP2StreamID) {
        if receiving.removeValue(forKey: streamID) != nil { return }
        if processing.cancel(streamID) { cancelledCount += 1 }
    }

    /// A lookup for a processing request came back: whether to go on with it. A cancelled
    /// request is abandoned here (nothing was committed) and forgotten.
    mutating func lookupCompleted(_ streamID: HTTP2StreamID) -> Bool {
        switch processing.cancelled(streamID) {
        case false?: return true
        case true?:
            _ = processing.remove(streamID)
            cancelledCount -= 1
            return false
        case nil: return false
        }
    }

    enum AnswerAction: Equatable {
        /// Write the response.
        case send
        /// The client reset the stream (or it is unknown): nothing is written.
        case drop
    }

    /// A processing request has its answer (an error, or committed).
    mutating func answer(_ streamID: HTTP2StreamID) -> AnswerAction {
        switch processing.remove(streamID) {
        case false?: return .send
        case true?:
            cancelledCount -= 1
            return .drop
        case nil: return .drop
        }
    }

    /// Whether a `RST_STREAM` from the client for this stream would close nothing: the stream
    /// was taken and is neither receiving nor processing (answered, refused or reset), so the
    /// reset is no attack (RFC 9113 § 5.1) and need not count against the reset rate limit.
    func isClosedStream(_ streamID: HTTP2StreamID) -> Bool {
        streamID <= highestStreamID && receiving[streamID] == nil && processing.cancelled(streamID) != false
    }

    /// A provider token was verified: true the first time (the stream limit is raised then).
    mutating func authenticated() -> Bool {
        if isAuthenticated { return false }
        isAuthenticated = true
        return true
    }

    // MARK: Shutdown

    /// Graceful shutdown: the GOAWAY's `last_stream_id`, or nil when already shutting down.
    mutating func beginShutdown() -> HTTP2StreamID? {
        guard !isShuttingDown else { return nil }
        isShuttingDown = true
        return highestStreamID
    }

    /// Whether to close the connection now (shutting down, nothing left to answer); true once.
    mutating func closeIfDrained() -> Bool {
        guard isShuttingDown, !isClosed, receiving.isEmpty, processing.isEmpty else { return false }
        isClosed = true
        return true
    }

    /// The connection is closing for another reason (a liveness failure): nothing more to do.
    mutating func closing() {
        isShuttingDown = true
        isClosed = true
    }

    // MARK: Time

    /// Something arrived from the client (cheap: the clock is read at the next tick).
    mutating func receivedBytes() { readSinceTick = true }

    /// A PING acknowledgement: the one outstanding, if its payload is ours.
    mutating func receivedPingAck(_ data: UInt64) {
        if pingSentAt != nil, data == pingsSent { pingSentAt = nil }
    }

    enum Liveness: Equatable {
        case fine
        /// Send `PING` with this payload.
        case ping(UInt64)
        /// Not authenticated in time: GOAWAY `{"reason":"IdleTimeout"}`, then close once drained.
        case authenticationTimedOut(lastStreamID: HTTP2StreamID)
        /// No PING acknowledgement in time: GOAWAY `{"reason":"IdleTimeout"}` and close now.
        case pingTimedOut(lastStreamID: HTTP2StreamID)
    }

    struct TickActions {
        /// Requests to answer `IdleTimeout` (then reset), in stream order.
        var stalled: [(streamID: HTTP2StreamID, apnsID: String)] = []
        var liveness: Liveness = .fine
    }

    /// The periodic check: stalled requests, authentication deadline, PING liveness.
    mutating func tick(now: EpochMilliseconds) -> TickActions {
        var actions = TickActions()
        if readSinceTick {
            readSinceTick = false
            lastReadAt = now
        }
        if !receiving.isEmpty {
            let cutoff = now &- configuration.requestTimeout
            var stalled: [(streamID: HTTP2StreamID, apnsID: String)] = []
            for (streamID, stream) in receiving where stream.openedAt <= cutoff {
                stalled.append((streamID, stream.apnsID))
            }
            if !stalled.isEmpty {
                stalled.sort { $0.streamID < $1.streamID }
                for s in stalled { receiving[s.streamID] = nil }
                actions.stalled = stalled
            }
        }
        guard !isShuttingDown else { return actions }
        if !isAuthenticated {
            if now &- connectedAt >= configuration.authenticationTimeout {
                isShuttingDown = true
                actions.liveness = .authenticationTimedOut(lastStreamID: highestStreamID)
            }
        } else if let sent = pingSentAt {
            if now &- sent >= configuration.pingTimeout {
                closing()
                actions.liveness = .pingTimedOut(lastStreamID: highestStreamID)
            }
        } else if now &- lastReadAt >= configuration.pingInterval {
            pingsSent &+= 1
            pingSentAt = now
            actions.liveness = .ping(pingsSent)
        }
        return actions
    }
}

/// The requests a provider connection is processing (ended, not answered), sorted by stream
/// ID, each with whether the client reset its stream since. Requests end almost always in
/// stream order and are answered in the order they ended (the committer's batches are FIFO;
/// an error is answered at once), so adding is an append and answering removes the first or
/// the last entry; any other lookup is a binary search. (Two dictionary operations per
/// request did the same work with hashing.) At most the stream limit of entries are not
/// cancelled; cancelled ones leave when their lookup or commit completes.
struct ProcessingStreams {
    private var entries = CircularBuffer<(streamID: HTTP2StreamID, cancelled: Bool)>(initialCapacity: 8)

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// The position of `streamID`, or where it would go.
    private func position(_ streamID: HTTP2StreamID) -> (index: CircularBuffer<(streamID: HTTP2StreamID, cancelled: Bool)>.Index, found: Bool) {
        if let first = entries.first, first.streamID == streamID { return (entries.startIndex, true) }
        if let last = entries.last, last.streamID <= streamID {
            return last.streamID == streamID ? (entries.index(before: entries.endIndex), true) : (entries.endIndex, false)
        }
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[entries.index(entries.startIndex, offsetBy: middle)].streamID < streamID { low = middle + 1 } else { high = middle }
        }
        let index = entries.index(entries.startIndex, offsetBy: low)
        return (index, index != entries.endIndex && entries[index].streamID == streamID)
    }

    /// A request that ended (not already processing).
    mutating func add(_ streamID: HTTP2StreamID) {
        let (index, found) = position(streamID)
        guard !found else { return }
        if index == entries.endIndex { entries.append((streamID, false)) } else { entries.insert((streamID, false), at: index) }
    }

    /// Whether the request was reset by the client; nil when it is not processing.
    func cancelled(_ streamID: HTTP2StreamID) -> Bool? {
        let (index, found) = position(streamID)
        return found ? entries[index].cancelled : nil
    }

    /// Marks a processing request cancelled: true if it was processing and not cancelled yet.
    mutating func cancel(_ streamID: HTTP2StreamID) -> Bool {
        let (index, found) = position(streamID)
        guard found, !entries[index].cancelled else { return false }
        entries[index].cancelled = true
        return true
    }

    /// Forgets a request (answered or abandoned); whether it had been cancelled, nil when it was
    /// not processing.
    mutating func remove(_ streamID: HTTP2StreamID) -> Bool? {
        let (index, found) = position(streamID)
        guard found else { return nil }
        if index == entries.startIndex { return entries.removeFirst().cancelled }
        return entries.remove(at: index).cancelled
    }
}
