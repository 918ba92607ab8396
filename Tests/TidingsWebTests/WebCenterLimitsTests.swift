import Foundation
import Logging
import Synchronization
import Testing
import TidingsCore
import TidingsEngine
@testable import TidingsWeb

#if canImport(Glibc)
import Glibc
#endif

/// The center's bounds on 127.0.0.1, port 0, with small limits: request bodies, replies,
/// identifiers per request, connections and idle connections (docs/security.md).
@Suite(.serialized) struct WebCenterLimitsTests {
    final class Recorder: Sendable {
        let requests = Mutex<[AdminRequest]>([])
        func admin(_ request: AdminRequest) -> AdminReply {
            requests.withLock { $0.append(request) }
            return .ok
        }
    }

    /// A running center over a recording admin; stopped when `body` returns.
    func withCenter(_ change: (inout WebCenterLimits) -> Void, _ body: (WebCenter, Int, Recorder) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("web-limits-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var limits = WebCenterLimits()
        change(&limits)
        let recorder = Recorder()
        let hub = WebHub(attachmentsRoot: directory + "/attachments", logger: Logger(label: "test"))
        let center = try WebCenter(configuration: WebCenterConfiguration(dataDirectory: directory, port: 0, limits: limits),
                                   hub: hub, admin: { recorder.admin($0) })
        let task = Task { try await center.run() }
        defer { task.cancel() }
        let port = await center.url().port ?? 0
        try await body(center, port, recorder)
    }

    /// Runs blocking socket calls on a thread of their own, never on the cooperative pool
    /// the center's handlers run on.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    /// One request on a connection of its own; the status code, or nil when the server
    /// closed without answering within `timeout`.
    static func send(_ port: Int, _ raw: String, timeout: Double = 30) -> Int? {
        let fd = connectTo(port)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        _ = raw.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
        let text = readAll(fd, timeout: timeout)
        guard text.hasPrefix("HTTP/1.1 ") else { return nil }
        return Int(text.dropFirst(9).prefix(3))
    }

    static func connectTo(_ port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result != 0 { close(fd); return -1 }
        return fd
    }

    /// Reads until the peer closes or `timeout` passes.
    static func readAll(_ fd: Int32, timeout: Double) -> String {
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            data += buffer[0..<n]
            if let text = String(bytes: data, encoding: .utf8), text.contains("\r\n\r\n"), let length = contentLength(text),
               text.utf8.count >= (text.range(of: "\r\n\r\n")!.upperBound.utf16Offset(in: text)) + length { break }
        }
        return String(decoding: data, as: UTF8.self)
    }

    static func contentLength(_ head: String) -> Int? {
        for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
            return Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    static func post(_ center: WebCenter, _ port: Int, _ path: String, _ body: String) -> Int? {
        let head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nOrigin: http://127.0.0.1:\(port)\r\n"
            + "Cookie: \(WebAccess.cookieName)=\(center.secret.sessionToken)\r\n\(WebAccess.csrfHeader): \(center.secret.csrfToken)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        return send(port, head + body)
    }

    /// `{"app":…,"identifier":…}` padded with spaces to exactly `size` bytes.
    static func padded(_ json: String, to size: Int) -> String {
        json + String(repeating: " ", count: max(0, size - json.utf8.count))
    }

    @Test(.timeLimit(.minutes(1))) func requestBodiesAtTheLimitAndPast() async throws {
        try await withCenter({ $0.maximumRequestBody = 1_024 }) { center, port, recorder in
            let json = #"{"app":"com.example.app","identifier":"n1"}"#
            #expect(await Self.blocking { Self.post(center, port, "/api/respond", Self.padded(json, to: 1_024)) } == 200)
            #expect(await Self.blocking { Self.post(center, port, "/api/respond", Self.padded(json, to: 1_025)) } == 413)
            #expect(recorder.requests.withLock { $0.count } == 1)
        }
    }

    @Test(.timeLimit(.minutes(1))) func repliesAtTheLimitAndPast() async throws {
        try await withCenter({ $0.maximumReplyText = 8 }) { center, port, recorder in
            #expect(await Self.blocking { Self.post(center, port, "/api/respond", #"{"app":"com.example.app","identifier":"n","action":"reply","text":"12345678"}"#) } == 200)
            #expect(await Self.blocking { Self.post(center, port, "/api/respond", #"{"app":"com.example.app","identifier":"n","action":"reply","text":"123456789"}"#) } == 413)
            #expect(recorder.requests.withLock { $0 } == [.respond(bundleIdentifier: "com.example.app", identifier: "n", actionIdentifier: "reply", userText: "12345678")])
        }
    }

    @Test(.timeLimit(.minutes(1))) func identifiersPerDismissAtTheLimitAndPast() async throws {
        try await withCenter({ $0.maximumIdentifiersPerRequest = 3 }) { center, port, recorder in
            #expect(await Self.blocking { Self.post(center, port, "/api/dismiss", #"{"app":"com.example.app","identifiers":["a","b","c"]}"#) } == 200)
            #expect(recorder.requests.withLock { $0.count } == 3)
            #expect(await Self.blocking { Self.post(center, port, "/api/dismiss", #"{"app":"com.example.app","identifiers":["a","b","c","d"]}"#) } == 413)
            #expect(recorder.requests.withLock { $0.count } == 3)
            #expect(recorder.requests.withLock { $0.allSatisfy { if case .respond(_, _, ActionIdentifier.dismiss, nil) = $0 { true } else { false } } })
        }
    }

    @Test(.timeLimit(.minutes(1))) func connectionsAtTheLimitAndPast() async throws {
        try await withCenter({ $0.maximumConnections = 2 }) { center, port, _ in
            let get = "GET /assets/style.css HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n"
            let held = [Self.connectTo(port), Self.connectTo(port)]
            // Closed once each (a second close could hit a descriptor the server reused).
            defer { close(held[1]) }
            // The two held connections are served…
            for fd in held {
                _ = get.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
                #expect(await Self.blocking { Self.readAll(fd, timeout: 5) }.hasPrefix("HTTP/1.1 200"))
            }
            // …a third waits (not accepted) until one of them closes.
            let third = Self.connectTo(port)
            defer { close(third) }
            _ = get.utf8CString.withUnsafeBufferPointer { write(third, $0.baseAddress, $0.count - 1) }
            #expect(await Self.blocking { Self.readAll(third, timeout: 0.5) }.isEmpty)
            close(held[0])
            #expect(await Self.blocking { Self.readAll(third, timeout: 5) }.hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test(.timeLimit(.minutes(1))) func anIdleConnectionIsClosed() async throws {
        try await withCenter({ $0.idleTimeout = .milliseconds(200) }) { _, port, _ in
            let fd = Self.connectTo(port)
            defer { close(fd) }
            let start = ContinuousClock.now
            let result = await Self.blocking { () -> Int in
                var byte: UInt8 = 0
                var tv = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                return read(fd, &byte, 1)
            }
            #expect(result == 0)
            #expect(ContinuousClock.now - start < .seconds(4))
        }
    }
}
