import Foundation
import Logging
import TidingsCore
import TidingsEngine

/// How service extensions run. See docs/service-extensions.md.
public struct ServiceExtensionConfiguration: Sendable {
    /// Where each extension gets its container (`<root>/<extension bundle id>`), with a
    /// staging directory per request for attachment files. The daemon uses
    /// `<data dir>/extensions`.
    public var containerRoot: String
    /// Time for `didReceive(_:withContentHandler:)` to call the handler: iOS's 30 seconds.
    public var deadline: TimeInterval
    /// After `serviceExtensionTimeWillExpire()`, time to call the handler before the
    /// process is killed.
    public var grace: TimeInterval
    /// The address space an extension process may have (`RLIMIT_AS`); nil: no limit.
    /// iOS allows a service extension 24 MiB of resident memory, but `RLIMIT_AS` counts
    /// mapped address space, and a Swift process with Foundation maps far more than it
    /// touches: measured (docs/service-extensions.md), a no-op extension maps 158 MB
    /// (24 MB resident) and the image-download example 217 MB (39 MB resident) with
    /// `MALLOC_ARENA_MAX=2`, which the runner sets. 512 MiB leaves twice that.
    public var memoryLimit: Int?
    /// Keep a process per extension between requests (one at a time each).
    public var reuseProcesses: Bool
    /// Added to the daemon's environment for every extension process.
    public var environment: [String: String]

    public static let defaultDeadline: TimeInterval = 30
    public static let defaultGrace: TimeInterval = 2
    public static let defaultMemoryLimit = 512 * 1024 * 1024

    public init(containerRoot: String, deadline: TimeInterval = defaultDeadline, grace: TimeInterval = defaultGrace, memoryLimit: Int? = defaultMemoryLimit, reuseProcesses: Bool = true, environment: [String: String] = [:]) {
        self.containerRoot = containerRoot
        self.deadline = deadline
        self.grace = grace
        self.memoryLimit = memoryLimit
        self.reuseProcesses = reuseProcesses
        self.environment = environment
    }
}

