import Dispatch
import Foundation
import Synchronization
import TidingsCore
import TidingsIPC

/// The entry point of a notification service extension's executable: hands the process to
/// Tidings, which serves the daemon's requests with instances of `principalClass` — the
/// role `NSExtensionPrincipalClass` plays in an iOS extension's Info.plist.
///
///     @main
///     struct Main {
///         static func main() {
///             UNNotificationServiceExtensionMain(NotificationService.self)
///         }
///     }
///
/// The daemon speaks length-prefixed JSON frames on the process's standard input and
/// output (docs/service-extensions.md). Before serving, the entry point moves that channel
/// to private descriptors and points standard output at standard error, so `print` in
/// the extension goes to the log instead of corrupting the channel; standard input reads
/// from `/dev/null`.
///
/// Each request gets a new instance of `principalClass`; `didReceive(_:withContentHandler:)`
/// and `serviceExtensionTimeWillExpire()` run on the main thread (the main actor), the
/// content handler may be called from any thread, and only its first call counts. While a
/// request runs, `TMPDIR` (`FileManager.default.temporaryDirectory`) is that request's
/// staging directory, where attachment files go. The process exits when the daemon closes
/// the channel. Call it from the main thread (`main`, or top-level code).
public func UNNotificationServiceExtensionMain(_ principalClass: UNNotificationServiceExtension.Type) -> Never {
    precondition(Thread.isMainThread, "UNNotificationServiceExtensionMain must be called on the main thread")
    let channel: ServiceExtensionChannel
    do {
        channel = try ServiceExtensionChannel.takeStandardStreams()
    } catch {
        FileHandle.standardError.write(Data("UNNotificationServiceExtensionMain: \(error)\n".utf8))
        exit(70)
    }
    let host = MainActor.assumeIsolated {
        ServiceExtensionHost(principalClass: principalClass, channel: channel)
    }
    let reader = Thread {
        host.serve()
    }
    reader.name = "tidings.service-extension.reader"
    reader.start()
    // The main run loop drains the main queue on the main thread, as on iOS
    // (`dispatchMain()` on Linux would end the main thread and drain the queue elsewhere).
    // A far-off timer keeps the run loop from returning for want of sources.
    RunLoop.main.add(Timer(timeInterval: 86_400 * 365, repeats: true) { _ in }, forMode: .default)
    while true {
        RunLoop.main.run()
    }
}

/// The daemon channel of this process: where the entry point reads commands and writes
/// replies. `@_spi(Tidings)` so that test fixtures can misbehave on it.
@_spi(Tidings) public final class ServiceExtensionChannel: Sendable {
    let input: Int32
    let output: Int32
    private let writeLock = Mutex(())

    /// The channel of the running extension (nil before the entry point took it).
    public static var current: ServiceExtensionChannel? { installed.withLock { $0 } }
    private static let installed = Mutex<ServiceExtensionChannel?>(nil)

    init(input: Int32, output: Int32) {
        self.input = input
        self.output = output
    }

    /// Takes the daemon channel from standard input and output (see
    /// `UNNotificationServiceExtensionMain`); content extensions' entry point uses it too.
    public static func takeStandardStreams() throws(DescriptorFraming.Error) -> ServiceExtensionChannel {
        let input = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
        let output = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
        guard input >= 0, output >= 0 else {
            throw DescriptorFraming.Error("cannot take the daemon channel from standard input and output: \(String(cString: strerror(errno)))")
        }
        let null = open("/dev/null", O_RDONLY)
        if null >= 0 {
            dup2(null, STDIN_FILENO)
            close(null)
        }
        dup2(STDERR_FILENO, STDOUT_FILENO)
        let channel = ServiceExtensionChannel(input: input, output: output)
        installed.withLock { $0 = channel }
        return channel
    }

    func read() throws -> ServiceExtensionCommand? {
        guard let frame = try DescriptorFraming.read(from: input) else { return nil }
        return try JSONDecoder().decode(ServiceExtensionCommand.self, from: Data(frame))
    }

