import Foundation
import Logging
import Synchronization
import TidingsCore
import TidingsDBus
import TidingsEngine

/// Settings of the desktop presenter (docs/desktop.md).
public struct DesktopPresenterConfiguration: Sendable {
    /// Where the session bus is: `DBUS_SESSION_BUS_ADDRESS` / `XDG_RUNTIME_DIR` of this map.
    public var environment: [String: String]
    /// The file that keeps identifier ↔ server id across restarts; nil: memory only.
    public var stateFile: String?
    /// The bus connection's limits and timeouts (docs/security.md, "D-Bus client").
    public var connection = DBusConnectionConfiguration()
    /// Notifications on their way to the server at once; past it new ones are dropped (and logged).
    public var queueLimit = 4096
    /// Identifier ↔ id pairs kept; past it the oldest are forgotten (their bubbles stay, unlinked).
    public var maximumTracked = 1024
    /// The saved ids file is read at start only up to this size; a larger one is ignored (ids start empty).
    public var maximumStateFileBytes = 4 << 20
    /// What opens the web center's reply field in the person's browser (a text-input action on
    /// a server without `inline-reply`): a program name looked up in `environment`'s `PATH`,
    /// or a path; run with the URL as its one argument, never through a shell.
    public var opener = "xdg-open"
    /// Openers running at once; past it an action that would open one is logged and dropped.
    public var maximumOpeners = 4
    /// An opener still running after this long is killed (what it started, a browser, stays).
    public var openerTimeout: Duration = .seconds(30)

    public init(environment: [String: String] = ProcessInfo.processInfo.environment, stateFile: String? = nil) {
        self.environment = environment
        self.stateFile = stateFile
    }
}

/// Shows notifications through the desktop's notification server
/// (`org.freedesktop.Notifications` on the session bus) and brings the person's clicks,
/// replies and dismissals back to the engine, as `tidings notifications respond` does.
/// Without a bus or a server it stays off, says so once, and the daemon runs on.
public final class DesktopPresenter: Presenter {
    public static let serverName = "org.freedesktop.Notifications"
    static let objectPath = "/org/freedesktop/Notifications"

    enum Work: Sendable {
        case present(PresentedNotification)
        case withdraw(String, [String])
    }

    /// One bubble the server shows for us.
    struct Entry: Codable, Sendable, Hashable {
        var id: UInt32
        var bundle: String
        var identifier: String
        var actions: [String: String]
        var replyAction: String?
        /// Action key → a text-input action answered in the web center's reply field.
        var webReplies: [String: String]?
    }

    struct Persisted: Codable {
        var server: String?
        var entries: [Entry]
    }

    struct State {
        var engine: NotificationEngine?
        var connection: DBusConnection?
        /// The server's unique name, nil while there is none.
        var owner: String?
        var capabilities: Set<String> = []
        var entries: [UInt32: Entry] = [:]
        var ids: [String: UInt32] = [:]
        var announcedOff = false
        /// No session bus: `run` has returned for good, so nothing is queued any more (each
        /// notification would wake a task only to be dropped).
        var noBus = false
        var sent = 0
        /// The last `ActivationToken` (spec 1.2), for the action that follows it on the same id:
        /// one slot, so it holds one string at most.
        var activation: (id: UInt32, token: String)?
        /// The web center's address without its secret, while one runs.
        var webCenter: URL?
        /// Openers running now.
        var openers = 0
    }

    public let configuration: DesktopPresenterConfiguration
    private let logger: Logger
    private let state = Mutex(State())
    private let work: AsyncStream<Work>
    private let workInput: AsyncStream<Work>.Continuation
    /// Saves are requested here and written by one task, off the path to the server: many
    /// changes in a row make one write.
    private let saves: AsyncStream<Void>
    private let saveRequest: AsyncStream<Void>.Continuation
    /// Called after each Notify the server answered (the benchmark's and tests' hook).
    private let onNotify: (@Sendable (UInt32) -> Void)?

