import Foundation
import Testing
import TidingsCore
import TidingsDaemon
import TidingsIPC
import TidingsTestSupport
import TidingsTesting

/// A raw, blocking connection to the app socket: the bytes a hostile or broken peer sends,
/// not what `AppSocketClient` would. Reads give up after a few seconds (a test that fails
/// waits that long; one that passes never does).
final class RawAppConnection: @unchecked Sendable {
    let descriptor: Int32

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes.prefix(raw.count - 1))
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Foundation.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { close(descriptor); throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)  // generous: a loaded CI machine (every suite at once) once took over 5 s to deliver a close
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    /// Writes what it can; false once the daemon closed the connection.
    private func writeBlocking(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 { if errno == EINTR { continue }; return false }
            offset += n
        }
        return true
    }

    static func header(_ length: UInt32) -> [UInt8] {
        [UInt8(length >> 24), UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
    }

    func send(_ request: AppRequest, id: UInt64 = 1, padTo length: Int? = nil) async throws {
        var body = [UInt8](try JSONEncoder().encode(AppEnvelope(id: id, request: request)))
        if let length { body += Array(repeating: UInt8(ascii: " "), count: length - body.count) }
        await write(Self.header(UInt32(body.count)) + body)
    }

    private func read(_ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let n = bytes[offset...].withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return nil }
            offset += n
        }
        return bytes
    }

    /// Runs blocking socket calls on a thread of their own: the daemon under test shares the
    /// cooperative pool with the test.
    private func blocking<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    /// The next daemon frame, or nil at end of stream (or after the read timeout).
    func next() async -> DaemonEnvelope? {
        await blocking { self.nextBlocking() }
    }

    func isClosedByPeer() async -> Bool {
        await blocking { self.isClosedByPeerBlocking() }
    }

    @discardableResult
    func write(_ bytes: [UInt8]) async -> Bool {
        await blocking { self.writeBlocking(bytes) }
    }

    private func nextBlocking() -> DaemonEnvelope? {
        guard let header = read(4) else { return nil }
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard let body = read(length) else { return nil }
        return try? JSONDecoder().decode(DaemonEnvelope.self, from: Data(body))
    }

    /// Whether the daemon closed the connection (end of stream, not a timeout).
    private func isClosedByPeerBlocking() -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(descriptor, &byte, 1, 0)
            if n < 0, errno == EINTR { continue }
            return n == 0 || (n < 0 && errno == ECONNRESET)
        }
    }
}

/// A refusal the daemon sends before closing: a failure with id 0.
func refusal(_ envelope: DaemonEnvelope?) -> NotificationError? {
    guard case .reply(0, .failure(let error))? = envelope else { return nil }
    return error
}

@Suite("App socket limits", .timeLimit(.minutes(1)))
struct AppSocketLimitsTests {
    /// A daemon in this process (development mode, so a claimed bundle id is enough).
    static func daemon(_ limits: AppSocketLimits = AppSocketLimits(), development: Bool = true) async throws -> (NotificationDaemon, Task<Void, any Error>, String) {
        let directory = "/tmp/tsl-\(UUID().uuidString.prefix(8))"
        var configuration = DaemonConfiguration(dataDirectory: directory, consent: .grant, developmentMode: development, terminalPresenter: false, clock: TestWallClock())
        configuration.appSocket = limits
        let daemon = try await buildDaemon(configuration)
        let run = Task { try await daemon.run() }
        return (daemon, run, directory)
    }

    static let hello = AppRequest.hello(AppHello(bundleIdentifier: "com.example.limits", state: .background))