/// Runs apps' notification service extensions in processes of their own: spawns the
/// extension's executable, serves one request at a time per process, keeps a process warm
/// for the next push when it answered in time, and enforces the deadline, the grace period
/// and the memory limit. Never fails: whatever goes wrong, the outcome carries the original
/// content and says why.
public actor ServiceExtensionRunner: ServiceExtensionRunning {
    public nonisolated let configuration: ServiceExtensionConfiguration
    private let clock: any WallClock
    private nonisolated let attachments: AttachmentStore
    private let logger: Logger
    private var idle: [String: ServiceExtensionProcess] = [:]
    private var nextRequestID: UInt64 = 1

    public init(configuration: ServiceExtensionConfiguration, clock: any WallClock, attachments: AttachmentStore, logger: Logger = Logger(label: "tidings.extensions")) {
        self.configuration = configuration
        self.clock = clock
        self.attachments = attachments
        self.logger = logger
    }

    public func modify(_ request: NotificationRequestValue, app: AppRecord, extension record: AppExtensionRecord) async -> ServiceExtensionOutcome {
        let id = nextRequestID
        nextRequestID += 1
        var metadata: Logger.Metadata = ["extension": "\(record.bundleIdentifier)", "request": "\(request.identifier)"]
        let container = containerPath(record)
        let staging = container + "/tmp/request-\(id)-\(UUID().uuidString.prefix(8).lowercased())"
        defer { try? FileManager.default.removeItem(atPath: staging) }
        do {
            try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            return failed(request, "cannot create the extension's container \(container): \(error.localizedDescription)", metadata)
        }
        let command = ServiceExtensionCommand.modify(id: id, request: request, stagingDirectory: staging)
        var process: ServiceExtensionProcess
        var sent: Bool
        do {
            let (checkedOut, warm) = try checkOut(record, app: app, container: container)
            process = checkedOut
            sent = (try? process.send(command)) != nil
            if !sent && warm {
                // The warm process died while idle, unnoticed so far: this push did not
                // reach it, so it goes to a fresh process.
                process.kill()
                process = try checkOut(record, app: app, container: container).process
                sent = (try? process.send(command)) != nil
            }
        } catch {
            return failed(request, "cannot start the extension \(record.executable): \(error)", metadata)
        }
        metadata["pid"] = "\(process.pid)"
        if !sent { process.post(.closed) }
        let result = await serve(id: id, on: process)
        switch result {
        case .deliver(let content, let note, let reuse):
            if reuse { checkIn(process) } else { process.kill() }
            let (stored, rejected) = await store(content.attachments, original: request.content, app: app, container: container)
            var delivered = content
            delivered.attachments = stored
            for reason in rejected {
                logger.warning("service extension attachment rejected", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
            }
            if let note {
                logger.warning("service extension: best attempt", metadata: metadata.merging(["reason": "\(note)"]) { $1 })
            } else {
                logger.debug("service extension modified the notification", metadata: metadata)
            }
            return ServiceExtensionOutcome(content: delivered, failure: note, rejectedAttachments: rejected, processIdentifier: process.pid)
        case .deliverOriginal(let failure):
            process.kill()
            var outcome = failed(request, failure, metadata)
            outcome.processIdentifier = process.pid
            return outcome
        case .wait, .sendTimeWillExpire:
            preconditionFailure("serve returns only a final action")
        }
    }

    /// Ends every warm process (their entry points see the channel close and exit).
    public func shutdown() {
        for process in idle.values { process.retire() }
        idle = [:]
    }

    /// The PID of the warm process kept for an extension, if any.
    public func warmProcess(for extensionIdentifier: String) -> Int32? {
        idle[extensionIdentifier].flatMap { $0.isAlive ? $0.pid : nil }
    }

    // MARK: - Processes

    private func containerPath(_ record: AppExtensionRecord) -> String {
        URL(fileURLWithPath: configuration.containerRoot).standardizedFileURL
            .appendingPathComponent(record.bundleIdentifier, isDirectory: true).path
    }

    /// The warm process of the extension if it is alive (`warm`), else a new one.
    private func checkOut(_ record: AppExtensionRecord, app: AppRecord, container: String) throws -> (process: ServiceExtensionProcess, warm: Bool) {
        if let warm = idle.removeValue(forKey: record.bundleIdentifier) {
            if warm.isAlive { return (warm, true) }
            warm.kill()
        }
        guard FileManager.default.isExecutableFile(atPath: record.executable) else {
            throw ServiceExtensionRunnerError("no executable file at \(record.executable)")
        }
        let environment = try ExtensionEnvironment.prepare(record: record, app: app, container: container, extra: configuration.environment)
        let process = try ServiceExtensionProcess.spawn(executable: record.executable, extensionIdentifier: record.bundleIdentifier, environment: environment,
                                                 directory: app.directory, memoryLimit: configuration.memoryLimit)
        logger.info("started service extension", metadata: ["extension": "\(record.bundleIdentifier)", "pid": "\(process.pid)"])
        return (process, false)
    }

    private func checkIn(_ process: ServiceExtensionProcess) {
        guard configuration.reuseProcesses, process.isAlive, idle[process.extensionIdentifier] == nil else {
            process.retire()
            return
        }
        idle[process.extensionIdentifier] = process
    }

    /// Runs one request, already sent, on a process to its end: the reply, or the deadline,
    /// the grace, and the kill. Returns `.deliver` or `.deliverOriginal`.
    private nonisolated func serve(id: UInt64, on process: ServiceExtensionProcess) async -> ServiceExtensionRequestStateMachine.Action {
        let clock = self.clock
        let memoryLimit = configuration.memoryLimit
        var machine = ServiceExtensionRequestStateMachine(deadline: configuration.deadline, grace: configuration.grace)
        return await withTaskGroup(of: Void.self) { group in
            defer { group.cancelAll() }
            let deadline = clock.now.addingTimeInterval(machine.deadline)
            group.addTask {
                guard (try? await clock.sleep(until: deadline)) != nil else { return }
                process.post(.timer(id: id, .deadlinePassed))
            }
            while true {
                let event: ServiceExtensionRequestStateMachine.Event
                switch await process.next() {
                case .reply(.content(let replyID, let content)) where replyID == id:
                    event = .content(content)
                case .reply(.invalidContent(let replyID, let reason)) where replyID == id:
                    event = .invalidContent(reason)
                case .reply:
                    continue
                case .timer(let timerID, let timerEvent) where timerID == id:
                    event = timerEvent
                case .timer:
                    continue
                case .garbage(let what):
                    event = .garbage(what)
                case .closed:
                    process.kill()
                    var how = await process.exitDescription()
                    if let memoryLimit, how.contains("signal") {
                        how += ": a crash, or memory over the limit of \(memoryLimit / (1024 * 1024)) MiB"
                    }
                    event = .closed(how)
                }
                let action = machine.handle(event)
                switch action {
                case .wait:
                    continue
                case .sendTimeWillExpire:
                    try? process.send(.timeWillExpire(id: id))
                    let graceEnd = clock.now.addingTimeInterval(machine.grace)
                    group.addTask {
                        guard (try? await clock.sleep(until: graceEnd)) != nil else { return }
                        process.post(.timer(id: id, .graceOver))
                    }
                case .deliver, .deliverOriginal:
                    return action
                }
            }
        }
    }

    private func failed(_ request: NotificationRequestValue, _ failure: String, _ metadata: Logger.Metadata) -> ServiceExtensionOutcome {
        logger.error("service extension failed; delivering the original content", metadata: metadata.merging(["reason": "\(failure)"]) { $1 })
        return ServiceExtensionOutcome(content: request.content, failure: failure)
    }

    // MARK: - Attachments

    /// Moves the extension's attachment files into the app's attachment store with the
    /// same validation as `add` (`AttachmentStore.ingest`), one at a time: a file that fails
    /// is left out and reported, the others are delivered. A file must lie in the
    /// extension's container (moved) or in the app's directory (copied); an attachment of
    /// the original content that is already in the store passes unchanged. Only this
    /// extension's container is allowed inside the data directory (not another extension's),
    /// and the files are read off the actor (`ingestOffActor`): a slow file system stalls
    /// this push, not the runner.
    private nonisolated func store(_ files: [AttachmentValue], original: NotificationContentValue, app: AppRecord, container: String) async -> (stored: [AttachmentValue], rejected: [String]) {
        let attachments = self.attachments.allowing([container])
        var stored: [AttachmentValue] = []
        var rejected: [String] = []
        // Each root as named and with its symbolic links resolved: the data directory may
        // itself lie behind a link. A file must lie in one root both ways, so a link inside
        // the container cannot lead to the app's directory or anywhere else.
        func folder(_ path: String) -> String { path.hasSuffix("/") ? path : path + "/" }
        let allowed = [container, app.directory].map { root -> (named: String, resolved: String) in
            let named = URL(fileURLWithPath: root).standardizedFileURL
            return (folder(named.path), folder(named.resolvingSymlinksInPath().path))
        }
        for file in files {
            if original.attachments.contains(file), attachments.contains(file.path, bundleIdentifier: app.bundleIdentifier) {
                stored.append(file)
                continue
            }
            let path = URL(fileURLWithPath: file.path).standardizedFileURL.path
            let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
            guard file.path.hasPrefix("/"), allowed.contains(where: { path.hasPrefix($0.named) && resolved.hasPrefix($0.resolved) }) else {
                rejected.append("\(file.identifier): \(file.path) is not a file in the extension's container or the app's directory")
                continue
            }
            do {
                stored += try await attachments.ingestOffActor([file], bundleIdentifier: app.bundleIdentifier, appDirectory: app.directory)
            } catch {
                rejected.append("\(file.identifier): \(error)")
            }
        }
        return (stored, rejected)
    }
}

struct ServiceExtensionRunnerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