    public init(configuration: DesktopPresenterConfiguration, logger: Logger, onNotify: (@Sendable (UInt32) -> Void)? = nil) {
        self.configuration = configuration
        self.logger = logger
        self.onNotify = onNotify
        (work, workInput) = AsyncStream.makeStream(of: Work.self, bufferingPolicy: .bufferingOldest(max(1, configuration.queueLimit)))
        (saves, saveRequest) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        if let persisted = Self.load(configuration.stateFile, maximumBytes: configuration.maximumStateFileBytes) {
            state.withLock { state in
                state.owner = persisted.server
                for entry in persisted.entries {
                    state.entries[entry.id] = entry
                    state.ids[Self.key(entry.bundle, entry.identifier)] = entry.id
                }
            }
        }
    }

    /// The engine the person's responses go to; set once it exists.
    public func attach(_ engine: NotificationEngine) {
        state.withLock { $0.engine = engine }
    }

    /// The server's capabilities as last read (empty without a server).
    public var capabilities: Set<String> { state.withLock { $0.capabilities } }
    /// The server's id of a shown notification.
    public func serverID(bundle: String, identifier: String) -> UInt32? { state.withLock { $0.ids[Self.key(bundle, identifier)] } }
    /// The web center's address, once it listens (nil: none). Only scheme, host, port and path
    /// are kept: the secret that lets a browser in is never part of what the presenter opens.
    public func setWebCenter(_ url: URL?) {
        let base = url.flatMap { url -> URL? in
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.scheme == "http" || components.scheme == "https" else { return nil }
            components.query = nil
            components.fragment = nil
            components.user = nil
            components.password = nil
            if components.path.isEmpty { components.path = "/" }
            return components.url
        }
        state.withLock { $0.webCenter = base }
    }

    /// The web center's page with one notification's reply field open:
    /// `<center>#reply=<bundle>/<notification>/<action>`, each part percent-encoded (only
    /// unreserved characters stay), so a part never reads as another or as markup.
    public static func webReplyURL(center: URL, bundle: String, identifier: String, action: String) -> URL? {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let parts = [bundle, identifier, action].compactMap { $0.addingPercentEncoding(withAllowedCharacters: unreserved) }
        guard parts.count == 3 else { return nil }
        return URL(string: center.absoluteString + "#reply=" + parts.joined(separator: "/"))
    }

    /// Openers (of the web center's reply field) running now.
    public var openersRunning: Int { state.withLock { $0.openers } }

    /// Whether a server is there and the presenter is on.
    public var isOn: Bool { state.withLock { $0.connection != nil && $0.owner != nil } }

    static func key(_ bundle: String, _ identifier: String) -> String { bundle + "\n" + identifier }

    public func present(_ notification: PresentedNotification) async {
        enqueue(.present(notification))
    }

    public func withdraw(bundleIdentifier: String, identifiers: [String]) async {
        enqueue(.withdraw(bundleIdentifier, identifiers))
    }

    private func enqueue(_ item: Work) {
        if state.withLock({ $0.noBus }) { return }
        if case .dropped = workInput.yield(item) {
            logger.warning("desktop notifications: the queue is full; a notification is not shown on the desktop", metadata: ["limit": "\(configuration.queueLimit)"])
        }
    }

