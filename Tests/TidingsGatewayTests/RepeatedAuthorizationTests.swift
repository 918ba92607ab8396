import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing
@testable import TidingsGateway
import TidingsTesting

/// `RepeatedAuthorizationHandler`: a repeated provider token reaches NIOHPACK as plain text, and
/// every header block decodes to exactly the fields it carried.
@Suite("Gateway repeated provider tokens")
struct RepeatedAuthorizationTests {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let tokenA = "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWTEyMzQ1NjcifQ.eyJpc3MiOiJURUFNMTIzNDU2IiwiaWF0IjoxNzAwMDAwMDAwfQ.c2lnbmF0dXJlLWJ5dGVzLWhlcmUtZm9yLWEtdGVzdA"
    static let tokenB = "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWTEyMzQ1NjcifQ.eyJpc3MiOiJURUFNMTIzNDU2IiwiaWF0IjoxNzAwMDAzNjAwfQ.YW5vdGhlci1zaWduYXR1cmUtZm9yLWEtdGVzdA"

    /// Frames as a client writes them, and the fields of each HEADERS block.
    struct ClientStream {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var bytes: [UInt8] = RepeatedAuthorizationTests.preface

        static func frame(type: UInt8, flags: UInt8, streamID: UInt32, payload: [UInt8]) -> [UInt8] {
            let n = payload.count
            return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags,
                    UInt8(streamID >> 24 & 0x7F), UInt8(streamID >> 16 & 0xFF), UInt8(streamID >> 8 & 0xFF), UInt8(streamID & 0xFF)] + payload
        }

        static func fields(_ token: String, indexing: HPACKIndexing = .neverIndexed, path: String = "/3/device/abc") -> HPACKHeaders {
            var headers: HPACKHeaders = [":method": "POST", ":scheme": "https", ":path": path, ":authority": "127.0.0.1"]
            headers.add(name: "authorization", value: token, indexing: indexing)
            headers.add(name: "apns-topic", value: "com.example.app")
            return headers
        }

        func block(_ headers: HPACKHeaders) -> [UInt8] {
            var encoder = self.encoder
            var buffer = ByteBufferAllocator().buffer(capacity: 512)
            try! encoder.encode(headers: headers, to: &buffer)
            return Array(buffer.readableBytesView)
        }

        /// A HEADERS frame (END_HEADERS; `priority` adds the 5 priority bytes).
        mutating func headers(_ streamID: UInt32, _ fields: HPACKHeaders, priority: Bool = false, endStream: Bool = false) {
            var buffer = ByteBufferAllocator().buffer(capacity: 512)
            try! encoder.encode(headers: fields, to: &buffer)
            var payload: [UInt8] = priority ? [0x80, 0, 0, 0, 15] : []
            payload += Array(buffer.readableBytesView)
            bytes += Self.frame(type: 0x1, flags: 0x4 | (priority ? 0x20 : 0) | (endStream ? 0x1 : 0), streamID: streamID, payload: payload)
        }

        mutating func data(_ streamID: UInt32, _ payload: [UInt8]) {
            bytes += Self.frame(type: 0x0, flags: 0x1, streamID: streamID, payload: payload)
        }

