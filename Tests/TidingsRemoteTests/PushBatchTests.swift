import Foundation
import Testing
import TidingsCore
@testable import TidingsDaemon

/// Group commit of received pushes: what arrived together is taken together, in order, and
/// made durable in one transaction that still dedupes redeliveries.
@Suite("Remote receipt batching")
struct PushBatchTests {
    static func push(_ n: Int64, id: String? = nil) -> DevicePush {
        DevicePush(sequence: n, apnsID: id ?? "00000000-0000-4000-8000-\(String(format: "%012d", n))", token: "ab", topic: "com.example.app",
                   pushType: .alert, priority: .immediate, collapseID: nil, expiresAt: 0, acceptedAt: 1,
                   payload: Array(#"{"aps":{"alert":"n\#(n)"}}"#.utf8))
    }

    @Test func pushesThatArriveWhileTheWriterIsBusyAreTakenTogetherInOrder() async {
        let batch = PushBatch()
        batch.append(Self.push(1))
        #expect(await batch.next()?.map(\.sequence) == [1])
        for n in 2...5 { batch.append(Self.push(Int64(n))) }
        #expect(await batch.next()?.map(\.sequence) == [2, 3, 4, 5])
        // A writer waiting for pushes is woken by the next one.
        async let waited = batch.next()
        batch.append(Self.push(6))
        #expect(await waited?.map(\.sequence) == [6])
        batch.append(Self.push(7))
        batch.finish()
        #expect(await batch.next()?.map(\.sequence) == [7], "what arrived before the end is still taken")
        #expect(await batch.next() == nil)
    }

    @Test func oneTransactionStoresABurstAndDedupesRedeliveries() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tpb-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let inbox = try RemoteInbox(path: dir.appendingPathComponent("remote.sqlite").path)
        let first = try #require(RemotePush(Self.push(1)))
        #expect(try inbox.receive(first, at: Date()))
        let burst = try (1...4).map { try #require(RemotePush(Self.push(Int64($0)))) }
        #expect(try inbox.receive(burst, at: Date()) == [false, true, true, true])
        #expect(try inbox.unprocessed().map(\.sequence) == [1, 2, 3, 4])
        try inbox.markProcessed(burst[0])
        #expect(try inbox.unprocessed().map(\.sequence) == [2, 3, 4])
        // After a processed mark (committed without fsync) receipt is FULL again, and reopening sees both.
        #expect(try inbox.receive([try #require(RemotePush(Self.push(5)))], at: Date()) == [true])
        let reopened = try RemoteInbox(path: dir.appendingPathComponent("remote.sqlite").path)
        #expect(try reopened.unprocessed().map(\.sequence) == [2, 3, 4, 5])
    }
}

/// The device key is made once, mode 0600 from the moment it exists, and read back after.
@Test func deviceKeyFileIsPrivateAndReused() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-key-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("device-key.pem").path
    let made = try DeviceKeyFile.loadOrCreate(path: path)
    let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
    #expect(mode == 0o600)
    #expect(try DeviceKeyFile.loadOrCreate(path: path).rawRepresentation == made.rawRepresentation)
    #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
}