    /// Connects to the session bus and serves until cancelled. Without a bus it returns at
    /// once (after saying so); without a server it waits for one to appear.
    public func run() async {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.session(environment: configuration.environment, configuration: configuration.connection)
            try await connection.addMatch("type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.serverName)'")
            try await connection.addMatch("type='signal',interface='\(Self.serverName)',path='\(Self.objectPath)'")
        } catch {
            announceOff("no session bus (\(error))")
            state.withLock { $0.noBus = true }
            for await _ in work {} // drain what came before: the other presenters go on
            return
        }
        state.withLock { $0.connection = connection }
        await serverChanged(try? await connection.nameOwner(Self.serverName))
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in self.saves { self.save() }
                self.save()
            }
            group.addTask {
                for await item in self.work {
                    await self.perform(item, on: connection)
                }
            }
            group.addTask {
                for await signal in connection.signals {
                    await self.handle(signal)
                }
                self.logger.warning("desktop notifications: the session bus closed the connection; the desktop presenter is off")
                self.state.withLock { $0.connection = nil }
            }
            group.addTask {
                // Until cancelled (the daemon's shutdown): then the queues end and the bus closes.
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let cancelled = self.cancelWaiter.withLock { waiter -> Bool in
                            if waiter.cancelled { return true }
                            waiter.continuation = continuation
                            return false
                        }
                        if cancelled { continuation.resume() }
                    }
                } onCancel: {
                    self.workInput.finish()
                    self.saveRequest.finish()
                    let continuation = self.cancelWaiter.withLock { waiter in
                        waiter.cancelled = true
                        defer { waiter.continuation = nil }
                        return waiter.continuation
                    }
                    continuation?.resume()
                }
                await connection.close()
            }
        }
    }

    private let cancelWaiter = Mutex<(cancelled: Bool, continuation: CheckedContinuation<Void, Never>?)>((false, nil))

    private func announceOff(_ reason: String) {
        let first = state.withLock { state in
            defer { state.announcedOff = true }
            return !state.announcedOff
        }
        if first { logger.notice("desktop notifications are off: \(reason); the other presenters go on") }
    }

    /// A server appeared, went, or was replaced: read its capabilities again; ids of the old
    /// one mean nothing to the new one.
    private func serverChanged(_ owner: String?) async {
        guard let owner, !owner.isEmpty else {
            let had = state.withLock { state -> Bool in
                defer { state.owner = nil; state.capabilities = []; state.entries = [:]; state.ids = [:] }
                return state.owner != nil
            }
            persist()
            if had { logger.notice("desktop notifications: the notification server went away") } else { announceOff("no notification server on the session bus") }
            return
        }
        let connection = state.withLock { $0.connection }
        var capabilities: Set<String> = []
        if let reply = try? await connection?.call(.methodCall(destination: Self.serverName, path: Self.objectPath, interface: Self.serverName, member: "GetCapabilities")) {
            capabilities = Set(reply.body.first?.arrayValue?.compactMap(\.stringValue) ?? [])
        }
        state.withLock { state in
            if state.owner != owner {
                state.entries = [:]
                state.ids = [:]
            }
            state.owner = owner
            state.capabilities = capabilities
            state.announcedOff = false
        }
        persist()
        logger.info("desktop notifications on", metadata: ["server": "\(owner)", "capabilities": "\(capabilities.sorted().joined(separator: " "))"])
    }

    private func perform(_ item: Work, on connection: DBusConnection) async {
        switch item {
        case .present(let presented):
            let (owner, capabilities, previous, webCenter) = state.withLock {
                ($0.owner, $0.capabilities, $0.ids[Self.key(presented.bundleIdentifier, presented.notification.request.identifier)], $0.webCenter)
            }
            guard owner != nil else { return }
            let notification = DesktopNotification(presented, replacesID: previous ?? 0, capabilities: capabilities,
                                                   alertStyle: presented.settings?.alertStyle ?? .banner, soundDirectory: presented.appDirectory,
                                                   webReply: webCenter != nil)
            do {
                let reply = try await connection.call(.methodCall(destination: Self.serverName, path: Self.objectPath, interface: Self.serverName,
                                                                  member: "Notify", body: notification.arguments))
                guard let id = reply.body.first?.uint32Value else { return }
                let entry = Entry(id: id, bundle: presented.bundleIdentifier, identifier: presented.notification.request.identifier,
                                  actions: notification.actionIdentifiers, replyAction: notification.replyAction,
                                  webReplies: notification.webReplyActions.isEmpty ? nil : notification.webReplyActions)
                state.withLock { state in
                    if let previous, previous != id { state.entries[previous] = nil }
                    state.entries[id] = entry
                    state.ids[Self.key(entry.bundle, entry.identifier)] = id
                    while state.entries.count > configuration.maximumTracked, let oldest = state.entries.keys.min() {
                        if let gone = state.entries.removeValue(forKey: oldest) { state.ids[Self.key(gone.bundle, gone.identifier)] = nil }
                    }
                }
                persist()
                onNotify?(id)
            } catch {
                logger.warning("desktop notifications: Notify failed", metadata: ["app": "\(presented.bundleIdentifier)", "error": "\(error)"])
            }
        case .withdraw(let bundle, let identifiers):
            let ids = state.withLock { state in
                identifiers.compactMap { identifier -> UInt32? in
                    guard let id = state.ids.removeValue(forKey: Self.key(bundle, identifier)) else { return nil }
                    state.entries[id] = nil
                    return id
                }
            }
            guard !ids.isEmpty else { return }
            persist()
            for id in ids {
                // A bubble the server already closed answers with an error: nothing to do.
                _ = try? await connection.call(.methodCall(destination: Self.serverName, path: Self.objectPath, interface: Self.serverName,
                                                           member: "CloseNotification", body: [.uint32(id)]))
            }
        }
    }

    /// A signal from the bus or the server. Only the server's own signals count: another
    /// client on the bus could send `ActionInvoked` too.
    private func handle(_ signal: DBusMessage) async {
        if signal.interface == "org.freedesktop.DBus", signal.member == "NameOwnerChanged", signal.sender == "org.freedesktop.DBus" {
            let args = signal.body.compactMap(\.stringValue)
            guard args.count == 3, args[0] == Self.serverName else { return }
            await serverChanged(args[2])
            return
        }
        guard signal.interface == Self.serverName, signal.path == Self.objectPath else { return }
        let (owner, engine) = state.withLock { ($0.owner, $0.engine) }
        guard let owner, signal.sender == owner, let id = signal.body.first?.uint32Value else { return }
        let argument = signal.body.count > 1 ? signal.body[1] : nil
        switch signal.member {
        case "ActivationToken":
            guard let token = argument?.stringValue else { return }
            state.withLock { state in
                guard state.entries[id] != nil else { return }
                state.activation = (id, token)
            }
        case "ActionInvoked":
            guard let key = argument?.stringValue, let entry = state.withLock({ $0.entries[id] }) else { return }
            if key == DesktopNotification.inlineReplyKey { return }
            guard let action = entry.actions[key] else {
                if let reply = entry.webReplies?[key] {
                    openWebReply(entry, action: reply, activationToken: takeActivationToken(id))
                } else {
                    logger.info("desktop notifications: an action that needs a reply; answer with tidings notifications respond", metadata: ["key": "\(key)"])
                }
                return
            }
            await respond(engine, entry, action: action, text: nil, activationToken: takeActivationToken(id))
        case "NotificationReplied":
            guard let text = argument?.stringValue, let entry = state.withLock({ $0.entries[id] }), let action = entry.replyAction else { return }
            await respond(engine, entry, action: action, text: text, activationToken: takeActivationToken(id))
        case "NotificationClosed":
            guard let reason = argument?.uint32Value else { return }
            let entry = state.withLock { state -> Entry? in
                guard let entry = state.entries.removeValue(forKey: id) else { return nil }
                state.ids[Self.key(entry.bundle, entry.identifier)] = nil
                return entry
            }
            guard let entry else { return }
            persist()
            // 2: the person dismissed it. 1 (expired) and 3 (closed by us) leave it in the list.
            if reason == 2 { await respond(engine, entry, action: ActionIdentifier.dismiss, text: nil) }
        default:
            break
        }
    }

    /// Opens the web center's reply field for a text-input action with the opener (no shell),
    /// passing the server's activation token as `XDG_ACTIVATION_TOKEN` (never the daemon's own).
    /// At most `maximumOpeners` at once, each for at most `openerTimeout`.
    private func openWebReply(_ entry: Entry, action: String, activationToken: String?) {
        guard let center = state.withLock({ $0.webCenter }),
              let url = Self.webReplyURL(center: center, bundle: entry.bundle, identifier: entry.identifier, action: action) else {
            logger.info("desktop notifications: no web center to reply in; answer with tidings notifications respond", metadata: ["app": "\(entry.bundle)"])
            return
        }
        guard let executable = Self.executable(configuration.opener, path: configuration.environment["PATH"]) else {
            logger.warning("desktop notifications: cannot open the web center's reply field: no opener", metadata: ["opener": "\(configuration.opener)"])
            return
        }
        let admitted = state.withLock { state -> Bool in
            guard state.openers < configuration.maximumOpeners else { return false }
            state.openers += 1
            return true
        }
        guard admitted else {
            logger.warning("desktop notifications: too many openers running; the reply field is not opened", metadata: ["limit": "\(configuration.maximumOpeners)"])
            return
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [url.absoluteString]
        var environment = configuration.environment
        environment["XDG_ACTIVATION_TOKEN"] = activationToken
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        // The slot is given back when the opener exits (a process that did not start never will).
        process.terminationHandler = { _ in self.state.withLock { $0.openers -= 1 } }
        do {
            try process.run()
        } catch {
            state.withLock { $0.openers -= 1 }
            logger.warning("desktop notifications: the opener did not start", metadata: ["opener": "\(executable)", "error": "\(error)"])
            return
        }
        logger.info("desktop notifications: opened the web center's reply field", metadata: ["app": "\(entry.bundle)", "request": "\(entry.identifier)"])
        let timeout = configuration.openerTimeout
        Task {
            try? await Task.sleep(for: timeout)
            // SIGKILL: a child may inherit a blocked or ignored SIGTERM from the daemon. What the
            // opener started (a browser) is not its process and stays.
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
    }

    /// A program's path: as it is when it names a path, else the first executable of that
    /// name in `path` (a `PATH` list; `/usr/local/bin:/usr/bin:/bin` when there is none).
    static func executable(_ name: String, path: String?) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        guard !name.isEmpty else { return nil }
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where directory.hasPrefix("/") {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// The token the server sent just before an action on `id`, used once.
    private func takeActivationToken(_ id: UInt32) -> String? {
        state.withLock { state in
            defer { state.activation = nil }
            return state.activation?.id == id ? state.activation?.token : nil
        }
    }

    /// The person's answer, by the engine's path for `tidings notifications respond`; an app
    /// launched for it gets the server's activation token.
    private func respond(_ engine: NotificationEngine?, _ entry: Entry, action: String, text: String?, activationToken: String? = nil) async {
        guard let engine else { return }
        do {
            try await engine.respond(bundle: entry.bundle, identifier: entry.identifier, actionIdentifier: action, userText: text, activationToken: activationToken)
        } catch {
            logger.info("desktop notifications: a response was not taken", metadata: ["app": "\(entry.bundle)", "request": "\(entry.identifier)", "error": "\(error)"])
        }
    }

    private func persist() {
        saveRequest.yield()
    }

    private func save() {
        guard let path = configuration.stateFile else { return }
        let persisted = state.withLock { Persisted(server: $0.owner, entries: $0.entries.values.sorted { $0.id < $1.id }) }
        do {
            try JSONEncoder().encode(persisted).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            logger.warning("desktop notifications: cannot save the notification ids", metadata: ["file": "\(path)", "error": "\(error)"])
        }
    }

    static func load(_ path: String?, maximumBytes: Int) -> Persisted? {
        // The size first: a larger file is not read into memory at all.
        guard let path, let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size <= maximumBytes,
              let data = FileManager.default.contents(atPath: path), data.count <= maximumBytes else { return nil }
        return try? JSONDecoder().decode(Persisted.self, from: data)
    }
}
