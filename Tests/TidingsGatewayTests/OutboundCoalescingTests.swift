import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOPosix
import Synchronization
import Testing
import TidingsCore
@testable import TidingsGateway

@Suite("Gateway provider write coalescing")
struct OutboundCoalescingTests {
    /// Below the coalescing handler: records every write that reaches it.
    final class WriteRecorder: ChannelOutboundHandler, Sendable {
        typealias OutboundIn = ByteBuffer
        let writes = Mutex<[[UInt8]]>([])
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            let buffer = unwrapOutboundIn(data)
            writes.withLock { $0.append(Array(buffer.readableBytesView)) }
            context.write(data, promise: promise)
        }
    }

    /// The peer: collects every byte it receives; `done` once it has `expected` of them.
    final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let bytes = Mutex<[UInt8]>([])
        let expected: Int
        let done: EventLoopPromise<Void>
        init(expected: Int, done: EventLoopPromise<Void>) { self.expected = expected; self.done = done }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            let count = bytes.withLock { $0.append(contentsOf: buffer.readableBytesView); return $0.count }
            if count >= expected { done.succeed(()) }
        }
    }

    /// Small writes between two flushes reach the layer below as one buffer, in order; a
    /// large one goes down by itself after what was pending; every promise completes; the
    /// peer receives every byte in order; the buffer is reused for the next batch.
    @Test func writesBetweenFlushesBecomeOneBuffer() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let large = [UInt8](repeating: 7, count: OutboundCoalescingHandler.passThroughSize)
        let expected: [[UInt8]] = [[1, 2, 3, 4, 5, 6], [8], large, [9, 10]]
        let all = expected.flatMap { $0 }
        let collector = Collector(expected: all.count, done: group.next().makePromise())
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let recorder = WriteRecorder()
        let client = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(recorder)
                    try channel.pipeline.syncOperations.addHandler(OutboundCoalescingHandler())
                }
            }
            .connect(to: server.localAddress!).get()

        func buffer(_ bytes: [UInt8]) -> ByteBuffer { client.allocator.buffer(bytes: bytes) }
        // Batch 1: three small writes (two with promises), then a flush.
        let p1 = client.write(buffer([1, 2, 3]))
        client.write(buffer([4]), promise: nil)
        let p2 = client.write(buffer([5, 6]))
        client.flush()
        try await p1.get()
        try await p2.get()
        // Batch 2: small, large, small.
        client.write(buffer([8]), promise: nil)
        let p3 = client.write(buffer(large))
        let p4 = client.eventLoop.makePromise(of: Void.self)
        client.writeAndFlush(buffer([9, 10]), promise: p4)
        try await p3.get()
        try await p4.futureResult.get()

        #expect(recorder.writes.withLock { $0 } == expected)
        try await collector.done.futureResult.get()
        #expect(collector.bytes.withLock { $0 } == all)

        try await client.close()
        try await server.close()
        try await group.shutdownGracefully()
    }

    /// Writes never flushed when the channel closes fail their promises (as the channel would).
    @Test func unflushedWritesFailOnClose() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        let client = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(OutboundCoalescingHandler()) }
            }
            .connect(to: server.localAddress!).get()
        let pending = client.write(client.allocator.buffer(bytes: [1, 2, 3]))
        try await client.close()
        await #expect(throws: (any Error).self) { try await pending.get() }
        try await server.close()
        try await group.shutdownGracefully()
    }

    // MARK: apns-unique-id (development)

    /// Frames as NIOHTTP2 writes them (a server's HPACK encoder, one frame per write, a DATA
    /// frame's payload as a write of its own), written through a coalescing handler.
    struct ServerFrames {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var writes: [[UInt8]] = []

        mutating func headers(_ streamID: UInt32, _ fields: HPACKHeaders, endStream: Bool) -> [UInt8] {
            var block = ByteBufferAllocator().buffer(capacity: 256)
            try! encoder.encode(headers: fields, to: &block)
            return RawHTTP2Client.frame(type: 0x1, flags: 0x4 | (endStream ? 0x1 : 0), streamID: streamID, payload: Array(block.readableBytesView))
        }

        mutating func ok(_ streamID: UInt32, apnsID: String, indexing: HPACKIndexing) -> [UInt8] {
            var fields: HPACKHeaders = [":status": "200"]
            fields.add(name: "apns-id", value: apnsID, indexing: indexing)
            return headers(streamID, fields, endStream: true)
        }

        static func run(_ writes: [[UInt8]], addsUniqueID: Bool) throws -> [UInt8] {
            let channel = EmbeddedChannel(handler: OutboundCoalescingHandler(addsUniqueID: addsUniqueID))
            for bytes in writes { channel.write(channel.allocator.buffer(bytes: bytes), promise: nil) }
            channel.flush()
            var out: [UInt8] = []
            while let b = try channel.readOutbound(as: ByteBuffer.self) { out += b.readableBytesView }
            _ = try channel.finish()
            return out
        }
    }

    /// The frames in `bytes`: type, stream, and each HEADERS block decoded in order by one
    /// HPACK decoder (as the client's), or the payload of any other frame.
    static func decode(_ bytes: [UInt8]) throws -> [(type: UInt8, streamID: UInt32, fields: [(String, String)], payload: [UInt8])] {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var frames: [(type: UInt8, streamID: UInt32, fields: [(String, String)], payload: [UInt8])] = []
        var at = 0
        while at < bytes.count {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            let type = bytes[at + 3]
            let streamID = RawHTTP2Client.Frame.uint32(bytes, at + 5)
            let payload = Array(bytes[(at + 9)..<(at + 9 + length)])
            var fields: [(String, String)] = []
            if type == 0x1 {
                var block = ByteBufferAllocator().buffer(bytes: payload)
                fields = try decoder.decodeHeaders(from: &block).map { ($0.name, $0.value) }
                #expect(block.readableBytes == 0)
            }
            frames.append((type, streamID, fields, payload))
            at += 9 + length
        }
        #expect(at == bytes.count)
        return frames
    }

    /// In development every `:status 200` HEADERS frame leaves with `apns-unique-id` appended
    /// (a lower-case version-4 UUID, a different one each time), its length grown to match; the
    /// client's HPACK decoder, fed the whole stream, reads every block with the fields the
    /// encoder wrote (its dynamic table stays in step: the second 200 refers to `apns-id` by its
    /// dynamic index). A 200 after a dynamic table size update and two 200s in one write get
    /// theirs too; an error's HEADERS, a DATA payload that looks like a 200 HEADERS frame, and
    /// every byte in production pass unchanged.
    @Test func developmentAddsAUniqueIDToEvery200() throws {
        var server = ServerFrames()
        let lookalike = RawHTTP2Client.frame(type: 0x1, flags: 0x5, streamID: 3, payload: [0x88])
        var errorFields: HPACKHeaders = [":status": "400", "content-type": "application/json"]
        errorFields.add(name: "apns-id", value: "E-3", indexing: .nonIndexable)
        var writes: [[UInt8]] = [
            server.ok(1, apnsID: "E-1", indexing: .indexable),
            server.headers(3, errorFields, endStream: false),
            RawHTTP2Client.frame(type: 0x0, flags: 0x1, streamID: 3, payload: lookalike).prefix(9).map { $0 },
            lookalike,
            server.ok(5, apnsID: "E-5", indexing: .nonIndexable),
        ]
        try server.encoder.setDynamicTableSize(2048)
        writes.append(server.ok(7, apnsID: "E-7", indexing: .nonIndexable))
        #expect(writes.last![9] == 0x3f, "the block starts with a dynamic table size update")
        writes.append(server.ok(9, apnsID: "E-9", indexing: .nonIndexable) + server.ok(11, apnsID: "E-11", indexing: .nonIndexable))

        let frames = try Self.decode(ServerFrames.run(writes, addsUniqueID: true))
        #expect(frames.map(\.streamID) == [1, 3, 3, 5, 7, 9, 11])
        var uniqueIDs: Set<String> = []
        for frame in frames where frame.type == 0x1 && frame.streamID != 3 {
            #expect(frame.fields.map(\.0) == [":status", "apns-id", "apns-unique-id"])
            #expect(frame.fields[0].1 == "200")
            #expect(frame.fields[1].1 == "E-\(frame.streamID)")
            let id = frame.fields[2].1
            #expect(id == id.lowercased() && (try? APNsID(header: id)) != nil)
            #expect(Array(id.utf8)[14] == UInt8(ascii: "4"), "version 4")
            uniqueIDs.insert(id)
        }
        #expect(uniqueIDs.count == 5)
        #expect(frames[1].fields.map(\.0) == [":status", "content-type", "apns-id"])
        #expect(frames[2].type == 0x0 && frames[2].payload == lookalike)

        // Production: the same writes leave byte for byte.
        #expect(try ServerFrames.run(writes, addsUniqueID: false) == writes.flatMap { $0 })
    }

    /// Two generators (two connections) seeded by the system's generator share no value; one
    /// generator repeats none in 10,000 draws; an all-zero seed still moves.
    @Test func uniqueIDGeneratorsAreIndependent() {
        var a = UniqueIDGenerator(), b = UniqueIDGenerator()
        var seen: Set<UInt64> = []
        for _ in 0..<10_000 { seen.insert(a.next()); seen.insert(b.next()) }
        #expect(seen.count == 20_000)
        var zero = UniqueIDGenerator(seed: (0, 0, 0, 0))
        #expect(zero.next() != zero.next())
    }
}
