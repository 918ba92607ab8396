#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOPosix
import Synchronization

/// How a connection to the bus behaves and what it accepts (docs/security.md, "D-Bus client").
public struct DBusConnectionConfiguration: Sendable {
    /// What one message from the bus may hold.
    public var limits = DBusLimits()
    /// A method call without a reply in this time fails with `DBusError.timeout`.
    public var callTimeout: TimeAmount = .seconds(25)
    /// The SASL handshake and `Hello` together.
    public var connectTimeout: TimeAmount = .seconds(5)
    /// Calls waiting for their replies at once; one more fails at once.
    public var maximumPendingCalls = 1024
    /// Signals received but not yet read; past it the oldest are dropped.
    public var signalBuffer = 4096

    public init() {}
}

/// Why a call or a connection failed.
public struct DBusError: Error, Sendable, CustomStringConvertible {
    private enum Kind: Sendable {
        case remote(name: String, message: String?)
        case disconnected
        case timeout
        case tooManyPendingCalls
        case connect(String)
        case format(DBusFormatError)
    }

    private let kind: Kind

    /// The bus or the peer answered with an error.
    public static func remote(name: String, message: String?) -> DBusError { DBusError(kind: .remote(name: name, message: message)) }
    public static let disconnected = DBusError(kind: .disconnected)
    public static let timeout = DBusError(kind: .timeout)
    public static let tooManyPendingCalls = DBusError(kind: .tooManyPendingCalls)
    public static func connect(_ reason: String) -> DBusError { DBusError(kind: .connect(reason)) }
    public static func format(_ error: DBusFormatError) -> DBusError { DBusError(kind: .format(error)) }

    /// The D-Bus error name of a remote error (`org.freedesktop.DBus.Error.NameHasNoOwner`…).
    public var name: String? {
        if case .remote(let name, _) = kind { name } else { nil }
    }

    public var isDisconnected: Bool {
        if case .disconnected = kind { true } else { false }
    }

    public var description: String {
        switch kind {
        case .remote(let name, let message): "\(name)" + (message.map { ": \($0)" } ?? "")
        case .disconnected: "the bus connection is closed"
        case .timeout: "no reply in time"
        case .tooManyPendingCalls: "too many calls waiting for replies"
        case .connect(let reason): "cannot connect to the bus: \(reason)"
        case .format(let error): "a malformed message from the bus: \(error)"
        }
    }
}

/// A client connection to a message bus over a Unix socket, on SwiftNIO: SASL EXTERNAL,
/// `Hello`, method calls matched to their replies by serial, signals as a stream, and a reply
/// of `UnknownMethod` to any method call addressed to it (`Peer.Ping` is answered).
public final class DBusConnection: Sendable {
    private let channel: any Channel
    private let router: DBusRouter
    /// The name the bus gave this connection (`:1.42`).
    public let uniqueName: String
    /// Signals delivered to this connection (broadcast ones need a match rule: `addMatch`).
    /// One reader; it ends when the connection closes.
    public let signals: AsyncStream<DBusMessage>
    public let configuration: DBusConnectionConfiguration

    private init(channel: any Channel, router: DBusRouter, uniqueName: String, signals: AsyncStream<DBusMessage>, configuration: DBusConnectionConfiguration) {
        self.channel = channel
        self.router = router
        self.uniqueName = uniqueName
        self.signals = signals
        self.configuration = configuration
    }

