import Foundation
import Synchronization
import TidingsCore
import TidingsIPC

/// What an extension process's reader, its timers and its exit report to the request
/// being served (a service extension) or to its host (a content extension).
enum ExtensionProcessEvent<Reply: Sendable>: Sendable {
    case reply(Reply)
    case garbage(String)
    case closed
    /// A deadline or grace timer of request `id` went off.
    case timer(id: UInt64, ServiceExtensionRequestStateMachine.Event)
}

/// A service extension's process.
typealias ServiceExtensionProcess = ExtensionProcess<ServiceExtensionCommand, ServiceExtensionReply>

/// One running extension executable: its channel (a socket pair on the child's standard
/// input and output), a reader thread that turns frames of at most `maximumFrameLength`
/// bytes into replies, and its exit. Service and content extensions differ only in their
/// messages.
final class ExtensionProcess<Command: Encodable & Sendable, Reply: Decodable & Sendable>: Sendable {
    let pid: Int32
    let extensionIdentifier: String
    private let descriptor: Mutex<Int32>
    private let mailbox = Mailbox<Reply>()
    private let exit = Mutex<ExitState>(ExitState())

    private struct ExitState {
        var description: String?
        var waiters: [CheckedContinuation<String, Never>] = []
    }

    private init(pid: Int32, descriptor: Int32, extensionIdentifier: String) {
        self.pid = pid
        self.descriptor = Mutex(descriptor)
        self.extensionIdentifier = extensionIdentifier
    }

