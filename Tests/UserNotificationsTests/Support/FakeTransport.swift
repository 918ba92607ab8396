import Foundation
import Synchronization
import TidingsCore
@_spi(Tidings) import UserNotifications

/// A scripted daemon: records every request, answers `call`s with a reply function, and
/// emits events on demand.
final class FakeTransport: NotificationServiceTransport {
    typealias Replier = @Sendable (AppRequest) throws(NotificationError) -> AppReply

    private struct State {
        var calls: [AppRequest] = []
        var sends: [AppRequest] = []
        var waiters: [(predicate: @Sendable (AppRequest) -> Bool, continuation: CheckedContinuation<AppRequest, Never>)] = []
    }

    private let state = Mutex(State())
    private let replier: Replier
    private let stream: AsyncStream<DaemonEvent>
    private let continuation: AsyncStream<DaemonEvent>.Continuation

    init(replier: @escaping Replier = FakeTransport.standardReplies) {
        self.replier = replier
        (stream, continuation) = AsyncStream.makeStream(of: DaemonEvent.self)
    }

    /// Answers every request the way a daemon that granted authorization would.
    static let standardReplies: Replier = { (request: AppRequest) throws(NotificationError) -> AppReply in
        switch request {
        case .requestAuthorization: .authorization(granted: true)
        case .getSettings: .settings(.granted([.alert, .sound, .badge], provisional: false))
        case .getCategories: .categories([])
        case .add(let value): .added(value)
        case .getPending: .requests([])
        case .getPendingScheduled: .pendingRequests([])
        case .getDelivered: .notifications([])
        default: .ok
        }
    }

    var calls: [AppRequest] { state.withLock { $0.calls } }
    var sends: [AppRequest] { state.withLock { $0.sends } }

    func call(_ request: AppRequest) async throws(NotificationError) -> AppReply {
        state.withLock { $0.calls.append(request) }
        return try replier(request)
    }

    func send(_ request: AppRequest) {
        let ready = state.withLock { state -> [CheckedContinuation<AppRequest, Never>] in
            state.sends.append(request)
            var ready: [CheckedContinuation<AppRequest, Never>] = []
            state.waiters.removeAll { waiter in
                guard waiter.predicate(request) else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume(returning: request) }
    }

    func events() -> AsyncStream<DaemonEvent> { stream }

    func emit(_ event: DaemonEvent) { continuation.yield(event) }

    /// Waits until a fire-and-forget request matching `predicate` was sent (or returns the
    /// first one already sent).
    func nextSend(where predicate: @escaping @Sendable (AppRequest) -> Bool) async -> AppRequest {
        await withCheckedContinuation { continuation in
            let existing = state.withLock { state -> AppRequest? in
                if let found = state.sends.first(where: predicate) { return found }
                state.waiters.append((predicate, continuation))
                return nil
            }
            if let existing { continuation.resume(returning: existing) }
        }
    }
}

/// Fixture values.
enum Fixtures {
    static func request(_ identifier: String = "r1", title: String = "Hello", trigger: TriggerValue? = .timeInterval(seconds: 5, repeats: false)) -> NotificationRequestValue {
        var content = NotificationContentValue()
        content.title = title
        content.body = "Body"
        content.categoryIdentifier = "saySomethingCategory"
        content.userInfo = ["name": .string("Adu Test")]
        return NotificationRequestValue(identifier: identifier, content: content, trigger: trigger)
    }

    static func delivered(_ identifier: String = "r1", date: Date = Date(timeIntervalSince1970: 1_800_000_000)) -> DeliveredNotificationValue {
        DeliveredNotificationValue(request: request(identifier), date: date)
    }

    /// A temporary directory removed when the returned object is released.
    final class TemporaryDirectory: Sendable {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("un-tests-\(UUID().uuidString)", isDirectory: true)
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(at: url) }

        /// Writes `bytes` then pads to `size` bytes (sparse when large).
        func file(_ name: String, _ bytes: [UInt8], size: Int64? = nil) throws -> URL {
            let file = url.appendingPathComponent(name)
            try Data(bytes).write(to: file)
            if let size {
                let handle = try FileHandle(forWritingTo: file)
                try handle.truncate(atOffset: UInt64(size))
                try handle.close()
            }
            return file
        }
    }

    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0]
    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xFF, 0xD9]
    static let gif: [UInt8] = Array("GIF89a".utf8) + [1, 0, 1, 0, 0, 0, 0, 0x3B]
    static let mp3: [UInt8] = Array("ID3".utf8) + [3, 0, 0, 0, 0, 0, 0] + [0xFF, 0xFB, 0x90, 0x64]
    static let mp3Frame: [UInt8] = [0xFF, 0xFB, 0x90, 0x64, 0, 0, 0, 0]
    static let wav: [UInt8] = Array("RIFF".utf8) + [36, 0, 0, 0] + Array("WAVEfmt ".utf8) + [16, 0, 0, 0, 1, 0, 1, 0]
    static let aiff: [UInt8] = Array("FORM".utf8) + [0, 0, 0, 4] + Array("AIFF".utf8)
    static let mp4: [UInt8] = [0, 0, 0, 0x18] + Array("ftypisom".utf8) + [0, 0, 2, 0] + Array("isomiso2".utf8)
    static let m4a: [UInt8] = [0, 0, 0, 0x18] + Array("ftypM4A ".utf8) + [0, 0, 2, 0] + Array("M4A mp42".utf8)
    static let avi: [UInt8] = Array("RIFF".utf8) + [0, 0, 0, 0] + Array("AVI LIST".utf8)
    static let mpeg: [UInt8] = [0x00, 0x00, 0x01, 0xBA, 0x44, 0, 4, 0, 4, 1]
}
