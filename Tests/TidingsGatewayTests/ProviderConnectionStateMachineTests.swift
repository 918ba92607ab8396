import NIOCore
import NIOHTTP2
import Testing
import TidingsCore
import TidingsStorage
@testable import TidingsGateway

/// `ProviderConnectionStateMachine`: every step of a stream's life and of the connection's, as
/// pure transitions.
@Suite("Provider connection state machine")
struct ProviderConnectionStateMachineTests {
    typealias Machine = ProviderConnectionStateMachine
    static let configuration = Machine.Configuration(unauthenticatedStreamLimit: 1, requestTimeout: 10_000,
                                                     authenticationTimeout: 60_000, pingInterval: 300_000, pingTimeout: 30_000)
    static let t0: EpochMilliseconds = 1_000_000

    static func head(method: String = "POST") -> Result<ProviderRequestHead, ProviderRequestError> {
        ProviderRequestValidator.validate(headers: [(name: ":method", value: method), (name: ":path", value: "/3/device/" + String(repeating: "ab", count: 32)),
                                                    (name: "apns-topic", value: "com.example.app"), (name: "apns-id", value: "8E1C2D4A-0B3F-4C5D-9E6F-7A8B9C0D1E2F")])
    }

    static func stream(at time: EpochMilliseconds = t0, contentLength: Int? = nil, method: String = "POST") -> ProviderRequestStream {
        ProviderRequestStream(head: head(method: method), contentLength: contentLength, openedAt: time)
    }

    static func data(_ bytes: Int, endStream: Bool = false) -> HTTP2Frame.FramePayload.Data {
        .init(data: .byteBuffer(ByteBuffer(repeating: 0x41, count: bytes)), endStream: endStream)
    }

    static func isNone(_ action: Machine.EndAction) -> Bool {
        if case .none = action { return true }
        return false
    }

    static func isMalformed(_ action: Machine.EndAction) -> Bool {
        if case .malformed = action { return true }
        return false
    }

    func machine(authenticated: Bool = false) -> Machine {
        var m = Machine(configuration: Self.configuration, now: Self.t0)
        if authenticated { _ = m.authenticated() }
        return m
    }

    func process(_ m: inout Machine, _ id: HTTP2StreamID) {
        #expect(m.streamOpened(id, Self.stream()) == .opened)
        guard case .process = m.requestEnded(id) else { Issue.record("not processed"); return }
    }

    // MARK: A stream's life

    @Test func headersEndAnswer() {
        var m = machine()
        #expect(m.streamOpened(1, Self.stream()) == .opened)
        #expect(m.isReceiving(1))
        #expect(!m.isClosedStream(1))
        #expect(m.activeStreams == 1)
        guard case .process(let head, let body, let bytes) = m.requestEnded(1) else { Issue.record("expected process"); return }
        #expect(head.apnsID.rawValue == "8E1C2D4A-0B3F-4C5D-9E6F-7A8B9C0D1E2F")
        #expect(body == nil && bytes == 0)
        #expect(!m.isReceiving(1))
        #expect(m.inFlight == 1)
        #expect(!m.isClosedStream(1), "processing: open")
        #expect(m.answer(1) == .send)
        #expect(m.inFlight == 0 && m.activeStreams == 0)
        #expect(m.isClosedStream(1))
        #expect(m.answer(1) == .drop, "answered once")
        #expect(Self.isNone(m.requestEnded(1)))
    }

    @Test func dataGrowsTheBodyAndReturnsCredit() {
        var m = machine()
        _ = m.streamOpened(1, Self.stream())
        // Padding counts for flow control, not for the body.
        #expect(m.receivedData(1, Self.data(2_000), flowControlled: 20_000, windowUpdateThreshold: 32_768) == .received(windowUpdate: 0))
        #expect(m.receivedData(1, Self.data(2_000), flowControlled: 20_001, windowUpdateThreshold: 32_768) == .received(windowUpdate: 40_001))
        // The last frame's credit is not returned: the stream ends.
        #expect(m.receivedData(1, Self.data(2_000, endStream: true), flowControlled: 40_000, windowUpdateThreshold: 32_768) == .received(windowUpdate: 0))
        guard case .process(_, let body, let bytes) = m.requestEnded(1) else { Issue.record("expected process"); return }
        #expect(bytes == 6_000)
        #expect(body?.readableBytes == 4_000, "kept up to the push type's limit (4096), then only counted")
        #expect(m.receivedData(3, Self.data(5), flowControlled: 5, windowUpdateThreshold: 32_768) == .unknownStream)
    }

