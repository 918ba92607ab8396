import Crypto
import Foundation
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import NIOPosix
import Testing
import TidingsCore
@testable import TidingsGateway
import TidingsStorage
import TidingsTesting

/// `ProviderConnectionHandler` on an `EmbeddedChannel` (HTTP/2 frames in and out, the test's
/// clock and event loop), and the two byte-level handlers around NIOHTTP2 on provider
/// connections.
@Suite("Provider connection handler")
struct ProviderConnectionHandlerTests {
    static let token = String(repeating: "ab", count: 32)

    final class Fixture {
        let clock = TestWallClock()
        let key = P256.Signing.PrivateKey()
        let core: GatewayCore
        let loop = EmbeddedEventLoop()
        let channel: EmbeddedChannel
        let handler: ProviderConnectionHandler

        init(configure: (inout GatewayConfiguration) -> Void = { _ in }) throws {
            var configuration = GatewayConfiguration(dataDirectory: FileManager.default.temporaryDirectory)
            configuration.clock = clock
            configure(&configuration)
            let store = InMemoryGatewayStore()
            let now = clock.nowMilliseconds()
            try store.addKey(ProviderKeyRecord(keyID: GatewayHarness.keyID, teamID: GatewayHarness.teamID,
                                               publicKey: key.publicKey.x963Representation, environment: nil, createdAt: now))
            try store.registerApp(GatewayAppRecord(bundleID: GatewayHarness.bundleID, teamID: GatewayHarness.teamID, createdAt: now))
            core = GatewayCore(configuration: configuration, store: store, metrics: GatewayMetrics(),
                               threadPool: NIOThreadPool(numberOfThreads: 1))
            try core.directory.preload()
            handler = ProviderConnectionHandler(core: core)
            channel = EmbeddedChannel(handler: handler, loop: loop)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2197)).wait()
        }

        var bearer: String {
            "bearer " + (try! ProviderToken.sign(keyID: GatewayHarness.keyID, teamID: GatewayHarness.teamID,
                                                 issuedAt: Int64(clock.now.timeIntervalSince1970), key: key))
        }

        func headers(_ streamID: HTTP2StreamID, authorization: String?, endStream: Bool) throws {
            var fields: HPACKHeaders = [":method": "POST", ":scheme": "https", ":path": "/3/device/\(token)",
                                        ":authority": "127.0.0.1", "apns-topic": GatewayHarness.bundleID]
            if let authorization { fields.add(name: "authorization", value: authorization) }
            try channel.writeInbound(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: fields, endStream: endStream))))
        }

        func outbound() throws -> [HTTP2Frame] {
            var frames: [HTTP2Frame] = []
            while let f = try channel.readOutbound(as: HTTP2Frame.self) { frames.append(f) }
            return frames
        }

        /// The check runs every `providerIdleCheckInterval` (1 s): the clock moves, then the loop.
        func pass(seconds: Double) {
            clock.advance(by: seconds)
            loop.advanceTime(by: .seconds(1))
        }
    }

    static func status(_ frame: HTTP2Frame) -> String? {
        if case .headers(let h) = frame.payload { return h.headers.first(name: ":status") }
        return nil
    }

    static func goAway(_ frames: [HTTP2Frame]) -> (HTTP2StreamID, HTTP2ErrorCode, String)? {
        for f in frames {
            if case .goAway(let last, let code, let data) = f.payload {
                return (last, code, data.map { String(buffer: $0) } ?? "")
            }
        }
        return nil
    }

    // MARK: The one-stream rule

    @Test func aSecondStreamBeforeTheFirstValidTokenIsRefused() throws {
        let f = try Fixture()
        try f.headers(1, authorization: nil, endStream: false)  // its body has not come
        try f.headers(3, authorization: nil, endStream: true)
        let out = try f.outbound()
        #expect(out.count == 1)
        #expect(out.first?.streamID == 3)
        if case .rstStream(let code)? = out.first?.payload { #expect(code == .refusedStream) } else { Issue.record("expected RST_STREAM") }
        // A missing token answers stream 1 (403) without authenticating: still one stream.
        try f.channel.writeInbound(HTTP2Frame(streamID: 1, payload: .data(.init(data: .byteBuffer(ByteBuffer(string: "{}")), endStream: true))))
        try f.headers(5, authorization: nil, endStream: true)
        try f.headers(7, authorization: nil, endStream: false)
        try f.headers(9, authorization: nil, endStream: false)
        let next = try f.outbound()
        #expect(next.compactMap(Self.status) == ["403", "403"], "streams 1 and 5 answered")
        #expect(next.filter { if case .rstStream(.refusedStream) = $0.payload { return true } else { return false } }.map(\.streamID) == [9])
        _ = try f.channel.finish()
    }

    // MARK: Liveness

    @Test func anUnauthenticatedConnectionGetsGoAwayAfterTheTimeout() throws {
        let f = try Fixture { c in c.providerAuthenticationTimeout = .seconds(60) }
        try f.headers(1, authorization: nil, endStream: true)  // 403: not authenticated
        _ = try f.outbound()
        f.pass(seconds: 58)
        #expect(try f.outbound().isEmpty)
        #expect(f.channel.isActive)
        f.pass(seconds: 3)
        let goAway = try #require(Self.goAway(try f.outbound()))
        #expect(goAway.0 == 1)
        #expect(goAway.1 == .noError)
        #expect(goAway.2 == #"{"reason":"IdleTimeout"}"#)
        #expect(!f.channel.isActive, "closed: nothing in flight")
    }

    @Test func anAuthenticatedIdleConnectionStaysOpenWhileItAnswersPings() throws {
        let f = try Fixture { c in
            c.providerPingInterval = .seconds(300)
            c.providerPingTimeout = .seconds(30)
        }
        // Authenticated (the token is valid), then answered PayloadEmpty: nothing to commit.
        try f.headers(1, authorization: f.bearer, endStream: true)
        let answer = try f.outbound()
        #expect(answer.compactMap(Self.status) == ["400"])
        f.pass(seconds: 0)  // the check notes the read
        // Hours of silence: PINGs, answered, and the connection stays.
        for round in 1...3 {
            f.pass(seconds: 299)
            #expect(try f.outbound().isEmpty)
            f.pass(seconds: 2)
            let ping = try f.outbound()
            guard case .ping(let data, ack: false)? = ping.first?.payload else { Issue.record("expected PING in round \(round)"); return }
            f.pass(seconds: 29)
            #expect(try f.outbound().isEmpty, "29 s without an answer: still waiting")
            try f.channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .ping(data, ack: true)))
            f.pass(seconds: 0)
            #expect(try f.outbound().isEmpty)
            #expect(f.channel.isActive)
        }
        // A PING that is never acknowledged: GOAWAY and close.
        f.pass(seconds: 301)
        #expect(try f.outbound().count == 1)
        f.pass(seconds: 31)
        let goAway = try #require(Self.goAway(try f.outbound()))
        #expect(goAway.0 == 1 && goAway.1 == .noError && goAway.2 == #"{"reason":"IdleTimeout"}"#)
        #expect(!f.channel.isActive)
    }

    // MARK: GOAWAY's last_stream_id below NIOHTTP2

    final class Streams: ProviderStreamRegistry {
        var lastProcessedStreamID: HTTP2StreamID = 41
        var closed: Set<Int> = []
        func isClosedStream(_ streamID: HTTP2StreamID) -> Bool { closed.contains(Int(streamID)) }
    }

    static func frame(type: UInt8, streamID: UInt32, payload: [UInt8]) -> [UInt8] {
        RawHTTP2Client.frame(type: type, flags: 0, streamID: streamID, payload: payload)
    }

    @Test func everyGoAwayLeavingTheConnectionCarriesTheLastStreamTaken() throws {
        let coalescing = OutboundCoalescingHandler()
        let streams = Streams()
        coalescing.streams = streams
        let channel = EmbeddedChannel(handler: coalescing)
        func write(_ bytes: [UInt8]) { channel.write(channel.allocator.buffer(bytes: bytes), promise: nil) }
        // A DATA frame whose payload is a separate (large) buffer, and what looks like a GOAWAY
        // header inside it, then NIOHTTP2's GOAWAYs: 2^31−1 (connection error), 0 (flood).
        write([0x00, 0x13, 0x88, 0x0, 0x1, 0, 0, 0, 1])
        var payload = [UInt8](repeating: 0, count: 5000)
        payload.replaceSubrange(0..<17, with: Self.frame(type: 0x7, streamID: 0, payload: [0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1]))
        write(payload)
        write(Self.frame(type: 0x7, streamID: 0, payload: [0x7F, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1]))
        write(Self.frame(type: 0x6, streamID: 0, payload: [UInt8](repeating: 7, count: 8)) + Self.frame(type: 0x7, streamID: 0, payload: [0, 0, 0, 0, 0, 0, 0, 0xb] + Array("calm".utf8)))
        channel.flush()
        var out: [UInt8] = []
        while let b = try channel.readOutbound(as: ByteBuffer.self) { out += b.readableBytesView }
        #expect(out.count == 9 + 5000 + 17 + 17 + 21)
        #expect(Array(out[9..<26]) == Array(payload[0..<17]), "a DATA payload is not a frame")
        let first = 9 + 5000
        #expect(Array(out[(first + 9)..<(first + 17)]) == [0, 0, 0, 41, 0, 0, 0, 1])
        let second = first + 17 + 17
        #expect(Array(out[(second + 9)..<(second + 17)]) == [0, 0, 0, 41, 0, 0, 0, 0xb])
        #expect(Array(out[(second + 17)...]) == Array("calm".utf8))
        _ = try channel.finish()
    }

    // MARK: Frames kept from NIOHTTP2

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Runs `bytes` through a RepeatedAuthorizationHandler in `chunk`-byte reads; returns what
    /// passed on and the most it held at once.
    static func run(_ bytes: [UInt8], chunk: Int, streams: Streams? = nil) throws -> (RepeatedAuthorizationHandler, [UInt8], Int) {
        let handler = RepeatedAuthorizationHandler()
        handler.streams = streams
        let channel = EmbeddedChannel(handler: handler)
        var passed: [UInt8] = []
        var held = 0
        var offset = 0
        while offset < bytes.count {
            let piece = bytes[offset..<min(offset + chunk, bytes.count)]
            offset += piece.count
            try channel.writeInbound(channel.allocator.buffer(bytes: piece))
            while let out = try channel.readInbound(as: ByteBuffer.self) { passed += out.readableBytesView }
            held = max(held, handler.heldBytes)
        }
        return (handler, passed, held)
    }

    /// Issue 11 § 2: unknown-type frames never reach NIOHTTP2 (whose decoder accumulated them),
    /// however they are cut; nothing here holds more than a frame header of them.
    @Test func unknownFrameTypesAreDroppedAndNothingAccumulates() throws {
        let settings = Self.frame(type: 0x4, streamID: 0, payload: [])
        let unknown = Self.frame(type: 0xEE, streamID: 0, payload: [UInt8](repeating: 0x55, count: 16_384))
        var bytes = Self.preface + settings
        for i in 0..<200 {
            bytes += unknown
            if i % 50 == 0 { bytes += settings }
        }
        bytes += Self.frame(type: 0xB, streamID: 1, payload: [1, 2, 3])  // also unknown
        bytes += Self.frame(type: 0xA, streamID: 0, payload: [0, 0])      // ALTSVC: NIOHTTP2 reads it
        for chunk in [777, 16_393, 100_000] {
            let (handler, passed, held) = try Self.run(bytes, chunk: chunk)
            #expect(passed == Self.preface + settings + settings + settings + settings + settings + Self.frame(type: 0xA, streamID: 0, payload: [0, 0]),
                    "chunk \(chunk)")
            #expect(handler.droppedUnknownFrames == 201)
            #expect(held <= 9, "chunk \(chunk): held \(held) bytes")
        }
    }

    @Test func anUnknownFrameInsideAHeaderBlockStillReachesNIOHTTP2() throws {
        // HEADERS without END_HEADERS, then an unknown frame: a connection error NIOHTTP2 must see.
        let headers = RawHTTP2Client.frame(type: 0x1, flags: 0x0, streamID: 1, payload: [0x82])
        let unknown = Self.frame(type: 0xEE, streamID: 0, payload: [1, 2, 3])
        let bytes = Self.preface + headers + unknown
        let (handler, passed, _) = try Self.run(bytes, chunk: 5)
        #expect(passed == bytes)
        #expect(handler.droppedUnknownFrames == 0)
    }

    /// Resets of closed streams stay out of NIOHTTP2's rapid-reset count; resets of open ones
    /// (and of streams the provider handler does not know yet) go on. A reset cut across reads
    /// is held (13 bytes at most) until it is whole.
    @Test func resetsOfClosedStreamsAreDropped() throws {
        let streams = Streams()
        streams.closed = [1, 5]
        func rst(_ id: UInt32) -> [UInt8] { RawHTTP2Client.reset(id) }
        let ping = RawHTTP2Client.frame(type: 0x6, flags: 0, streamID: 0, payload: [UInt8](repeating: 1, count: 8))
        let bytes = Self.preface + rst(1) + rst(3) + ping + rst(5) + rst(7)
        for chunk in [1, 4, 13, 1000] {
            let (handler, passed, held) = try Self.run(bytes, chunk: chunk, streams: streams)
            #expect(passed == Self.preface + rst(3) + ping + rst(7), "chunk \(chunk)")
            #expect(handler.droppedResets == 2)
            #expect(held <= 13)
        }
        // Without the provider handler (unit use) every reset goes on.
        let (_, passed, _) = try Self.run(bytes, chunk: 1000)
        #expect(passed == bytes)
    }
}
