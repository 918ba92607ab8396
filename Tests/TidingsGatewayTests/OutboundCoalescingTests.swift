import NIOCore
import NIOPosix
import Synchronization
import Testing
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
}