    /// Starts `executable` with the channel on its standard input and output. With a
    /// memory limit, `/bin/sh` sets `RLIMIT_AS` (`ulimit -v`) and then execs the executable,
    /// so the limit holds from the first instruction.
    static func spawn(executable: String, extensionIdentifier: String, environment: [String: String], directory: String, memoryLimit: Int?,
                      maximumFrameLength: Int = IPCCodec.maximumFrameLength) throws -> ExtensionProcess {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw DescriptorFraming.Error("socketpair failed: \(String(cString: strerror(errno)))")
        }
        let (parentEnd, childEnd) = (pair[0], pair[1])
        let process = Process()
        if let memoryLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "ulimit -v \(max(memoryLimit / 1024, 1)) && exec \"$0\"", executable]
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = []
        }
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.environment = environment
        let childHandle = FileHandle(fileDescriptor: childEnd, closeOnDealloc: false)
        process.standardInput = childHandle
        process.standardOutput = childHandle
        let box = ExitBox()
        process.terminationHandler = { process in
            let how: String = switch process.terminationReason {
            case .exit: "exited with status \(process.terminationStatus)"
            case .uncaughtSignal: "terminated by signal \(process.terminationStatus) (\(String(cString: strsignal(process.terminationStatus))))"
            @unknown default: "ended with status \(process.terminationStatus)"
            }
            box.report(how)
        }
        do {
            try process.run()
        } catch {
            close(parentEnd)
            close(childEnd)
            throw error
        }
        close(childEnd)
        let child = ExtensionProcess(pid: process.processIdentifier, descriptor: parentEnd, extensionIdentifier: extensionIdentifier)
        box.attach { child.exited($0) }
        let reader = Thread { child.readLoop(parentEnd, maximumFrameLength: maximumFrameLength) }
        reader.name = "tidings.extension.\(child.pid)"
        reader.start()
        return child
    }

    /// Whether the channel is still open, nothing went wrong on it, and the process has not
    /// exited: whether it may serve a request.
    var isAlive: Bool {
        !mailbox.hasFailed && exit.withLock { $0.description == nil }
    }

    func send(_ command: Command) throws {
        let data = try JSONEncoder().encode(command)
        try descriptor.withLock { fd in
            guard fd >= 0 else { throw DescriptorFraming.Error("the channel is closed") }
            try DescriptorFraming.write(Array(data), to: fd)
        }
    }

    func next() async -> ExtensionProcessEvent<Reply> {
        await mailbox.next()
    }

    func post(_ event: ExtensionProcessEvent<Reply>) {
        mailbox.post(event)
    }

    /// Kills the process (`SIGKILL`) unless it has exited, and closes the channel.
    func kill() {
        exit.withLock { state in
            if state.description == nil { _ = Foundation.kill(pid, SIGKILL) }
        }
        descriptor.withLock { fd in
            if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Closes the channel: the entry point sees the end of its input and exits.
    func retire() {
        descriptor.withLock { fd in
            if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// How the process ended; waits for it.
    func exitDescription() async -> String {
        await withCheckedContinuation { continuation in
            let done = exit.withLock { state -> String? in
                if let description = state.description { return description }
                state.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    fileprivate func exited(_ description: String) {
        let waiters = exit.withLock { state in
            state.description = description
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: description) }
    }

    private func readLoop(_ fd: Int32, maximumFrameLength: Int) {
        let decoder = JSONDecoder()
        while true {
            do {
                guard let frame = try DescriptorFraming.read(from: fd, maximumLength: maximumFrameLength) else { break }
                do {
                    mailbox.post(.reply(try decoder.decode(Reply.self, from: Data(frame))))
                } catch {
                    mailbox.post(.garbage("a frame of \(frame.count) bytes that is no reply: \(String(decoding: frame.prefix(80), as: UTF8.self).debugDescription)"))
                    break
                }
            } catch {
                // A reset connection is the process's end (`.closed` follows); anything
                // else is bytes that are no frame.
                if !error.isIOError { mailbox.post(.garbage(error.description)) }
                break
            }
        }
        descriptor.withLock { descriptor in
            close(descriptor)
            descriptor = -1
        }
        mailbox.close()
    }
}

/// Connects the termination handler (set before the process runs) to the process object
/// (made after): an exit that comes first is kept until the object attaches.
private final class ExitBox: Sendable {
    private let state = Mutex<(exited: (@Sendable (String) -> Void)?, early: String?)>((nil, nil))

    func attach(_ exited: @escaping @Sendable (String) -> Void) {
        let early = state.withLock { state -> String? in
            state.exited = exited
            return state.early
        }
        if let early { exited(early) }
    }

    func report(_ description: String) {
        let exited = state.withLock { state -> (@Sendable (String) -> Void)? in
            if state.exited == nil { state.early = description }
            return state.exited
        }
        exited?(description)
    }
}

/// Events in arrival order with one waiting consumer (requests to a process are sequential).
private final class Mailbox<Reply: Sendable>: Sendable {
    private struct State {
        var events: [ExtensionProcessEvent<Reply>] = []
        var waiter: CheckedContinuation<ExtensionProcessEvent<Reply>, Never>?
        var closed = false
    }
    private let state = Mutex(State())

    /// The channel closed, or garbage or its end is waiting to be read.
    var hasFailed: Bool {
        state.withLock { state in
            state.closed || state.events.contains { event in
                switch event {
                case .garbage, .closed: true
                case .reply, .timer: false
                }
            }
        }
    }

    func post(_ event: ExtensionProcessEvent<Reply>) {
        let waiter = state.withLock { state -> CheckedContinuation<ExtensionProcessEvent<Reply>, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.events.append(event)
            return nil
        }
        waiter?.resume(returning: event)
    }

    func close() {
        state.withLock { $0.closed = true }
        post(.closed)
    }

    func next() async -> ExtensionProcessEvent<Reply> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> ExtensionProcessEvent<Reply>? in
                if !state.events.isEmpty { return state.events.removeFirst() }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// What every extension process starts with, service or content.
enum ExtensionEnvironment {
    /// The daemon's environment, `extra`, and the extension's own variables
    /// (docs/service-extensions.md); creates the container's `Caches`.
    static func prepare(record: AppExtensionRecord, app: AppRecord, container: String, extra: [String: String]) throws -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        // A crash report takes seconds that the push would wait for; set SWIFT_BACKTRACE
        // (in the daemon's environment or the configuration's) to get them.
        if environment["SWIFT_BACKTRACE"] == nil { environment["SWIFT_BACKTRACE"] = "enable=no" }
        // glibc reserves 64 MiB of address space per malloc arena (up to 8 per core): two
        // keep the address space near what is used, so the memory limit means memory.
        if environment["MALLOC_ARENA_MAX"] == nil { environment["MALLOC_ARENA_MAX"] = "2" }
        for (key, value) in extra { environment[key] = value }
        environment[ServiceExtensionEnvironment.extensionBundleIdentifier] = record.bundleIdentifier
        environment[ServiceExtensionEnvironment.appBundleIdentifier] = app.bundleIdentifier
        environment[ServiceExtensionEnvironment.appDirectory] = app.directory
        environment[ServiceExtensionEnvironment.container] = container
        environment["TMPDIR"] = container + "/tmp"
        environment["XDG_CACHE_HOME"] = container + "/Caches"
        do {
            try FileManager.default.createDirectory(atPath: container + "/Caches", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ServiceExtensionRunnerError("cannot create the extension's container \(container): \(error.localizedDescription)")
        }
        return environment
    }
}