    /// Connects to the session bus of `environment` (see `DBusAddress.session`).
    public static func session(environment: [String: String], configuration: DBusConnectionConfiguration = DBusConnectionConfiguration(),
                               group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> DBusConnection {
        let addresses: [DBusAddress]?
        do {
            addresses = try DBusAddress.session(environment: environment)
        } catch {
            throw DBusError.connect("\(error)")
        }
        guard let addresses else { throw DBusError.connect("no session bus (DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are unset)") }
        return try await connect(to: addresses, configuration: configuration, group: group)
    }

    /// Connects to the first of `addresses` that accepts, authenticates and says `Hello`.
    public static func connect(to addresses: [DBusAddress], configuration: DBusConnectionConfiguration = DBusConnectionConfiguration(),
                               group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> DBusConnection {
        var failures: [String] = []
        for address in addresses {
            do {
                return try await connect(to: address, configuration: configuration, group: group)
            } catch {
                failures.append("\(address): \(error)")
            }
        }
        throw DBusError.connect(failures.joined(separator: "; "))
    }

    static func connect(to address: DBusAddress, configuration: DBusConnectionConfiguration, group: any EventLoopGroup) async throws -> DBusConnection {
        let descriptor = try openSocket(address)
        let (signals, continuation) = AsyncStream.makeStream(of: DBusMessage.self, bufferingPolicy: .bufferingNewest(max(1, configuration.signalBuffer)))
        let router = DBusRouter(signals: continuation, maximumPendingCalls: configuration.maximumPendingCalls)
        let eventLoop = group.next()
        let authenticated = eventLoop.makePromise(of: String.self)
        let limits = configuration.limits
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(DBusChannelHandler(router: router, limits: limits, authenticated: authenticated))
                    }
                }
                .withConnectedSocket(descriptor).get()
        } catch {
            closeDescriptor(descriptor)
            throw DBusError.connect("\(error)")
        }
        let timeout = eventLoop.scheduleTask(in: configuration.connectTimeout) {
            authenticated.fail(DBusError.timeout)
        }
        do {
            try await channel.writeAndFlush(ByteBuffer(bytes: DBusAuthentication.initialBytes(uid: UInt32(getuid())))).get()
            _ = try await authenticated.futureResult.get()
            timeout.cancel()
            let connection = DBusConnection(channel: channel, router: router, uniqueName: "", signals: signals, configuration: configuration)
            let hello = try await connection.call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                              interface: "org.freedesktop.DBus", member: "Hello"), timeout: configuration.connectTimeout)
            guard let name = hello.body.first?.stringValue else { throw DBusError.connect("Hello returned no name") }
            return DBusConnection(channel: channel, router: router, uniqueName: name, signals: signals, configuration: configuration)
        } catch {
            timeout.cancel()
            try? await channel.close()
            throw error
        }
    }

    private static func openSocket(_ address: DBusAddress) throws -> CInt {
        #if os(Linux)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw DBusError.connect("socket: errno \(errno)") }
        var storage = sockaddr_un()
        storage.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: storage.sun_path)
        let nameBytes: [UInt8]
        switch address.socket {
        case .path(let path): nameBytes = Array(path.utf8) + [0]
        case .abstract(let name): nameBytes = [0] + Array(name.utf8)
        }
        guard nameBytes.count <= capacity else {
            closeDescriptor(fd)
            throw DBusError.connect("the socket name of \(address) is longer than \(capacity) bytes")
        }
        withUnsafeMutableBytes(of: &storage.sun_path) { raw in
            for (i, b) in nameBytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + nameBytes.count)
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connectDescriptor(fd, $0, length) }
        }
        guard result == 0 else {
            let code = errno
            closeDescriptor(fd)
            throw DBusError.connect("connect to \(address): \(String(cString: strerror(code)))")
        }
        return fd
    }

    /// Sends a method call and waits for its return; an error reply throws `DBusError.remote`.
    @discardableResult
    public func call(_ message: DBusMessage, timeout: TimeAmount? = nil) async throws -> DBusMessage {
        let router = router
        let channel = channel
        let timeout = timeout ?? configuration.callTimeout
        return try await withCheckedThrowingContinuation { continuation in
            guard let serial = router.register(continuation) else { return }
            var message = message
            message.serial = serial
            message.flags.remove(.noReplyExpected)
            channel.writeAndFlush(ByteBuffer(bytes: message.encoded())).whenFailure { _ in
                router.resolve(serial, with: .failure(DBusError.disconnected))
            }
            let timer = channel.eventLoop.scheduleTask(in: timeout) {
                router.resolve(serial, with: .failure(DBusError.timeout))
            }
            // Cancelled when the reply comes (or at once, if it already came): a timer per
            // call would otherwise outlive its call by the whole timeout.
            router.setTimer(timer, for: serial)
        }
    }

    /// Sends a message that expects no reply (a signal, or a call flagged so).
    public func send(_ message: DBusMessage) async throws {
        var message = message
        message.serial = router.nextSerial()
        try await channel.writeAndFlush(ByteBuffer(bytes: message.encoded())).get()
    }

    /// Calls a method of the bus itself (`org.freedesktop.DBus`).
    @discardableResult
    public func callBus(_ member: String, _ body: [DBusValue] = []) async throws -> DBusMessage {
        try await call(.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: member, body: body))
    }

    /// Asks the bus to route the signals a match rule describes to this connection.
    public func addMatch(_ rule: String) async throws {
        try await callBus("AddMatch", [.string(rule)])
    }

    /// The unique name that owns `name` now, nil when none does.
    public func nameOwner(_ name: String) async throws -> String? {
        do {
            return try await callBus("GetNameOwner", [.string(name)]).body.first?.stringValue
        } catch let error as DBusError where error.name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
            return nil
        }
    }

    /// Whether the connection is still open.
    public var isOpen: Bool { router.isOpen }

    /// Calls waiting for their replies now (at most `maximumPendingCalls`).
    public var pendingCalls: Int { router.pendingCount }

    /// Closes the connection: waiting calls fail with `DBusError.disconnected`, `signals` ends.
    public func close() async {
        try? await channel.close()
        router.close(DBusError.disconnected)
    }
}

