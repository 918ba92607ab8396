import Foundation
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
}