        mutating func raw(_ frame: [UInt8]) { bytes += frame }
    }

    /// The frames that left the handler, decoded as NIOHTTP2 would: each HEADERS block's fields,
    /// in order, and every other frame's bytes.
    struct ServerSide {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var pending: [UInt8] = []
        var prefaceSeen = false
        var blocks: [(streamID: UInt32, fields: HPACKHeaders, wire: [UInt8])] = []
        var otherFrames: [[UInt8]] = []
        var highestStreamID: UInt32 = 0

        /// Takes what the handler passed on; hands each new stream's fields back to it, as
        /// `ProviderConnectionHandler` does.
        mutating func receive(_ bytes: [UInt8], learner: RepeatedAuthorizationHandler?) {
            pending += bytes
            if !prefaceSeen {
                guard pending.count >= 24 else { return }
                #expect(Array(pending[..<24]) == RepeatedAuthorizationTests.preface)
                pending.removeFirst(24)
                prefaceSeen = true
            }
            while pending.count >= 9 {
                let length = Int(pending[0]) << 16 | Int(pending[1]) << 8 | Int(pending[2])
                guard pending.count >= 9 + length else { break }
                let frame = Array(pending[..<(9 + length)])
                pending.removeFirst(9 + length)
                let streamID = UInt32(frame[5] & 0x7F) << 24 | UInt32(frame[6]) << 16 | UInt32(frame[7]) << 8 | UInt32(frame[8])
                // Complete, unpadded HEADERS blocks are decoded; the rest (and a block that does
                // not decode) is kept as bytes.
                let skip = frame[4] & 0x20 != 0 ? 5 : 0
                guard frame[3] == 0x1, frame[4] & 0x4 != 0, frame[4] & 0x8 == 0, frame.count >= 9 + skip else {
                    otherFrames.append(frame)
                    continue
                }
                var block = ByteBufferAllocator().buffer(bytes: frame[(9 + skip)...])
                guard let fields = try? decoder.decodeHeaders(from: &block) else {
                    otherFrames.append(frame)
                    continue
                }
                blocks.append((streamID, fields, frame))
                if streamID > highestStreamID {
                    highestStreamID = streamID
                    learner?.learn(from: fields, streamID: HTTP2StreamID(Int(streamID)))
                }
            }
        }
    }

    /// Runs `client`'s bytes through the handler in chunks of `chunk` bytes (all at once: 0),
    /// learning as it goes; returns the handler and what came out, decoded.
    static func run(_ client: ClientStream, chunk: Int = 0, maximumFrameSize: Int = 16384) throws -> (RepeatedAuthorizationHandler, ServerSide, [UInt8]) {
        let handler = RepeatedAuthorizationHandler(maximumFrameSize: maximumFrameSize)
        let channel = EmbeddedChannel(handler: handler)
        var server = ServerSide()
        var passed: [UInt8] = []
        let step = chunk > 0 ? chunk : client.bytes.count
        var offset = 0
        while offset < client.bytes.count {
            let piece = Array(client.bytes[offset..<min(offset + step, client.bytes.count)])
            offset += piece.count
            try channel.writeInbound(channel.allocator.buffer(bytes: piece))
            while let out = try channel.readInbound(as: ByteBuffer.self) {
                let bytes = Array(out.readableBytesView)
                passed += bytes
                server.receive(bytes, learner: handler)
            }
        }
        _ = try channel.finish()
        return (handler, server, passed)
    }

    /// The same client bytes decoded without the handler: what every block must decode to.
    static func reference(_ client: ClientStream) throws -> ServerSide {
        var server = ServerSide()
        server.receive(client.bytes, learner: nil)
        return server
    }

    static func expectSameFields(_ got: ServerSide, _ want: ServerSide) {
        #expect(got.blocks.count == want.blocks.count)
        for (g, w) in zip(got.blocks, want.blocks) {
            #expect(g.streamID == w.streamID)
            #expect(Array(g.fields.map { "\($0.name): \($0.value)" }) == Array(w.fields.map { "\($0.name): \($0.value)" }))
        }
        #expect(got.otherFrames == want.otherFrames)
    }

    /// Frame by frame, learning between frames as NIOHTTP2 and the provider handler do: the
    /// first block of a token is passed as it came (and learned from), the next ones with the
    /// same Huffman bytes carry the token as plain text (also behind the priority fields, and
    /// for each indexing kind), a new token is learned afresh, and every block decodes to the
    /// fields the client sent — including the HPACK dynamic table's later references.
    @Test func aRepeatedTokenIsPassedAsPlainTextAndDecodesTheSame() throws {
        var client = ClientStream()
        client.headers(1, ClientStream.fields(Self.tokenA))
        client.data(1, Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        client.headers(3, ClientStream.fields(Self.tokenA), endStream: true)
        client.headers(5, ClientStream.fields(Self.tokenA, path: "/3/device/other"), priority: true, endStream: true)
        client.headers(7, ClientStream.fields(Self.tokenB), endStream: true)
        client.headers(9, ClientStream.fields(Self.tokenB), endStream: true)
        client.headers(11, ClientStream.fields(Self.tokenB, indexing: .nonIndexable), endStream: true)
        client.headers(13, ClientStream.fields(Self.tokenA), endStream: true)
        client.headers(15, ClientStream.fields(Self.tokenA), endStream: true)
        // With incremental indexing the token enters the dynamic table (and is then referred to
        // by index, which needs nothing here): the table must stay in step.
        client.headers(17, ClientStream.fields(Self.tokenB, indexing: .indexable), endStream: true)
        client.headers(19, ClientStream.fields(Self.tokenB, indexing: .indexable), endStream: true)
        client.headers(21, ClientStream.fields(Self.tokenA), endStream: true)

        // One frame at a time (the frame boundaries of this stream), so learning keeps up.
        let (handler, server, _) = try Self.run(client, chunk: 1)
        Self.expectSameFields(server, try Self.reference(client))
        // A is learned from 1 (3 and 5 rewritten), B from 7 (9, 11), A again from 13 (15), B
        // from 17 (its first literal with incremental indexing; 19 then refers to the table
        // entry, which needs nothing here); 21's A is a candidate again.
        #expect(handler.rewrittenBlocks == 5)
        let plainBlocks = server.blocks.filter { Self.containsPlain(Self.tokenA, in: $0.wire) || Self.containsPlain(Self.tokenB, in: $0.wire) }
        #expect(plainBlocks.map(\.streamID) == [3, 5, 9, 11, 15])
    }

    static func containsPlain(_ token: String, in bytes: [UInt8]) -> Bool {
        let needle = Array(token.utf8)
        guard bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// However the bytes are cut into reads (frames, headers and HPACK strings split anywhere),
    /// every block decodes to the fields the client sent, and later blocks are still rewritten.
    @Test(arguments: [1, 2, 3, 7, 9, 10, 31, 64, 100, 333, 1000])
    func anySplitOfTheStreamDecodesTheSame(chunk: Int) throws {
        var client = ClientStream()
        for i in 0..<12 {
            client.headers(UInt32(2 * i + 1), ClientStream.fields(i < 6 ? Self.tokenA : Self.tokenB), priority: i % 3 == 0)
            client.data(UInt32(2 * i + 1), Array(repeating: UInt8(ascii: "x"), count: 50 + i))
        }
        let (handler, server, _) = try Self.run(client, chunk: chunk)
        Self.expectSameFields(server, try Self.reference(client))
        if chunk <= 100 { #expect(handler.rewrittenBlocks >= 6) }
    }

    /// The candidate is learned only from its own stream's block, and only when that block has
    /// one `authorization` field: otherwise nothing is rewritten.
    @Test func learningNeedsTheCandidatesStreamAndOneField() throws {
        let handler = RepeatedAuthorizationHandler()
        var client = ClientStream()
        client.headers(1, ClientStream.fields(Self.tokenA))
        var twice = ClientStream.fields(Self.tokenA)
        twice.add(name: "authorization", value: Self.tokenB, indexing: .neverIndexed)
        let channel = EmbeddedChannel(handler: handler)
        try channel.writeInbound(channel.allocator.buffer(bytes: client.bytes))
        var server = ServerSide()
        while let out = try channel.readInbound(as: ByteBuffer.self) { server.receive(Array(out.readableBytesView), learner: nil) }
        // Another stream's fields teach nothing.
        handler.learn(from: server.blocks[0].fields, streamID: 3)
        client.bytes = []
        client.headers(3, ClientStream.fields(Self.tokenA))
        try channel.writeInbound(channel.allocator.buffer(bytes: client.bytes))
        #expect(handler.rewrittenBlocks == 0)
        // Stream 3 is now the candidate; its fields with two tokens teach nothing either.
        handler.learn(from: twice, streamID: 3)
        client.bytes = []
        client.headers(5, ClientStream.fields(Self.tokenA))
        try channel.writeInbound(channel.allocator.buffer(bytes: client.bytes))
        #expect(handler.rewrittenBlocks == 0)
        // Stream 5's own fields do.
        while let out = try channel.readInbound(as: ByteBuffer.self) { server.receive(Array(out.readableBytesView), learner: nil) }
        handler.learn(from: server.blocks.last!.fields, streamID: 5)
        client.bytes = []
        client.headers(7, ClientStream.fields(Self.tokenA))
        try channel.writeInbound(channel.allocator.buffer(bytes: client.bytes))
        #expect(handler.rewrittenBlocks == 1)
        _ = try channel.finish()
    }

    /// Trailers are not a stream's initial block: a token in them is never paired with the
    /// stream's initial fields (which carry another token here), so a later block with the
    /// trailers' token still decodes to that token.
    @Test func aTokenInTrailersIsNotLearnedAsTheStreamsToken() throws {
        var client = ClientStream()
        client.headers(1, ClientStream.fields(Self.tokenA))
        client.headers(1, ClientStream.fields(Self.tokenB), endStream: true)
        let firstRead = client.bytes
        client.headers(3, ClientStream.fields(Self.tokenB))
        let secondRead = Array(client.bytes[firstRead.count...])
        client.headers(5, ClientStream.fields(Self.tokenB))
        let handler = RepeatedAuthorizationHandler()
        let channel = EmbeddedChannel(handler: handler)
        var server = ServerSide()
        // Both blocks of stream 1 in one read: the handler has seen the trailers before the
        // initial fields are decoded and handed back.
        for piece in [firstRead, secondRead, Array(client.bytes[(firstRead.count + secondRead.count)...])] {
            try channel.writeInbound(channel.allocator.buffer(bytes: piece))
            while let out = try channel.readInbound(as: ByteBuffer.self) { server.receive(Array(out.readableBytesView), learner: handler) }
        }
        Self.expectSameFields(server, try Self.reference(client))
        #expect(handler.rewrittenBlocks == 1)  // stream 5: B learned from stream 3
        _ = try channel.finish()
    }

    /// What the handler does not understand goes through byte for byte, for NIOHTTP2 to judge:
    /// padded blocks, blocks continued in CONTINUATION frames, and — from then on, everything —
    /// after a frame longer than the frame size limit or a block whose HPACK does not add up.
    @Test func whatItDoesNotUnderstandPassesUntouched() throws {
        var learned = ClientStream()
        learned.headers(1, ClientStream.fields(Self.tokenA))
        learned.headers(3, ClientStream.fields(Self.tokenA))
        let learnedRun = try Self.run(learned, chunk: 1)
        #expect(learnedRun.0.rewrittenBlocks == 1)

        func afterLearning(_ tail: (inout ClientStream) -> Void) throws -> (rewritten: Int, tailOut: [UInt8], tailIn: [UInt8]) {
            var client = learned
            let before = client.bytes.count
            tail(&client)
            let tailIn = Array(client.bytes[before...])
            let (handler, _, passed) = try Self.run(client, chunk: 1)
            // The learned part came out as `learnedRun` did; the rest follows it.
            return (handler.rewrittenBlocks - 1, Array(passed[learnedRun.2.count...]), tailIn)
        }

        // Padded: not rewritten.
        var r = try afterLearning { c in
            let block = c.block(ClientStream.fields(Self.tokenA))
            c.raw(ClientStream.frame(type: 0x1, flags: 0x4 | 0x8, streamID: 5, payload: [2] + block + [0, 0]))
        }
        #expect(r.rewritten == 0 && r.tailOut == r.tailIn)

        // Continued: HEADERS without END_HEADERS, then CONTINUATION; neither rewritten, and
        // after the block ends, rewriting resumes.
        let block = learned.block(ClientStream.fields(Self.tokenA))
        let continued = ClientStream.frame(type: 0x1, flags: 0, streamID: 5, payload: Array(block[..<10]))
            + ClientStream.frame(type: 0x9, flags: 0x4, streamID: 5, payload: Array(block[10...]))
        r = try afterLearning { c in
            c.raw(continued)
            c.headers(7, ClientStream.fields(Self.tokenA))
        }
        #expect(r.rewritten == 1)
        #expect(Array(r.tailOut.prefix(continued.count)) == continued)

        // A frame over the limit, then a learned token: all passed as it came.
        r = try afterLearning { c in
            c.raw(ClientStream.frame(type: 0x0, flags: 0, streamID: 3, payload: Array(repeating: 1, count: 16385)))
            c.headers(5, ClientStream.fields(Self.tokenA))
        }
        #expect(r.rewritten == 0 && r.tailOut == r.tailIn)

        // An HPACK integer that runs past the block, then a learned token: all passed as it came.
        r = try afterLearning { c in
            c.raw(ClientStream.frame(type: 0x1, flags: 0x4, streamID: 5, payload: [0xFF, 0xFF, 0xFF]))
            c.headers(7, ClientStream.fields(Self.tokenA))
        }
        #expect(r.rewritten == 0 && r.tailOut == r.tailIn)

        // PRIORITY flagged but shorter than its priority fields: passed as it came.
        r = try afterLearning { c in
            c.raw(ClientStream.frame(type: 0x1, flags: 0x4 | 0x20, streamID: 5, payload: [0, 0]))
        }
        #expect(r.rewritten == 0 && r.tailOut == r.tailIn)
    }

    /// The handler parses bytes no one has checked yet: damaged streams (random bytes changed,
    /// cut into random reads; a fixed seed, 500 streams) never crash it, and whenever the
    /// client's bytes decode, what it passed on decodes to the same fields.
    @Test func damagedStreamsNeverCrashItAndDecodeTheSame() throws {
        var random = SplitMix64(seed: 20261122)
        var base = ClientStream()
        for i in 0..<8 {
            base.headers(UInt32(2 * i + 1), ClientStream.fields(i % 4 == 3 ? Self.tokenB : Self.tokenA), priority: i % 3 == 0)
            base.data(UInt32(2 * i + 1), Array(repeating: UInt8(ascii: "x"), count: 20))
        }
        var compared = 0
        for _ in 0..<500 {
            var client = base
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let at = Int.random(in: 24..<client.bytes.count, using: &random)
                client.bytes[at] = UInt8.random(in: 0...255, using: &random)
            }
            let (_, server, _) = try Self.run(client, chunk: Int.random(in: 1...300, using: &random))
            let reference = try Self.reference(client)
            // Compared where the client's own bytes are a decodable stream (and hold no frame of
            // an unknown type, which the handler drops).
            if reference.otherFrames.allSatisfy({ $0[3] != 0x1 && $0[3] != 0x9 && ($0[3] <= 0xA || $0[3] == 0xC) }) && reference.pending.isEmpty {
                Self.expectSameFields(server, reference)
                compared += 1
            }
        }
        #expect(compared > 25)
    }

    /// Through NIOHTTP2 itself: a client `NIOHTTP2Handler` sends requests with a never-indexed
    /// token (as curl, h2load, httpx and aioapns do); the server's `NIOHTTP2Handler` behind the
    /// handler decodes every one to the token the client sent, and all but the first reached
    /// it as plain text.
    @Test func throughNIOHTTP2EveryRequestCarriesItsToken() throws {
        final class Requests: ChannelInboundHandler {
            typealias InboundIn = HTTP2Frame
            let learner: RepeatedAuthorizationHandler
            var tokens: [String] = []
            init(learner: RepeatedAuthorizationHandler) { self.learner = learner }
            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                let frame = unwrapInboundIn(data)
                guard case .headers(let headers) = frame.payload else { return }
                learner.learn(from: headers.headers, streamID: frame.streamID)
                tokens += headers.headers.filter { $0.name == "authorization" }.map(\.value)
            }
        }
        let learner = RepeatedAuthorizationHandler()
        let requests = Requests(learner: learner)
        let server = EmbeddedChannel()
        try server.pipeline.syncOperations.addHandlers([learner, NIOHTTP2Handler(mode: .server), requests])
        let client = EmbeddedChannel()
        try client.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .client))
        try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()

        func shuttle() throws {
            for _ in 0..<10 {
                var moved = false
                while let bytes = try client.readOutbound(as: ByteBuffer.self) { try server.writeInbound(bytes); moved = true }
                while let bytes = try server.readOutbound(as: ByteBuffer.self) { try client.writeInbound(bytes); moved = true }
                if !moved { return }
            }
        }
        try shuttle()
        let tokens = [Self.tokenA, Self.tokenA, Self.tokenA, Self.tokenB, Self.tokenB, Self.tokenA]
        for (i, token) in tokens.enumerated() {
            var headers: HPACKHeaders = [":method": "POST", ":scheme": "https", ":path": "/3/device/\(i)", ":authority": "localhost"]
            headers.add(name: "authorization", value: token, indexing: .neverIndexed)
            client.writeAndFlush(HTTP2Frame(streamID: HTTP2StreamID(2 * i + 1), payload: .headers(.init(headers: headers, endStream: true))),
                                 promise: nil)
            try shuttle()
        }
        #expect(requests.tokens == tokens)
        #expect(learner.rewrittenBlocks == 3)  // the 2nd and 3rd A, the 2nd B
        _ = try? client.finish()
        _ = try? server.finish()
    }
}