private func closeDescriptor(_ fd: CInt) {
    _ = close(fd)
}

private func connectDescriptor(_ fd: CInt, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> CInt {
    connect(fd, address, length)
}

/// What the channel handler and the connection share: serials, the calls waiting for their
/// replies, and the signals' stream.
final class DBusRouter: Sendable {
    private struct State {
        var nextSerial: UInt32 = 1
        var pending: [UInt32: CheckedContinuation<DBusMessage, any Error>] = [:]
        var timers: [UInt32: Scheduled<Void>] = [:]
        var closed: (any Error)?
    }

    private let state = Mutex(State())
    private let signals: AsyncStream<DBusMessage>.Continuation
    private let maximumPendingCalls: Int

    init(signals: AsyncStream<DBusMessage>.Continuation, maximumPendingCalls: Int) {
        self.signals = signals
        self.maximumPendingCalls = max(1, maximumPendingCalls)
    }

    var isOpen: Bool { state.withLock { $0.closed == nil } }

    var pendingCount: Int { state.withLock { $0.pending.count } }

    func nextSerial() -> UInt32 {
        state.withLock { state in
            let serial = state.nextSerial
            state.nextSerial = state.nextSerial == UInt32.max ? 1 : state.nextSerial + 1
            return serial
        }
    }

    /// A serial for a call whose reply resumes `continuation`; nil (and the continuation
    /// resumed with the error) when the connection is closed or too many calls wait.
    func register(_ continuation: CheckedContinuation<DBusMessage, any Error>) -> UInt32? {
        let outcome: Result<UInt32, any Error> = state.withLock { state in
            if let error = state.closed { return .failure(error) }
            guard state.pending.count < maximumPendingCalls else { return .failure(DBusError.tooManyPendingCalls) }
            var serial = state.nextSerial
            while state.pending[serial] != nil { serial = serial == UInt32.max ? 1 : serial + 1 }
            state.nextSerial = serial == UInt32.max ? 1 : serial + 1
            state.pending[serial] = continuation
            return .success(serial)
        }
        switch outcome {
        case .success(let serial): return serial
        case .failure(let error):
            continuation.resume(throwing: error)
            return nil
        }
    }

    func resolve(_ serial: UInt32, with result: Result<DBusMessage, any Error>) {
        let (continuation, timer) = state.withLock { ($0.pending.removeValue(forKey: serial), $0.timers.removeValue(forKey: serial)) }
        timer?.cancel()
        continuation?.resume(with: result)
    }

    /// The timeout of a waiting call, cancelled when the call is resolved; at once when it
    /// already was.
    func setTimer(_ timer: Scheduled<Void>, for serial: UInt32) {
        let waiting = state.withLock { state -> Bool in
            guard state.pending[serial] != nil else { return false }
            state.timers[serial] = timer
            return true
        }
        if !waiting { timer.cancel() }
    }

    /// A message from the bus: a reply resumes its call (a reply to nothing is dropped), a
    /// signal goes to the stream.
    func receive(_ message: DBusMessage) {
        switch message.kind {
        case .methodReturn:
            if let serial = message.replySerial { resolve(serial, with: .success(message)) }
        case .error:
            if let serial = message.replySerial {
                resolve(serial, with: .failure(DBusError.remote(name: message.errorName ?? "", message: message.errorText)))
            }
        case .signal:
            signals.yield(message)
        default:
            break
        }
    }

    func close(_ error: any Error) {
        let (waiting, timers) = state.withLock { state -> ([CheckedContinuation<DBusMessage, any Error>], [Scheduled<Void>]) in
            if state.closed == nil { state.closed = error }
            defer { state.pending.removeAll(); state.timers.removeAll() }
            return (Array(state.pending.values), Array(state.timers.values))
        }
        for timer in timers { timer.cancel() }
        for continuation in waiting { continuation.resume(throwing: error) }
        signals.finish()
    }
}

/// Bytes to messages on the event loop: the SASL lines first, then messages framed by their
/// headers under `DBusLimits` (a malformed or oversized one closes the connection).
final class DBusChannelHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let router: DBusRouter
    private let limits: DBusLimits
    private let authenticated: EventLoopPromise<String>
    private var authentication: DBusAuthentication? = DBusAuthentication()
    private var buffer = ByteBuffer()

    init(router: DBusRouter, limits: DBusLimits, authenticated: EventLoopPromise<String>) {
        self.router = router
        self.limits = limits
        self.authenticated = authenticated
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        if var auth = authentication {
            let (action, consumed) = buffer.withUnsafeReadableBytes { auth.receive($0) }
            buffer.moveReaderIndex(forwardBy: consumed)
            authentication = auth
            switch action {
            case .wait:
                return
            case .fail(let reason):
                authenticated.fail(DBusError.connect(reason))
                context.close(promise: nil)
                return
            case .begin(let send, let guid):
                authentication = nil
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: send)), promise: nil)
                authenticated.succeed(guid)
            }
        }
        do {
            while let header = try buffer.withUnsafeReadableBytes({ bytes throws(DBusFormatError) in try DBusMessage.FixedHeader(bytes, limits: limits) }),
                  buffer.readableBytes >= header.length {
                let message = try buffer.withUnsafeReadableBytes { bytes throws(DBusFormatError) in
                    try DBusMessage(decoding: UnsafeRawBufferPointer(rebasing: bytes[0 ..< header.length]), header: header, limits: limits)
                }
                buffer.moveReaderIndex(forwardBy: header.length)
                if message.kind == .methodCall { answer(message, context: context) } else { router.receive(message) }
            }
            buffer.discardReadBytes()
        } catch {
            router.close(DBusError.format(error))
            context.close(promise: nil)
        }
    }

    /// Nothing is served here: `Peer.Ping` gets its empty return, any other call `UnknownMethod`.
    private func answer(_ call: DBusMessage, context: ChannelHandlerContext) {
        guard !call.flags.contains(.noReplyExpected) else { return }
        var reply: DBusMessage
        if call.interface == "org.freedesktop.DBus.Peer", call.member == "Ping" {
            reply = DBusMessage(kind: .methodReturn, replySerial: call.serial, destination: call.sender)
        } else {
            reply = DBusMessage(kind: .error, errorName: "org.freedesktop.DBus.Error.UnknownMethod", replySerial: call.serial, destination: call.sender,
                                body: [.string("no method \(call.member ?? "") here")])
        }
        reply.flags = .noReplyExpected
        reply.serial = router.nextSerial()
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply.encoded())), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        authenticated.fail(DBusError.disconnected)
        router.close(DBusError.disconnected)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        router.close(error)
        context.close(promise: nil)
    }
}