    @Test func contentLengthIsEnforced() {
        var m = machine(authenticated: true)
        _ = m.streamOpened(1, Self.stream(contentLength: 10))
        #expect(m.receivedData(1, Self.data(10), flowControlled: 10, windowUpdateThreshold: 32_768) == .received(windowUpdate: 0))
        #expect(m.receivedData(1, Self.data(1), flowControlled: 1, windowUpdateThreshold: 32_768) == .malformed)
        #expect(!m.isReceiving(1), "a malformed stream is forgotten")
        _ = m.streamOpened(3, Self.stream(contentLength: 10))
        _ = m.receivedData(3, Self.data(9), flowControlled: 9, windowUpdateThreshold: 32_768)
        #expect(Self.isMalformed(m.requestEnded(3)), "shorter than announced")
        _ = m.streamOpened(5, Self.stream(contentLength: 10))
        m.streamMalformed(5)
        #expect(!m.isReceiving(5))
        #expect(m.inFlight == 0)
    }

    @Test func anInvalidHeadIsRejectedAtTheEnd() {
        var m = machine()
        _ = m.streamOpened(1, Self.stream(method: "GET"))
        guard case .reject(let failure) = m.requestEnded(1) else { Issue.record("expected reject"); return }
        #expect(failure.error.reason == .methodNotAllowed)
        #expect(m.inFlight == 0)
        #expect(m.isClosedStream(1))
    }

    // MARK: Resets

    @Test func aResetWhileReceivingForgetsTheStream() {
        var m = machine()
        _ = m.streamOpened(1, Self.stream())
        m.streamReset(1)
        #expect(!m.isReceiving(1))
        #expect(Self.isNone(m.requestEnded(1)))
        #expect(m.isClosedStream(1))
        #expect(m.activeStreams == 0)
    }

    @Test func aResetDuringTheCommitDropsTheAnswer() {
        var m = machine()
        process(&m, 1)
        m.streamReset(1)
        #expect(m.isClosedStream(1), "the client closed it")
        #expect(m.activeStreams == 0)
        #expect(m.inFlight == 1, "its commit is still under way")
        m.streamReset(1)  // twice: no change
        #expect(m.answer(1) == .drop)
        #expect(m.inFlight == 0 && m.activeStreams == 0)
    }

    @Test func aResetDuringALookupAbandonsTheRequest() {
        var m = machine()
        process(&m, 1)
        #expect(m.lookupCompleted(1) == true, "not reset: go on")
        m.streamReset(1)
        #expect(m.lookupCompleted(1) == false)
        #expect(m.inFlight == 0)
        #expect(m.answer(1) == .drop)
        #expect(m.lookupCompleted(7) == false, "unknown")
    }