    @Test("a length prefix over 16 MiB (16 MiB + 1, 20 MiB, 2 GiB, 4 GiB − 1) is refused at once: failure id 0, then closed")
    func oversizedLengthPrefix() async throws {
        let (daemon, run, directory) = try await Self.daemon()
        defer { run.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        for length in [UInt32(16 << 20) + 1, 20 << 20, 1 << 31, .max] {
            let connection = try RawAppConnection(path: daemon.socketPath)
            // Only the header and a little of the body: the daemon must not wait for the rest.
            await connection.write(RawAppConnection.header(length) + Array("{\"id\":1".utf8))
            let error = refusal(await connection.next())
            #expect(error?.code == .invalidRequest, "length \(length)")
            #expect(error?.message.contains("over the limit") == true)
            #expect(await connection.isClosedByPeer(), "length \(length)")
        }
        // A 20 MiB frame sent whole is refused too, not read and answered.
        let whole = try RawAppConnection(path: daemon.socketPath)
        var body = [UInt8](try JSONEncoder().encode(AppEnvelope(id: 1, request: Self.hello)))
        body += Array(repeating: UInt8(ascii: " "), count: (20 << 20) - body.count)
        await whole.write(RawAppConnection.header(UInt32(body.count)) + body)
        #expect(refusal(await whole.next())?.code == .invalidRequest)
        #expect(await whole.isClosedByPeer())
    }

    @Test("a frame of exactly the limit is read; one byte more is refused", arguments: [1024, 64 * 1024])
    func frameAtTheLimit(limit: Int) async throws {
        let (daemon, run, directory) = try await Self.daemon(AppSocketLimits(maximumFrameLength: limit))
        defer { run.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        let atLimit = try RawAppConnection(path: daemon.socketPath)
        try await atLimit.send(Self.hello, padTo: limit)
        guard case .reply(1, .hello(let bundle, _))? = await atLimit.next() else {
            Issue.record("a frame of \(limit) bytes was not answered")
            return
        }
        #expect(bundle == "com.example.limits")
        let over = try RawAppConnection(path: daemon.socketPath)
        try await over.send(Self.hello, padTo: limit + 1)
        #expect(refusal(await over.next())?.code == .invalidRequest)
        #expect(await over.isClosedByPeer())
        // The first connection is unaffected.
        try await atLimit.send(.getSettings, id: 2)
        guard case .reply(2, .settings)? = await atLimit.next() else { Issue.record("the good connection broke"); return }
    }

    @Test("a connection that says nothing, or half a frame, is closed after the hello timeout; one that said hello stays")
    func helloTimeout() async throws {
        // 1 s, not less: under a loaded full run the greeted connection's hello was once not
        // handled within 100 ms, and that connection was closed too.
        let (daemon, run, directory) = try await Self.daemon(AppSocketLimits(helloTimeout: .seconds(1)))
        defer { run.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        let silent = try RawAppConnection(path: daemon.socketPath)
        let partial = try RawAppConnection(path: daemon.socketPath)
        await partial.write(RawAppConnection.header(100) + [UInt8(ascii: "{")])
        let greeted = try RawAppConnection(path: daemon.socketPath)
        try await greeted.send(Self.hello)
        guard case .reply(1, .hello)? = await greeted.next() else { Issue.record("hello was not answered"); return }
        for connection in [silent, partial] {
            let error = refusal(await connection.next())
            #expect(error?.code == .invalidRequest)
            #expect(error?.message.contains("no hello within 1000 ms") == true)
            #expect(await connection.isClosedByPeer())
        }
        // Well past the timeout, the app's connection still serves requests.
        try await greeted.send(.getSettings, id: 2)
        guard case .reply(2, .settings)? = await greeted.next() else { Issue.record("the app's connection was closed"); return }
    }

    @Test("connections over the cap are refused at once; a freed place is taken again")
    func connectionCap() async throws {
        let (daemon, run, directory) = try await Self.daemon(AppSocketLimits(maximumConnections: 2))
        defer { run.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        var first: RawAppConnection? = try RawAppConnection(path: daemon.socketPath)
        let second = try RawAppConnection(path: daemon.socketPath)
        #expect(await eventually { daemon.appConnectionCount == 2 })
        let third = try RawAppConnection(path: daemon.socketPath)
        let error = refusal(await third.next())
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains("2 connections open") == true)
        #expect(await third.isClosedByPeer())
        try await second.send(Self.hello)
        guard case .reply(1, .hello)? = await second.next() else { Issue.record("an admitted connection was not served"); return }
        _ = first
        first = nil
        #expect(await eventually { daemon.appConnectionCount == 1 })
        let fourth = try RawAppConnection(path: daemon.socketPath)
        try await fourth.send(Self.hello)
        guard case .reply(1, .hello)? = await fourth.next() else { Issue.record("the freed place was not taken"); return }
    }

    @Test("the client refuses to send a request over the frame limit, with a typed error, and stays connected")
    func clientRefusesOversizedRequest() async throws {
        let (daemon, run, directory) = try await Self.daemon()
        defer { run.cancel(); try? FileManager.default.removeItem(atPath: directory) }
        let client = try await AppSocketClient.connect(path: daemon.socketPath)
        defer { client.close() }
        _ = try await client.call(Self.hello)
        var content = NotificationContentValue()
        content.title = "big"
        content.userInfo = ["blob": .data(Data(count: IPCCodec.maximumFrameLength))]
        do {
            _ = try await client.call(.add(NotificationRequestValue(identifier: "big", content: content, trigger: nil)))
            Issue.record("a request over the frame limit was sent")
        } catch let error as NotificationError {
            #expect(error.code == .invalidRequest)
        }
        #expect(try await client.call(.getSettings).isSettings)
    }
}

extension AppReply {
    var isSettings: Bool {
        if case .settings = self { return true }
        return false
    }
}
