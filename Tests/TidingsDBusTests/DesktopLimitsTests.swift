import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import Testing
import TidingsCore
import TidingsDaemon
import TidingsDBus
import TidingsEngine
import TidingsTesting
import TidingsTestSupport

/// A Unix socket that is only ever `connect`ed to: a file descriptor the test closes.
struct RawSocket: ~Copyable {
    let fd: CInt

    /// A listening socket at `path` that accepts nothing and says nothing (the kernel completes
    /// a client's `connect` from its backlog).
    static func listening(at path: String) throws -> RawSocket {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.address(path)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard fd >= 0, bound == 0, listen(fd, 8) == 0 else { throw DBusError.connect("test socket: errno \(errno)") }
        return RawSocket(fd: fd)
    }

    /// A client of the bus at `path` that authenticates, says `Hello`, takes `name` and then
    /// never reads or answers anything: calls to it wait for ever.
    static func silentPeer(bus path: String, name: String) throws -> RawSocket {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.address(path)
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard fd >= 0, connected == 0 else { throw DBusError.connect("test socket: errno \(errno)") }
        var hello = DBusMessage.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "Hello")
        hello.serial = 1
        var request = DBusMessage.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                             member: "RequestName", body: [.string(name), .uint32(4)])
        request.serial = 2
        let bytes = DBusAuthentication.initialBytes(uid: UInt32(getuid())) + Array("BEGIN\r\n".utf8) + hello.encoded() + request.encoded()
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw DBusError.connect("test socket: short write") }
        return RawSocket(fd: fd)
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        return address
    }

    deinit { _ = close(fd) }
}

/// Each limit of docs/security.md's "D-Bus client and desktop notifications" table, at the
/// limit and one past it, with tiny configured values (no test waits for a real timeout of seconds).
@Suite("Desktop and D-Bus limits", .serialized)
struct DesktopLimitsTests {
    static let timeout = DBusError.timeout.description

    static func silentCall(_ connection: DBusConnection, timeout: TimeAmount? = nil) async throws {
        try await connection.call(.methodCall(destination: "org.example.Silent", path: "/", interface: "org.example.Silent", member: "Wait"), timeout: timeout)
    }

    @Test("connectTimeout: a socket that never answers the handshake fails in the configured time; a bus that answers in time connects")
    func connectTimeout() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        var configuration = DBusConnectionConfiguration()
        configuration.connectTimeout = .milliseconds(100)
        let path = bus.directory.appendingPathComponent("mute").path
        let mute = try RawSocket.listening(at: path)
        do {
            _ = try await DBusConnection.session(environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(path)"], configuration: configuration)
            Issue.record("a socket that never answers must not connect")
        } catch let error as DBusError {
            #expect(error.description.contains(Self.timeout), "\(error)")
        }
        _ = consume mute
        configuration.connectTimeout = .seconds(20)
        let connection = try await bus.connect(configuration)
        #expect(connection.uniqueName.hasPrefix(":"))
        await connection.close()
    }