    func send(_ reply: ServiceExtensionReply) {
        do {
            let data = try JSONEncoder().encode(reply)
            try writeRaw(frame: Array(data))
        } catch {
            FileHandle.standardError.write(Data("service extension: cannot reply to the daemon: \(error)\n".utf8))
            exit(74)
        }
    }

    /// Reads one frame as a `T` (nil at the end of the channel).
    public func readValue<T: Decodable>(_ type: T.Type) throws -> T? {
        guard let frame = try DescriptorFraming.read(from: input) else { return nil }
        return try JSONDecoder().decode(type, from: Data(frame))
    }

    /// Writes one frame holding `value` as JSON.
    public func sendValue<T: Encodable>(_ value: T) throws {
        try writeRaw(frame: Array(try JSONEncoder().encode(value)))
    }

    /// Writes one frame of arbitrary bytes.
    public func writeRaw(frame bytes: [UInt8]) throws {
        try writeLock.withLock { _ in try DescriptorFraming.write(bytes, to: output) }
    }
}

/// Serves the daemon's commands: reads on a thread of its own, runs the principal class on
/// the main actor.
final class ServiceExtensionHost: Sendable {
    let channel: ServiceExtensionChannel
    private let requests: ServiceExtensionRequests

    @MainActor
    init(principalClass: UNNotificationServiceExtension.Type, channel: ServiceExtensionChannel) {
        self.channel = channel
        self.requests = ServiceExtensionRequests(principalClass: principalClass, channel: channel)
    }

    /// The reader loop; exits the process when the daemon closes the channel.
    func serve() {
        let requests = self.requests
        while true {
            let command: ServiceExtensionCommand?
            do {
                command = try channel.read()
            } catch {
                FileHandle.standardError.write(Data("service extension: unreadable command from the daemon: \(error)\n".utf8))
                exit(65)
            }
            guard let command else { exit(0) }
            switch command {
            case .modify(let id, let request, let staging):
                DispatchQueue.main.async {
                    MainActor.assumeIsolated { requests.begin(id: id, request: request, stagingDirectory: staging) }
                }
            case .timeWillExpire(let id):
                DispatchQueue.main.async {
                    MainActor.assumeIsolated { requests.expire(id: id) }
                }
            }
        }
    }
}

/// The requests in progress: one instance of the principal class each, kept until its
/// content handler is called.
@MainActor
final class ServiceExtensionRequests {
    private let principalClass: UNNotificationServiceExtension.Type
    private let channel: ServiceExtensionChannel
    private var instances: [UInt64: UNNotificationServiceExtension] = [:]

    init(principalClass: UNNotificationServiceExtension.Type, channel: ServiceExtensionChannel) {
        self.principalClass = principalClass
        self.channel = channel
    }

    func begin(id: UInt64, request: NotificationRequestValue, stagingDirectory: String) {
        setenv("TMPDIR", stagingDirectory, 1)
        let instance = principalClass.init()
        instances[id] = instance
        let handler = ContentHandlerOnce(id: id, channel: channel) {
            DispatchQueue.main.async {
                MainActor.assumeIsolated { _ = self.instances.removeValue(forKey: id) }
            }
        }
        instance.didReceive(UNNotificationRequest(value: request)) { content in
            handler.deliver(content)
        }
    }

    func expire(id: UInt64) {
        instances[id]?.serviceExtensionTimeWillExpire()
    }
}

/// The content handler given to `didReceive`: the first call replies, later calls are
/// ignored, as on iOS.
final class ContentHandlerOnce: Sendable {
    private let id: UInt64
    private let channel: ServiceExtensionChannel
    private let called = Mutex(false)
    private let done: @Sendable () -> Void

    init(id: UInt64, channel: ServiceExtensionChannel, done: @escaping @Sendable () -> Void) {
        self.id = id
        self.channel = channel
        self.done = done
    }

    func deliver(_ content: UNNotificationContent) {
        let first = called.withLock { called in
            defer { called = true }
            return !called
        }
        guard first else { return }
        do {
            channel.send(.content(id: id, content: try content.value()))
        } catch {
            channel.send(.invalidContent(id: id, reason: error.localizedDescription))
        }
        done()
    }
}
