import Crypto
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import Synchronization
import Testing
import TidingsCore
@testable import TidingsDevice

/// `DeviceConnection.pushes`: bursts in order, the end after what is pending, a failure thrown
/// once, and a cancelled consumer released.
@Suite("Device pushes sequence")
struct DevicePushesTests {
    static func push(_ sequence: Int64) -> DevicePush {
        DevicePush(sequence: sequence, apnsID: "id\(sequence)", token: "t", topic: "a.b", pushType: .alert, priority: .immediate,
                   collapseID: nil, expiresAt: 0, acceptedAt: 0, payload: Array("{}".utf8))
    }

    @Test func burstsArriveInOrderThenTheFailureOnceThenTheEnd() async throws {
        let buffer = DevicePushBuffer()
        buffer.append([Self.push(1), Self.push(2)])
        buffer.append([Self.push(3)])
        buffer.finish(DeviceClientError.closed)
        buffer.append([Self.push(4)])  // after the end: dropped
        var iterator = DevicePushes(buffer: buffer).makeAsyncIterator()
        var sequences: [Int64] = []
        for _ in 0..<3 { sequences.append(try #require(try await iterator.next()).sequence) }
        #expect(sequences == [1, 2, 3])
        await #expect(throws: DeviceClientError.closed) { try await iterator.next() }
        #expect(try await iterator.next() == nil)
    }

    @Test func aWaitingConsumerGetsEachBurstAndACleanEnd() async throws {
        let buffer = DevicePushBuffer()
        let consumer = Task {
            var sequences: [Int64] = []
            for try await push in DevicePushes(buffer: buffer) { sequences.append(push.sequence) }
            return sequences
        }
        buffer.append([Self.push(1)])
        buffer.append([Self.push(2), Self.push(3)])
        buffer.finish(nil)
        #expect(try await consumer.value == [1, 2, 3])
    }

    @Test func aFailureReachesAWaitingConsumer() async throws {
        let buffer = DevicePushBuffer()
        let consumer = Task { () -> (any Error)? in
            do {
                for try await _ in DevicePushes(buffer: buffer) {}
                return nil
            } catch { return error }
        }
        buffer.append([Self.push(1)])
        buffer.finish(DeviceClientError(reason: "BadDeviceKey", message: "m"))
        let error = await consumer.value
        #expect(error as? DeviceClientError == DeviceClientError(reason: "BadDeviceKey", message: "m"))
    }

    @Test func cancellingTheConsumerEndsItsLoop() async throws {
        let buffer = DevicePushBuffer()
        let started = AsyncStream<Void>.makeStream()
        let consumer = Task {
            var count = 0
            started.continuation.yield()
            for try await _ in DevicePushes(buffer: buffer) { count += 1 }
            return count
        }
        for await _ in started.stream { break }
        consumer.cancel()
        // Whether it was already waiting or not, it ends (nothing was appended).
        #expect(try await consumer.value == 0)
    }

    static func push(_ sequence: Int64, payloadBytes: Int) -> DevicePush {
        var p = push(sequence)
        p.payload = Array(repeating: UInt8(ascii: " "), count: payloadBytes)
        return p
    }

    /// At the bound (pushes or payload bytes pending) the handler may not read; the consumer
    /// taking resumes the held read once; below the bound reading goes on.
    @Test func aFullBufferHoldsTheReadUntilTheConsumerTakes() async throws {
        let buffer = DevicePushBuffer(maximumPushes: 3, maximumPayloadBytes: 1_000)
        let resumed = Mutex(0)
        let resume: @Sendable () -> Void = { resumed.withLock { $0 += 1 } }
        buffer.append([Self.push(1), Self.push(2)])
        #expect(buffer.mayRead(resume: resume), "2 of 3: below the bound")
        buffer.append([Self.push(3)])
        #expect(!buffer.mayRead(resume: resume), "3 of 3: at the bound")
        #expect(resumed.withLock { $0 } == 0)
        #expect(try await buffer.take().map(\.sequence) == [1, 2, 3])
        #expect(resumed.withLock { $0 } == 1, "taking resumes the held read")
        #expect(buffer.mayRead(resume: resume))
        // By payload bytes: one push of 1,000 bytes fills it.
        buffer.append([Self.push(4, payloadBytes: 1_000)])
        #expect(!buffer.mayRead(resume: resume))
        _ = try await buffer.take()
        #expect(resumed.withLock { $0 } == 2)
        #expect(buffer.pendingCount.pushes == 0 && buffer.pendingCount.payloadBytes == 0)
    }

    /// A consumer with bounded room takes a prefix: by count, by payload bytes (the first push
    /// regardless only when asked), the rest kept in order for the next take.
    @Test func aConsumerTakesOnlyWhatFitsItsRoomInOrder() async throws {
        let buffer = DevicePushBuffer()
        buffer.append((1...5).map { Self.push($0, payloadBytes: 10) })
        var first = try #require(try await buffer.take(.init(pushes: 2, payloadBytes: 1_000, atLeastOne: false)))
        #expect(first.map(\.sequence) == [1, 2], "at most 2")
        first = try #require(try await buffer.take(.init(pushes: 10, payloadBytes: 25, atLeastOne: false)))
        #expect(first.map(\.sequence) == [3, 4], "20 of 25 bytes: the next 10 do not fit")
        #expect(try await buffer.take(.init(pushes: 10, payloadBytes: 9, atLeastOne: false)) == [], "none fits: nothing taken")
        #expect(try await buffer.take(.init(pushes: 10, payloadBytes: 9, atLeastOne: true))?.map(\.sequence) == [5], "the first regardless")
        #expect(buffer.pendingCount.pushes == 0 && buffer.pendingCount.payloadBytes == 0)
        // Handed to a waiting consumer directly: what does not fit goes back, before later pushes.
        let waiting = Task { try await buffer.take(.init(pushes: 1, payloadBytes: .max, atLeastOne: true)) }
        while buffer.waiting == false { await Task.yield() }
        buffer.append([Self.push(6), Self.push(7)])
        #expect(try await waiting.value?.map(\.sequence) == [6])
        buffer.append([Self.push(8)])
        #expect(try await buffer.take().map(\.sequence) == [7, 8])
        buffer.finish(nil)
        #expect(try await buffer.take(.init(pushes: 1, payloadBytes: 1, atLeastOne: false)) == nil, "the end")
    }

    /// The client handler reads only while the buffer has room: at the bound a read is held
    /// (the socket is not read; TCP pushes back on the gateway) and the consumer's take makes it.
    /// While reads are held back (the consumer is behind), the gateway's pong cannot be read:
    /// the keep-alive does not take that for the gateway's silence and close the connection.
    @Test func aHeldReadDoesNotCountAsAnUnansweredPing() async throws {
        let buffer = DevicePushBuffer(maximumPushes: 1, maximumPayloadBytes: 1 << 20)
        let channel = NIOAsyncTestingChannel()
        try await channel.testingEventLoop.executeInContext {
            try channel.pipeline.syncOperations.addHandler(DeviceClientHandler(shared: DeviceConnectionShared(pushes: buffer), key: P256.Signing.PrivateKey(),
                                                                               logger: Logger(label: "test"), pingInterval: .seconds(30)))
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1))
        try await channel.writeInbound(ByteBuffer(bytes: DeviceMessage.welcome(deviceID: "ab", batchedAcks: true, recordsEvents: true).encoded()))
        try await channel.writeInbound(ByteBuffer(bytes: DeviceMessage.push(Self.push(1)).encoded()))
        channel.read()
        for _ in 0..<3 { await channel.testingEventLoop.advanceTime(by: .seconds(30)) }
        #expect(channel.isActive, "reads held by the device itself: no Timeout")
        #expect(try await buffer.take().map(\.sequence) == [1])
        await channel.testingEventLoop.run()
        // Reading again: now a ping unanswered by the next one closes it, as before.
        for _ in 0..<2 { await channel.testingEventLoop.advanceTime(by: .seconds(30)) }
        #expect(!channel.isActive, "reading, and nothing heard: Timeout")
        _ = try? await channel.finish()
    }

    @Test func theHandlerStopsReadingAtTheBoundAndResumesWhenTheConsumerTakes() async throws {
        let buffer = DevicePushBuffer(maximumPushes: 2, maximumPayloadBytes: 1 << 20)
        let counter = ReadCounter()
        let channel = NIOAsyncTestingChannel()
        try await channel.testingEventLoop.executeInContext {
            try channel.pipeline.syncOperations.addHandler(counter)
            try channel.pipeline.syncOperations.addHandler(DeviceClientHandler(shared: DeviceConnectionShared(pushes: buffer), key: P256.Signing.PrivateKey(),
                                                                               logger: Logger(label: "test"), pingInterval: nil))
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1))
        func frame(_ message: DeviceMessage) -> ByteBuffer { ByteBuffer(bytes: message.encoded()) }
        func read() async {
            channel.read()
            await channel.testingEventLoop.run()
        }
        try await channel.writeInbound(frame(.welcome(deviceID: "ab", batchedAcks: true, recordsEvents: true)))
        let start = counter.reads
        await read()
        #expect(counter.reads == start + 1, "room: read")
        try await channel.writeInbound(frame(.push(Self.push(1))))
        try await channel.writeInbound(frame(.push(Self.push(2))))
        await read()
        #expect(counter.reads == start + 1, "2 of 2 pending: the read is held")
        #expect(try await buffer.take().map(\.sequence) == [1, 2])
        await channel.testingEventLoop.run()
        #expect(counter.reads == start + 2, "taken: the held read is made")
        await read()
        #expect(counter.reads == start + 3)
        _ = try? await channel.finish()
    }
}

/// Counts the reads that reach the socket.
final class ReadCounter: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = ByteBuffer
    private let count = Mutex(0)
    var reads: Int { count.withLock { $0 } }
    func read(context: ChannelHandlerContext) {
        count.withLock { $0 += 1 }
        context.read()
    }
}