    @Test("callTimeout: a call the peer never answers fails with timeout; one answered in time returns; the connection goes on")
    func callTimeout() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        var configuration = DBusConnectionConfiguration()
        configuration.callTimeout = .milliseconds(100)
        let connection = try await bus.connect(configuration)
        defer { Task { await connection.close() } }
        let silent = try RawSocket.silentPeer(bus: bus.directory.appendingPathComponent("bus").path, name: "org.example.Silent")
        #expect(await eventually { (try? await connection.nameOwner("org.example.Silent")) != nil })
        do {
            try await Self.silentCall(connection)
            Issue.record("an unanswered call must time out")
        } catch let error as DBusError {
            #expect(error.description == Self.timeout)
        }
        #expect(connection.pendingCalls == 0)
        // A call answered within its timeout returns (a generous one: the machine may be loaded).
        try await connection.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "ListNames"),
                                  timeout: .seconds(60))
        #expect(connection.isOpen)
        _ = consume silent
    }

    @Test("maximumPendingCalls: calls up to the limit wait; one more fails at once with tooManyPendingCalls")
    func pendingCalls() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        var configuration = DBusConnectionConfiguration()
        configuration.maximumPendingCalls = 3
        let connection = try await bus.connect(configuration)
        let silent = try RawSocket.silentPeer(bus: bus.directory.appendingPathComponent("bus").path, name: "org.example.Silent")
        #expect(await eventually { (try? await connection.nameOwner("org.example.Silent")) != nil })
        let waiting = (0..<2).map { _ in Task { try await Self.silentCall(connection, timeout: .seconds(60)) } }
        #expect(await eventually { connection.pendingCalls == 2 })
        // The third: at the limit, answered.
        try await connection.callBus("ListNames")
        let third = Task { try await Self.silentCall(connection, timeout: .seconds(60)) }
        #expect(await eventually { connection.pendingCalls == 3 })
        // Past it: refused at once, nothing sent.
        do {
            try await connection.callBus("ListNames")
            Issue.record("a call past maximumPendingCalls must fail")
        } catch let error as DBusError {
            #expect(error.description == DBusError.tooManyPendingCalls.description)
        }
        #expect(connection.pendingCalls == 3)
        await connection.close()
        for task in waiting + [third] {
            await #expect(throws: DBusError.self) { try await task.value }
        }
        _ = consume silent
    }

    /// `count` signals from another client, then a Ping through the bus: when it returns, all of
    /// them were read into the receiver's buffer. Their numbers, as the receiver reads them.
    static func bufferedSignals(count: Int32, buffer: Int) async throws -> [Int32]? {
        guard let bus = try await PrivateBus.start() else { return nil }
        defer { bus.stop() }
        var configuration = DBusConnectionConfiguration()
        configuration.signalBuffer = buffer
        let receiver = try await bus.connect(configuration)
        try await receiver.addMatch("type='signal',interface='org.example.Test'")
        let sender = try await bus.connect()
        for n in 1...count {
            try await sender.send(.signal(path: "/org/example", interface: "org.example.Test", member: "N", body: [.int32(n)]))
        }
        try await sender.call(.methodCall(destination: receiver.uniqueName, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping"))
        await sender.close()
        await receiver.close()
        var numbers: [Int32] = []
        for await signal in receiver.signals where signal.interface == "org.example.Test" {
            if case .int32(let n)? = signal.body.first { numbers.append(n) }
        }
        return numbers
    }

    @Test("signalBuffer: as many unread signals as the buffer holds are all kept; past it the oldest are dropped")
    func signalBuffer() async throws {
        // The bus's NameAcquired takes one place first and is the oldest, so it goes first.
        #expect(try await Self.bufferedSignals(count: 4, buffer: 4) == [1, 2, 3, 4])
        #expect(try await Self.bufferedSignals(count: 6, buffer: 4) == [3, 4, 5, 6])
    }

    static func presented(_ identifier: String) -> PresentedNotification {
        var content = NotificationContentValue()
        content.title = identifier
        return PresentedNotification(bundleIdentifier: "com.example.limits", appName: "Limits",
                                     notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: identifier, content: content, trigger: nil), date: Date()),
                                     category: nil, presentation: Presentation(banner: true, list: true, sound: false, badge: false), badge: nil)
    }

    static func presenter(_ bus: PrivateBus, _ change: (inout DesktopPresenterConfiguration) -> Void) -> DesktopPresenter {
        var configuration = DesktopPresenterConfiguration(environment: bus.environment)
        change(&configuration)
        var logger = Logger(label: "test.desktop.limits")
        logger.logLevel = .error
        return DesktopPresenter(configuration: configuration, logger: logger)
    }

    @Test("queueLimit: notifications up to the limit wait for the server; past it they are not shown on the desktop")
    func queueLimit() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        guard let mock = try await NotificationMock.start(on: bus) else { return }
        let presenter = Self.presenter(bus) { $0.queueLimit = 2 }
        // Queued before the presenter runs: nothing takes them off the queue yet.
        for identifier in ["a", "b", "c"] { await presenter.present(Self.presented(identifier)) }
        let runner = Task { await presenter.run() }
        #expect(await eventually { presenter.serverID(bundle: "com.example.limits", identifier: "b") != nil })
        #expect(presenter.serverID(bundle: "com.example.limits", identifier: "a") != nil)
        // The queue has room again.
        await presenter.present(Self.presented("d"))
        #expect(await eventually { presenter.serverID(bundle: "com.example.limits", identifier: "d") != nil })
        #expect(presenter.serverID(bundle: "com.example.limits", identifier: "c") == nil)
        #expect(try await mock.calls("Notify").map { $0[3].stringValue } == ["a", "b", "d"])
        runner.cancel()
        await runner.value
        await mock.stop()
    }

    static func id(_ presenter: DesktopPresenter, _ identifier: String) -> UInt32? {
        presenter.serverID(bundle: "com.example.limits", identifier: identifier)
    }

    @Test("maximumTracked: as many pairs as the limit are kept; one more forgets the oldest")
    func tracked() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        guard let mock = try await NotificationMock.start(on: bus) else { return }
        let presenter = Self.presenter(bus) { $0.maximumTracked = 2 }
        let runner = Task { await presenter.run() }
        #expect(await eventually { presenter.isOn })
        for identifier in ["a", "b"] {
            await presenter.present(Self.presented(identifier))
            #expect(await eventually { Self.id(presenter, identifier) != nil })
        }
        #expect(Self.id(presenter, "a") != nil && Self.id(presenter, "b") != nil)
        await presenter.present(Self.presented("c"))
        #expect(await eventually { Self.id(presenter, "c") != nil })
        #expect(Self.id(presenter, "a") == nil)
        #expect(Self.id(presenter, "b") != nil)
        runner.cancel()
        await runner.value
        await mock.stop()
    }

    @Test("maximumStateFileBytes: a saved ids file of exactly 4 MiB is read; one byte more is ignored (ids start empty)")
    func stateFileSize() throws {
        #expect(DesktopPresenterConfiguration().maximumStateFileBytes == 4 << 20)
        let path = "/tmp/tdb-ids-\(UUID().uuidString.prefix(8)).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let json = Array(#"{"server":":1.5","entries":[{"id":7,"bundle":"com.example.limits","identifier":"x","actions":{}}]}"#.utf8)
        func load(padding: Int) throws -> UInt32? {
            try Data(json + [UInt8](repeating: 0x20, count: padding)).write(to: URL(fileURLWithPath: path))
            return DesktopPresenter(configuration: DesktopPresenterConfiguration(environment: [:], stateFile: path), logger: Logger(label: "t"))
                .serverID(bundle: "com.example.limits", identifier: "x")
        }
        #expect(try load(padding: (4 << 20) - json.count) == 7)
        #expect(try load(padding: (4 << 20) - json.count + 1) == nil)
    }
}
