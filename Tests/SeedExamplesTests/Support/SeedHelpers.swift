// Helpers the seeds' Swift examples use but do not show (they come from onevcat's
// UserNotificationDemo), and a recording daemon to run the examples against.
// The examples themselves live in Seed000Examples.swift, Seed001Examples.swift and
// Seed003Examples.swift, verbatim except for UIKit lines, each removal marked.

import Crypto
import Testing
import Foundation
import Synchronization
import TidingsCore
@_spi(Tidings) import UserNotifications

// MARK: - What the seeds print

/// The seeds' `print`, unchanged for them (this module's function shadows the standard
/// library's): records each line for the tests (`SeedOutput`), then prints it.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    let line = items.map { "\($0)" }.joined(separator: separator)
    SeedOutput.lines.withLock { $0.append(line) }
    Swift.print(line, terminator: terminator)
}

/// Every line the seeds' examples printed in this test process.
enum SeedOutput {
    static let lines = Mutex<[String]>([])

    /// The printed lines that contain `text`.
    static func lines(containing text: String) -> [String] {
        lines.withLock { $0.filter { $0.contains(text) } }
    }
}

// MARK: - UIKit stand-ins

/// `UIImageView`, as far as the seeds' attachment code uses it: holds an image.
final class UIImageView {
    var image: UIImage?
}

/// `UIImage(contentsOfFile:)`: nil when the file cannot be read, as UIKit's.
struct UIImage {
    let data: Data
    init?(contentsOfFile path: String) {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        self.data = data
    }
}

// MARK: - Helpers from the seeds' demo project

/// The demo's `delay(_:_:)` is `DispatchQueue.main.asyncAfter`. In tests, time is driven
/// by hand: the closure is queued on the test's clock and runs when the test calls
/// `SeedClock.current.advance()`, inside the test's task (so
/// `UNUserNotificationCenter.current()` is the test's center).
@MainActor func delay(_ seconds: Double, _ work: @escaping () -> Void) {
    guard let clock = SeedClockContext.clock else {
        Issue.record("delay(\(seconds)) outside withSeedCenter")
        return
    }
    clock.schedule(seconds, work)
}

/// The clock of the running test (a task-local, so parallel tests do not share one).
enum SeedClockContext {
    @TaskLocal static var clock: SeedClock?
}

/// A hand-driven clock for `delay`.
@MainActor final class SeedClock {
    static var current: SeedClock { SeedClockContext.clock! }
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
        case .getPendingScheduled: return .pendingRequests([])
        case .getDelivered: return .notifications([])
        default: return .ok
        }
    }

    func send(_ request: AppRequest) {
        log.withLock { $0.append(request) }
    }

    func events() -> AsyncStream<DaemonEvent> { stream }

    func emit(_ event: DaemonEvent) { continuation.yield(event) }

    /// Waits until `count` requests matching `predicate` were recorded (polling; gives up
    /// when the test is cancelled, e.g. by its time limit, and returns what there is).
    func waitFor(_ count: Int = 1, _ predicate: @escaping @Sendable (AppRequest) -> Bool) async -> [AppRequest] {
        while !Task.isCancelled {
            let matching = requests.filter(predicate)
            if matching.count >= count { return matching }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return requests.filter(predicate)
    }

    /// The identifiers of the requests added so far, in order.
    var addedIdentifiers: [String] {
        requests.compactMap { if case .add(let value) = $0 { value.identifier } else { nil } }
    }
}

/// Runs `body` with `UNUserNotificationCenter.current()` bound to a center over `daemon`
/// and a fresh clock for `delay`.
@MainActor func withSeedCenter<R>(_ daemon: RecordingDaemon, _ body: () async throws -> R) async rethrows -> R {
    let center = UNUserNotificationCenter(transport: daemon)
    return try await SeedClockContext.$clock.withValue(SeedClock()) {
        try await UNUserNotificationCenter.$testingCurrent.withValue(center) {
            try await body()
        }
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

#if canImport(Glibc)
import Glibc
#endif

/// Serves one HTTP response on 127.0.0.1 (an ephemeral port), so the seed's
/// `downloadAndSave` runs its real `URLSession` download without the network.
final class OneShotHTTPServer {
    let port: UInt16
    private let listener: Int32

    init(body: [UInt8], contentType: String) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 1) == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        listener = fd
        let header = Array("HTTP/1.1 200 OK\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8)
        let thread = Thread {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !request.ends(with: Array("\r\n\r\n".utf8)) {
                let n = recv(client, &buffer, buffer.count, 0)
                if n <= 0 { break }
                request += buffer[0..<n]
            }
            let response = header + body
            _ = response.withUnsafeBytes { send(client, $0.baseAddress, $0.count, 0) }
            close(client)
        }
        thread.start()
    }

    deinit { close(listener) }

    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)/\(path)")! }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