    /// Requests that end out of stream order and are answered in any order, some reset on the
    /// way: each is answered once (or dropped when reset), and only answered or reset ones
    /// count as closed (`ProcessingStreams` keeps them sorted; this checks it against a model).
    @Test func requestsEndAndAreAnsweredInAnyOrder() {
        var m = machine(authenticated: true)
        let ids: [HTTP2StreamID] = (0..<40).map { HTTP2StreamID(2 * $0 + 1) }
        for id in ids { #expect(m.streamOpened(id, Self.stream()) == .opened) }
        // End them in a scrambled order (odd positions backwards, then even ones forwards).
        let ends = stride(from: 39, through: 1, by: -2).map { ids[$0] } + stride(from: 0, to: 40, by: 2).map { ids[$0] }
        for id in ends { guard case .process = m.requestEnded(id) else { Issue.record("\(id) not processed"); return } }
        #expect(m.inFlight == 40)
        var reset: Set<HTTP2StreamID> = []
        for (n, id) in ids.enumerated() where n % 7 == 3 {
            m.streamReset(id)
            reset.insert(id)
        }
        #expect(m.activeStreams == 40 - reset.count)
        for id in ids { #expect(m.isClosedStream(id) == reset.contains(id)) }
        // Answer from the middle outwards, then lookups of the rest.
        let answers = ids.enumerated().sorted { abs($0.offset - 20) < abs($1.offset - 20) }.map(\.element)
        for (n, id) in answers.enumerated() {
            if n % 2 == 0 {
                #expect(m.answer(id) == (reset.contains(id) ? .drop : .send))
            } else {
                #expect(m.lookupCompleted(id) == !reset.contains(id))
                if !reset.contains(id) { #expect(m.answer(id) == .send) }
            }
            #expect(m.isClosedStream(id))
            #expect(m.answer(id) == .drop, "answered once")
        }
        #expect(m.inFlight == 0 && m.activeStreams == 0)
    }

    @Test func resetsOfUnknownStreamsChangeNothing() {
        var m = machine()
        m.streamReset(9)
        #expect(m.inFlight == 0 && m.activeStreams == 0)
        #expect(!m.isClosedStream(9), "never taken: not known to be closed")
    }

    // MARK: Authentication and the stream limit

    @Test func oneStreamUntilTheFirstValidToken() {
        var m = machine()
        #expect(m.streamOpened(1, Self.stream()) == .opened)
        #expect(m.streamOpened(3, Self.stream()) == .refused, "receiving counts")
        #expect(m.highestStreamID == 1, "a refused stream is not taken")
        #expect(!m.isClosedStream(3))
        _ = m.requestEnded(1)
        #expect(m.streamOpened(5, Self.stream()) == .refused, "processing counts")
        m.streamReset(1)
        #expect(m.streamOpened(7, Self.stream()) == .opened, "a reset stream does not")
        _ = m.requestEnded(7)
        #expect(m.answer(7) == .send)
        #expect(m.authenticated() == true)
        #expect(m.authenticated() == false, "once")
        for id in stride(from: 9, through: 99, by: 2) { #expect(m.streamOpened(HTTP2StreamID(id), Self.stream()) == .opened) }
        #expect(m.activeStreams == 46)
        #expect(m.isClosedStream(3), "refused, and below the highest taken")
    }

    // MARK: Shutdown

    @Test func shutdownWaitsForEveryStream() {
        var m = machine(authenticated: true)
        #expect(m.closeIfDrained() == false, "not shutting down")
        process(&m, 1)
        _ = m.streamOpened(3, Self.stream())
        #expect(m.beginShutdown() == 3)
        #expect(m.beginShutdown() == nil, "once")
        #expect(m.closeIfDrained() == false)
        #expect(m.answer(1) == .send)
        #expect(m.closeIfDrained() == false, "stream 3 is receiving")
        m.streamReset(3)
        #expect(m.closeIfDrained() == true)
        #expect(m.closeIfDrained() == false, "closed once")
    }

    // MARK: Time

    @Test func aStalledRequestTimesOut() {
        var m = machine(authenticated: true)
        _ = m.streamOpened(3, Self.stream(at: Self.t0 + 5))
        _ = m.streamOpened(1, Self.stream(at: Self.t0))
        #expect(m.tick(now: Self.t0 + 9_999).stalled.isEmpty)
        let stalled = m.tick(now: Self.t0 + 10_005).stalled
        #expect(stalled.map { $0.streamID } == [1, 3])
        #expect(stalled.first?.apnsID == "8E1C2D4A-0B3F-4C5D-9E6F-7A8B9C0D1E2F")
        #expect(!m.isReceiving(1) && !m.isReceiving(3))
        #expect(m.tick(now: Self.t0 + 20_000).stalled.isEmpty)
    }

    @Test func anUnauthenticatedConnectionIsClosedAfterTheTimeout() {
        var m = machine()
        #expect(m.tick(now: Self.t0 + 59_999).liveness == .fine)
        _ = m.streamOpened(1, Self.stream())
        #expect(m.tick(now: Self.t0 + 60_000).liveness == .authenticationTimedOut(lastStreamID: 1))
        #expect(m.isShuttingDown)
        #expect(m.tick(now: Self.t0 + 120_000).liveness == .fine, "once")
        m.streamReset(1)
        #expect(m.closeIfDrained() == true)
    }

    @Test func anAuthenticatedConnectionStaysWhileItAnswersPings() {
        var m = machine(authenticated: true)
        #expect(m.tick(now: Self.t0 + 7_200_000).liveness == .ping(1), "idle for two hours: a PING, not a close")
        #expect(m.tick(now: Self.t0 + 7_229_999).liveness == .fine)
        m.receivedPingAck(1)
        m.receivedBytes()
        #expect(m.tick(now: Self.t0 + 7_240_000).liveness == .fine, "acknowledged")
        #expect(m.tick(now: Self.t0 + 7_539_999).liveness == .fine)
        #expect(m.tick(now: Self.t0 + 7_540_000).liveness == .ping(2))
        m.receivedPingAck(1)  // not the outstanding one
        #expect(m.tick(now: Self.t0 + 7_570_000).liveness == .pingTimedOut(lastStreamID: .rootStream))
        #expect(m.tick(now: Self.t0 + 9_000_000).liveness == .fine, "closing: nothing more")
        #expect(m.closeIfDrained() == false, "already closed")
    }

    @Test func trafficPostponesThePing() {
        var m = machine(authenticated: true)
        m.receivedBytes()
        #expect(m.tick(now: Self.t0 + 200_000).liveness == .fine)
        #expect(m.tick(now: Self.t0 + 499_999).liveness == .fine)
        #expect(m.tick(now: Self.t0 + 500_000).liveness == .ping(1))
    }

    @Test func noPingWhileShuttingDown() {
        var m = machine(authenticated: true)
        _ = m.beginShutdown()
        #expect(m.tick(now: Self.t0 + 900_000).liveness == .fine)
    }
}

