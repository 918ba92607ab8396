// Helpers the seeds' Swift examples use but do not show (they come from onevcat's
// UserNotificationDemo), and a recording daemon to run the examples against.
// The examples themselves live in Seed000Examples.swift, Seed001Examples.swift and
// Seed003Examples.swift, verbatim except for UIKit lines, each removal marked.

import Crypto
import Foundation
import Synchronization
import TidingsCore
@_spi(Tidings) import UserNotifications

// MARK: - Helpers from the seeds' demo project

/// The demo's `delay(_:_:)` is `DispatchQueue.main.asyncAfter`. In tests, time is driven
/// by hand: the closure is queued and runs when the test calls `SeedClock.current.advance()`,
/// inside the test's task (so `UNUserNotificationCenter.current()` is the test's center).
/// The seed tests run on the main actor, one at a time.
@MainActor func delay(_ seconds: Double, _ work: @escaping () -> Void) {
    SeedClock.current.schedule(seconds, work)
}

/// A hand-driven clock for `delay`.
@MainActor final class SeedClock {
    static var current = SeedClock()
    private var queued: [(seconds: Double, work: () -> Void)] = []
    private(set) var elapsed: Double = 0

    func schedule(_ seconds: Double, _ work: @escaping () -> Void) {
        queued.append((elapsed + seconds, work))
    }

    /// Runs every queued closure in due order.
    func advance() {
        while let next = queued.enumerated().min(by: { $0.element.seconds < $1.element.seconds }) {
            queued.remove(at: next.offset)
            elapsed = max(elapsed, next.element.seconds)
            next.element.work()
        }
    }
}

/// The demo's list of example notifications; raw values are the request identifiers.
enum UserNotificationType: String {
    case timeInterval
    case timeIntervalForeground
    case pendingRemoval
    case pendingUpdate
    case deliveredRemoval
    case deliveredUpdate
    case actionable
    case mutableContent
    case media
}

/// The demo's category identifiers.
enum UserNotificationCategoryType: String {
    case saySomething = "saySomethingCategory"
}

/// The demo's action identifiers for the "say something" category.
enum SaySomethingCategoryAction: String {
    case input = "action.input"
    case goodbye = "action.goodbye"
    case none = "action.cancel"
}

/// The demo's content-extension model.
struct NotificationPresentItem {
    let url: URL
    let title: String
    let text: String
}

extension FileManager {
    /// The demo's caches directory (a String path).
    var cachesDirectory: String {
        urls(for: .cachesDirectory, in: .userDomainMask).first!.path
    }
}

extension String {
    /// The demo's `md5` (CommonCrypto `CC_MD5` on Apple platforms; swift-crypto here).
    var md5: String {
        Insecure.MD5.hash(data: Data(utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

// MARK: - A recording daemon

/// Records every request in order (round trips and fire-and-forget alike), answers round
/// trips like a daemon that granted authorization, and emits events on demand.
final class RecordingDaemon: NotificationServiceTransport {
    private let log = Mutex<[AppRequest]>([])
    private let stream: AsyncStream<DaemonEvent>
    private let continuation: AsyncStream<DaemonEvent>.Continuation
    let settings: NotificationSettingsValue

    init(settings: NotificationSettingsValue = .granted([.alert, .sound, .badge], provisional: false)) {
        self.settings = settings
        (stream, continuation) = AsyncStream.makeStream(of: DaemonEvent.self)
    }

    var requests: [AppRequest] { log.withLock { $0 } }

    func call(_ request: AppRequest) async throws(NotificationError) -> AppReply {
        log.withLock { $0.append(request) }
        switch request {
        case .requestAuthorization: return .authorization(granted: settings.isAllowed)
        case .getSettings: return .settings(settings)
        case .getCategories: return .categories([])
        case .add(let value): return .added(value)
        case .getPending: return .requests([])
        case .getDelivered: return .notifications([])
        default: return .ok
        }
    }

    func send(_ request: AppRequest) {
        log.withLock { $0.append(request) }
    }

    func events() -> AsyncStream<DaemonEvent> { stream }

    func emit(_ event: DaemonEvent) { continuation.yield(event) }

    /// Waits until `count` requests matching `predicate` were recorded.
    func waitFor(_ count: Int = 1, _ predicate: @escaping @Sendable (AppRequest) -> Bool) async -> [AppRequest] {
        while true {
            let matching = requests.filter(predicate)
            if matching.count >= count { return matching }
            await Task.yield()
        }
    }

    /// The identifiers of the requests added so far, in order.
    var addedIdentifiers: [String] {
        requests.compactMap { if case .add(let value) = $0 { value.identifier } else { nil } }
    }
}

/// Runs `body` with `UNUserNotificationCenter.current()` bound to a center over `daemon`
/// and a fresh clock for `delay`.
@MainActor func withSeedCenter<R>(_ daemon: RecordingDaemon, _ body: () async throws -> R) async rethrows -> R {
    SeedClock.current = SeedClock()
    let center = UNUserNotificationCenter(transport: daemon)
    return try await UNUserNotificationCenter.$testingCurrent.withValue(center) {
        try await body()
    }
}

/// A temporary directory removed when released.
final class TemporaryDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("seed-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }

    func write(_ name: String, _ bytes: [UInt8]) throws -> URL {
        let file = url.appendingPathComponent(name)
        try Data(bytes).write(to: file)
        return file
    }

    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0]
    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0xFF, 0xD9]
}
