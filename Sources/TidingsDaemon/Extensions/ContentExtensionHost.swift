import Foundation
import Logging
import TidingsCore
import TidingsEngine

/// How content extensions run and what they may send. See docs/content-extensions.md and
/// docs/security.md ("Content extensions").
public struct ContentExtensionConfiguration: Sendable {
    /// Where each extension gets its container (`<root>/<extension bundle id>`): the
    /// service extensions' root, `<data dir>/extensions`.
    public var containerRoot: String
    /// Time for each request (open, another notification, an action, media) to be
    /// answered, a cold start included. Past it the process is killed and the default
    /// content shown.
    public var deadline: TimeInterval
    /// The address space of an extension process (`RLIMIT_AS`); nil: no limit.
    public var memoryLimit: Int?
    /// Keep an extension's process when its last view closes, for the next open.
    public var keepWarm: Bool
    /// Added to the daemon's environment for every extension process.
    public var environment: [String: String]
    /// The largest frame an extension may send.
    public var maximumMessageBytes: Int
    /// The largest `view.html` (UTF-8 bytes).
    public var maximumHTMLBytes: Int
    /// The largest `title` (UTF-8 bytes).
    public var maximumTitleBytes: Int
    /// The most actions a view may carry (`extensionContext.notificationActions`).
    public var maximumActions: Int
    /// The longest identifier, title or text-input label of such an action (UTF-8 bytes).
    public var maximumActionTextBytes: Int
    /// Events a view keeps for the center before the oldest is dropped.
    public var maximumPendingEvents: Int
    /// Views open at once, all apps together.
    public var maximumSessions: Int
    /// The longest element id of a script's event in an interactive view (UTF-8 bytes).
    public var maximumUserEventElementBytes: Int
    /// The longest value of such an event (UTF-8 bytes).
    public var maximumUserEventValueBytes: Int
    /// Events a view's scripts may send per second (a window of one second on the
    /// daemon's clock); more are refused (`tooManyUserEvents`) without reaching the extension.
    public var maximumUserEventsPerSecond: Int

    public static let defaultDeadline: TimeInterval = 5
    public static let defaultMaximumMessageBytes = 1 << 20
    public static let defaultMaximumHTMLBytes = 512 << 10
    public static let defaultMaximumTitleBytes = 1024
    public static let defaultMaximumActions = 16
    public static let defaultMaximumActionTextBytes = 256
    public static let defaultMaximumPendingEvents = 64
    public static let defaultMaximumSessions = 32
    public static let defaultMaximumUserEventElementBytes = 256
    public static let defaultMaximumUserEventValueBytes = 4096
    public static let defaultMaximumUserEventsPerSecond = 20

    public init(containerRoot: String, deadline: TimeInterval = defaultDeadline,
                memoryLimit: Int? = ServiceExtensionConfiguration.defaultMemoryLimit, keepWarm: Bool = true,
                environment: [String: String] = [:],
                maximumMessageBytes: Int = defaultMaximumMessageBytes, maximumHTMLBytes: Int = defaultMaximumHTMLBytes,
                maximumTitleBytes: Int = defaultMaximumTitleBytes, maximumActions: Int = defaultMaximumActions,
                maximumActionTextBytes: Int = defaultMaximumActionTextBytes,
                maximumPendingEvents: Int = defaultMaximumPendingEvents, maximumSessions: Int = defaultMaximumSessions,
                maximumUserEventElementBytes: Int = defaultMaximumUserEventElementBytes,
                maximumUserEventValueBytes: Int = defaultMaximumUserEventValueBytes,
                maximumUserEventsPerSecond: Int = defaultMaximumUserEventsPerSecond) {
        self.containerRoot = containerRoot
        self.deadline = deadline
        self.memoryLimit = memoryLimit
        self.keepWarm = keepWarm
        self.environment = environment
        self.maximumMessageBytes = maximumMessageBytes
        self.maximumHTMLBytes = maximumHTMLBytes
        self.maximumTitleBytes = maximumTitleBytes
        self.maximumActions = maximumActions
        self.maximumActionTextBytes = maximumActionTextBytes
        self.maximumPendingEvents = maximumPendingEvents
        self.maximumSessions = maximumSessions
        self.maximumUserEventElementBytes = maximumUserEventElementBytes
        self.maximumUserEventValueBytes = maximumUserEventValueBytes
        self.maximumUserEventsPerSecond = maximumUserEventsPerSecond
    }
}

/// An open content extension view, as the center shows it.
public struct ContentExtensionSession: Sendable, Hashable {
    public typealias ID = UInt64
    public var id: ID
    public var bundleIdentifier: String
    /// The notification the view shows now (another of its thread may have replaced it).
    public var notificationIdentifier: String
    public var declaration: ContentExtensionDeclaration
    /// The extension's view; nil when the extension failed: show the default content.
    public var view: ContentExtensionViewValue?
    /// Why the extension failed (also logged).
    public var failure: String?
}

/// What an action or the play/pause button led to.
public enum ContentExtensionOutcome: Sendable, Hashable {
    /// `.doNotDismiss` (or media): the view stays; show this one.
    case rendered(ContentExtensionSession)
    /// `.dismiss`: the view closed; the notification stays in the center.
    case dismissed
    /// `.dismissAndForwardAction` (or no `didReceive(_:completionHandler:)`, or a tap): the
    /// view closed and the response went to the app's delegate.
    case forwarded
    /// The extension crashed, hung or misbehaved: the view closed (show the default
    /// content) and the action went to the app, as if there were no extension.
    case failed(String)
}

/// What an open view does on its own.
public enum ContentExtensionEvent: Sendable, Hashable {
    /// A new view: `setNeedsDisplay()`, `notificationActions` set, the media state changed,
    /// or `didReceive(_:)` for another notification of the view's thread.
    case rendered(ContentExtensionViewValue)
    /// `dismissNotificationContentExtension()`, or the notification was withdrawn.
    case dismissed
    /// `performNotificationDefaultAction()`: a tap went to the app; the view closed.
    case forwarded
    /// The process died or misbehaved: show the default content.
    case failed(String)
}

public struct ContentExtensionError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        case notRunning, noSuchApp, noSuchNotification, noExtension, tooManySessions, noSuchSession, noSuchAction, invalidText, forwardingFailed
        /// A script's event for a view without `UNNotificationExtensionUserInteractionEnabled`.
        case notInteractive
        /// An event with an empty or too long element id, or a too long value.
        case invalidUserEvent
        /// More events than `maximumUserEventsPerSecond`.
        case tooManyUserEvents
    }
    public var code: Code
    public var description: String
    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}

/// The URLs under which the center serves a notification's attachments for one view (one
/// per attachment, in order): what the extension's `view.source(for:)` returns. They must
/// work without the center's cookie (the frame has an opaque origin).
public typealias ContentExtensionAttachmentURLs = @Sendable (_ session: ContentExtensionSession.ID, _ notification: DeliveredNotificationValue) -> [String]

/// Runs apps' notification content extensions for a notification center: a process per
/// extension, started when a view opens and kept while views are open (and after, with
/// `keepWarm`), a view per open notification. Every request has a deadline; a crash, a
/// hang or a message that breaks the protocol or the limits kills the process and its
/// views fall back to the default content. A `Presenter` too: another notification for an
/// open view (the same identifier, or its thread) reaches the extension's `didReceive(_:)`,
/// and a withdrawn notification closes its views.
public actor ContentExtensionHost: Presenter {
    public nonisolated let configuration: ContentExtensionConfiguration
    private let clock: any WallClock
    private let logger: Logger
    private var engine: NotificationEngine?
    private var processes: [String: HostedProcess] = [:]
    private var sessions: [ContentExtensionSession.ID: OpenView] = [:]
    private var nextSessionID: UInt64 = 1
    private var nextRequestID: UInt64 = 1

    typealias Process = ExtensionProcess<ContentExtensionCommand, ContentExtensionReply>

    /// A running extension process and what waits on it.
    private final class HostedProcess {
        let process: Process
        let record: AppExtensionRecord
        var sessions: Set<ContentExtensionSession.ID> = []
        /// The views closed last (at most `recentlyClosedLimit`): a message the extension sent
        /// before it saw the close is late, not garbage.
        var recentlyClosed: [ContentExtensionSession.ID] = []
        static let recentlyClosedLimit = 64

        func knows(_ session: ContentExtensionSession.ID) -> Bool {
            sessions.contains(session) || recentlyClosed.contains(session)
        }

        func closed(_ session: ContentExtensionSession.ID) {
            guard sessions.remove(session) != nil else { return }
            recentlyClosed.append(session)
            if recentlyClosed.count > Self.recentlyClosedLimit { recentlyClosed.removeFirst() }
        }
        var pending: [UInt64: (continuation: CheckedContinuation<Result<ContentExtensionReply, Failure>, Never>, timer: Task<Void, Never>)] = [:]
        init(process: Process, record: AppExtensionRecord) {
            self.process = process
            self.record = record
        }
    }

    struct Failure: Error { let reason: String }

    private struct OpenView {
        var session: ContentExtensionSession
        var notification: DeliveredNotificationValue
        let extensionIdentifier: String
        let attachmentURLs: ContentExtensionAttachmentURLs
        let events: AsyncStream<ContentExtensionEvent>
        let continuation: AsyncStream<ContentExtensionEvent>.Continuation
        /// The scripts' events of the current one-second window: when it began, how many.
        var userEventWindow: (start: Date, count: Int) = (.distantPast, 0)
    }

    public init(configuration: ContentExtensionConfiguration, clock: any WallClock, logger: Logger = Logger(label: "tidings.extensions")) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
    }

    /// The engine whose notifications the views show and whose response path forwards actions.
    public func attach(engine: NotificationEngine) {
        self.engine = engine
    }

    /// The content extension that draws `content`, if its app declares one for its category.
    public nonisolated static func contentExtension(for content: NotificationContentValue, app: AppRecord) -> ContentExtensionDeclaration? {
        ContentExtensionDeclaration.find(categoryIdentifier: content.categoryIdentifier, in: app)?.declaration
    }

    // MARK: - The center's API

    /// Opens the extension's view of a delivered notification: starts the extension's
    /// process (or reuses the running one) and renders. Throws only when there is nothing
    /// to open; a failing extension gives a session without a view, with `failure` set.
    public func open(bundleIdentifier: String, notificationIdentifier: String,
                     attachmentURLs: @escaping ContentExtensionAttachmentURLs) async throws(ContentExtensionError) -> ContentExtensionSession {
        guard let engine else { throw ContentExtensionError(.notRunning, "the content extension host is not attached to an engine") }
        guard sessions.count < configuration.maximumSessions else {
            throw ContentExtensionError(.tooManySessions, "\(configuration.maximumSessions) content extension views are open already; close one first")
        }
        guard let app = try? await engine.app(bundleIdentifier) else {
            throw ContentExtensionError(.noSuchApp, "no app \(bundleIdentifier) is installed")
        }
        guard let notification = (try? await engine.deliveredNotifications(bundleIdentifier))?.first(where: { $0.request.identifier == notificationIdentifier }) else {
            throw ContentExtensionError(.noSuchNotification, "\(bundleIdentifier) has no delivered notification \"\(notificationIdentifier)\"")
        }
        let categoryIdentifier = notification.request.content.categoryIdentifier
        guard let (record, declaration) = ContentExtensionDeclaration.find(categoryIdentifier: categoryIdentifier, in: app) else {
            throw ContentExtensionError(.noExtension, "\(bundleIdentifier) has no content extension for the category \"\(categoryIdentifier)\"")
        }
        let actions = await categoryActions(engine, bundleIdentifier, categoryIdentifier)
        let id = nextSessionID
        nextSessionID += 1
        let (events, continuation) = AsyncStream<ContentExtensionEvent>.makeStream(bufferingPolicy: .bufferingNewest(max(configuration.maximumPendingEvents, 1)))
        var session = ContentExtensionSession(id: id, bundleIdentifier: bundleIdentifier, notificationIdentifier: notificationIdentifier, declaration: declaration)
        sessions[id] = OpenView(session: session, notification: notification, extensionIdentifier: record.bundleIdentifier,
                                attachmentURLs: attachmentURLs, events: events, continuation: continuation)
        let hosted: HostedProcess
        do {
            hosted = try process(for: record, app: app)
        } catch {
            let reason = "cannot start the content extension \(record.executable): \(error)"
            log(reason, extension: record.bundleIdentifier, app: bundleIdentifier)
            finish(id)
            session.failure = reason
            return session
        }
        hosted.sessions.insert(id)
        let command = ContentExtensionCommand.open(id: requestID(), session: id, notification: notification, actions: actions,
                                                   attachmentURLs: attachmentURLs(id, notification))
        switch await request(command, on: hosted) {
        case .success(.rendered(_, _, let view)):
            sessions[id]?.session.view = view
            return sessions[id]?.session ?? session
        case .success:
            fail(hosted, "the extension answered an open with something else than a view")
            session.failure = "the extension answered an open with something else than a view"
            return session
        case .failure(let failure):
            session.failure = failure.reason
            return session
        }
    }

    /// The person picked an action of the open view (`text` for a text-input action). A tap
    /// on the view (`UNNotificationDefaultActionIdentifier`) goes to the app directly.
    public func perform(session id: ContentExtensionSession.ID, actionIdentifier: String, text: String? = nil) async throws(ContentExtensionError) -> ContentExtensionOutcome {
        guard let open = sessions[id] else { throw ContentExtensionError(.noSuchSession, "no content extension view \(id) is open") }
        if actionIdentifier == ActionIdentifier.default {
            finish(id, event: nil)
            try await forward(open, actionIdentifier: actionIdentifier, text: nil, action: nil)
            return .forwarded
        }
        guard let action = open.session.view?.actions.first(where: { $0.identifier == actionIdentifier }) else {
            throw ContentExtensionError(.noSuchAction, "the view of \"\(open.session.notificationIdentifier)\" has no action \"\(actionIdentifier)\"")
        }
        var userText = text
        if action.textInput == nil, userText != nil {
            throw ContentExtensionError(.invalidText, "action \"\(actionIdentifier)\" takes no text reply")
        }
        if action.textInput != nil, userText == nil { userText = "" }
        guard let hosted = processes[open.extensionIdentifier], hosted.sessions.contains(id) else {
            throw ContentExtensionError(.noSuchSession, "no content extension view \(id) is open")
        }
        let response = ResponseValue(notification: open.notification, actionIdentifier: actionIdentifier, userText: userText)
        switch await request(.respond(id: requestID(), session: id, response: response), on: hosted) {
        case .success(.responded(_, _, let raw, let view)):
            switch ContentExtensionResponseOption(rawValue: raw) {
            case .doNotDismiss?:
                guard sessions[id] != nil else { return .dismissed }
                sessions[id]?.session.view = view
                return .rendered(sessions[id]!.session)
            case .dismiss?:
                finish(id, event: nil)
                return .dismissed
            case .dismissAndForwardAction?:
                finish(id, event: nil)
                try await forward(open, actionIdentifier: actionIdentifier, text: userText, action: action)
                return .forwarded
            case nil:
                // Checked when the reply arrived (`validate`); cannot happen.
                fail(hosted, "the extension answered with the unknown option \(raw)")
                return .failed("the extension answered with the unknown option \(raw)")
            }
        case .success:
            let reason = "the extension answered an action with something else than a response"
            fail(hosted, reason)
            await forwardAfterFailure(open, actionIdentifier: actionIdentifier, text: userText, action: action)
            return .failed(reason)
        case .failure(let failure):
            // The extension did not handle the action: it goes to the app, as without one.
            await forwardAfterFailure(open, actionIdentifier: actionIdentifier, text: userText, action: action)
            return .failed(failure.reason)
        }
    }

    /// The play/pause button was pressed: `mediaPlay()` or `mediaPause()`, then a new view.
    public func media(session id: ContentExtensionSession.ID, play: Bool) async throws(ContentExtensionError) -> ContentExtensionOutcome {
        guard let open = sessions[id], let hosted = processes[open.extensionIdentifier], hosted.sessions.contains(id) else {
            throw ContentExtensionError(.noSuchSession, "no content extension view \(id) is open")
        }
        switch await request(.media(id: requestID(), session: id, play: play), on: hosted) {
        case .success(.rendered(_, _, let view)):
            guard sessions[id] != nil else { return .dismissed }
            sessions[id]?.session.view = view
            return .rendered(sessions[id]!.session)
        case .success:
            let reason = "the extension answered media with something else than a view"
            fail(hosted, reason)
            return .failed(reason)
        case .failure(let failure):
            return .failed(failure.reason)
        }
    }

    /// A script in an interactive view sent an event (the center relays what the frame
    /// posts): the extension's `view.eventHandler` gets the element's id and the value, then
    /// the view is shown again. Refused without reaching the extension when the view is not
    /// interactive, the event is over the limits, or the view sent too many this second.
    public func userEvent(session id: ContentExtensionSession.ID, element: String, value: String) async throws(ContentExtensionError) -> ContentExtensionOutcome {
        guard let open = sessions[id], let hosted = processes[open.extensionIdentifier], hosted.sessions.contains(id) else {
            throw ContentExtensionError(.noSuchSession, "no content extension view \(id) is open")
        }
        guard open.session.declaration.userInteractionEnabled else {
            throw ContentExtensionError(.notInteractive, "the view of \"\(open.session.notificationIdentifier)\" is not interactive (UNNotificationExtensionUserInteractionEnabled)")
        }
        let limits = configuration
        guard !element.isEmpty, element.utf8.count <= limits.maximumUserEventElementBytes else {
            throw ContentExtensionError(.invalidUserEvent, "an event's element id must be 1 to \(limits.maximumUserEventElementBytes) bytes (got \(element.utf8.count))")
        }
        guard value.utf8.count <= limits.maximumUserEventValueBytes else {
            throw ContentExtensionError(.invalidUserEvent, "an event's value must be at most \(limits.maximumUserEventValueBytes) bytes (got \(value.utf8.count))")
        }
        let now = clock.now
        var window = open.userEventWindow
        if now.timeIntervalSince(window.start) >= 1 || now < window.start { window = (now, 0) }
        guard window.count < limits.maximumUserEventsPerSecond else {
            throw ContentExtensionError(.tooManyUserEvents, "the view sent more than \(limits.maximumUserEventsPerSecond) events in a second")
        }
        window.count += 1
        sessions[id]?.userEventWindow = window
        switch await request(.userEvent(id: requestID(), session: id, element: element, value: value), on: hosted) {
        case .success(.rendered(_, _, let view)):
            guard sessions[id] != nil else { return .dismissed }
            sessions[id]?.session.view = view
            return .rendered(sessions[id]!.session)
        case .success:
            let reason = "the extension answered an event with something else than a view"
            fail(hosted, reason)
            return .failed(reason)
        case .failure(let failure):
            return .failed(failure.reason)
        }
    }

    /// The person closed the view.
    public func close(session id: ContentExtensionSession.ID) {
        finish(id, event: nil)
    }

    /// What the view does on its own until it closes (one consumer). Unknown views: an
    /// empty stream.
    public func events(session id: ContentExtensionSession.ID) -> AsyncStream<ContentExtensionEvent> {
        sessions[id]?.events ?? AsyncStream { $0.finish() }
    }

    /// The open views' sessions.
    public var openSessions: [ContentExtensionSession] {
        sessions.values.map(\.session).sorted { $0.id < $1.id }
    }

    /// The PID of an extension's running process, if any.
    public func runningProcess(for extensionIdentifier: String) -> Int32? {
        processes[extensionIdentifier].flatMap { $0.process.isAlive ? $0.process.pid : nil }
    }

    /// Closes every view and ends every process (their entry points see the channel close).
    public func shutdown() {
        for id in Array(sessions.keys) { finish(id, event: .dismissed) }
        for hosted in processes.values { hosted.process.retire() }
        processes = [:]
    }

    // MARK: - Presenter

    public func present(_ presented: PresentedNotification) async {
        let notification = presented.notification
        let thread = notification.request.content.threadIdentifier
        for (id, open) in sessions where open.session.bundleIdentifier == presented.bundleIdentifier {
            let current = open.notification.request
            guard current.identifier == notification.request.identifier || (!thread.isEmpty && current.content.threadIdentifier == thread) else { continue }
            guard let hosted = processes[open.extensionIdentifier], hosted.sessions.contains(id) else { continue }
            sessions[id]?.notification = notification
            sessions[id]?.session.notificationIdentifier = notification.request.identifier
            let command = ContentExtensionCommand.receive(id: requestID(), session: id, notification: notification,
                                                          attachmentURLs: open.attachmentURLs(id, notification))
            // Off the delivery path: the engine does not wait for the extension.
            Task { await self.receive(command, session: id, on: hosted) }
        }
    }

    public func withdraw(bundleIdentifier: String, identifiers: [String]) async {
        let gone = Set(identifiers)
        for (id, open) in sessions where open.session.bundleIdentifier == bundleIdentifier && gone.contains(open.notification.request.identifier) {
            finish(id, event: .dismissed)
        }
    }

    private func receive(_ command: ContentExtensionCommand, session id: ContentExtensionSession.ID, on hosted: HostedProcess) async {
        if case .success(.rendered(_, _, let view)) = await request(command, on: hosted), sessions[id] != nil {
            sessions[id]?.session.view = view
            sessions[id]?.continuation.yield(.rendered(view))
        }
    }

    // MARK: - Processes and requests

    private func requestID() -> UInt64 {
        defer { nextRequestID += 1 }
        return nextRequestID
    }

    private func categoryActions(_ engine: NotificationEngine, _ bundle: String, _ category: String) async -> [ActionValue] {
        ((try? await engine.categories(bundle)) ?? []).first { $0.identifier == category }?.actions ?? []
    }

    /// The running process of the extension, or a new one.
    private func process(for record: AppExtensionRecord, app: AppRecord) throws -> HostedProcess {
        if let hosted = processes[record.bundleIdentifier] {
            if hosted.process.isAlive { return hosted }
            fail(hosted, "the extension's process ended while idle")
        }
        guard FileManager.default.isExecutableFile(atPath: record.executable) else {
            throw ServiceExtensionRunnerError("no executable file at \(record.executable)")
        }
        let container = URL(fileURLWithPath: configuration.containerRoot).standardizedFileURL
            .appendingPathComponent(record.bundleIdentifier, isDirectory: true).path
        let environment = try ExtensionEnvironment.prepare(record: record, app: app, container: container, extra: configuration.environment)
        try FileManager.default.createDirectory(atPath: container + "/tmp", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let process = try Process.spawn(executable: record.executable, extensionIdentifier: record.bundleIdentifier, environment: environment,
                                        directory: app.directory, memoryLimit: configuration.memoryLimit,
                                        maximumFrameLength: configuration.maximumMessageBytes)
        let hosted = HostedProcess(process: process, record: record)
        processes[record.bundleIdentifier] = hosted
        logger.info("started content extension", metadata: ["extension": "\(record.bundleIdentifier)", "pid": "\(process.pid)"])
        Task { await self.pump(hosted) }
        return hosted
    }

    /// Sends a command and waits for its reply, the deadline, or the process's failure.
    private func request(_ command: ContentExtensionCommand, on hosted: HostedProcess) async -> Result<ContentExtensionReply, Failure> {
        guard let id = command.requestID else { preconditionFailure("close has no reply") }
        let process = hosted.process
        let deadline = clock.now.addingTimeInterval(configuration.deadline)
        let clock = self.clock
        return await withCheckedContinuation { continuation in
            let timer = Task {
                guard (try? await clock.sleep(until: deadline)) != nil else { return }
                process.post(.timer(id: id, .deadlinePassed))
            }
            hosted.pending[id] = (continuation, timer)
            do {
                try process.send(command)
            } catch {
                // The process is gone; its end (`.closed`) fails the request.
                process.post(.closed)
            }
        }
    }

    /// Reads the process's events until it ends.
    private func pump(_ hosted: HostedProcess) async {
        while true {
            let event = await hosted.process.next()
            guard await handle(event, from: hosted) else { return }
        }
    }

    /// Handles one event of a process; false once the process is done.
    private func handle(_ event: ExtensionProcessEvent<ContentExtensionReply>, from hosted: HostedProcess) async -> Bool {
        guard processes[hosted.record.bundleIdentifier] === hosted else { return false }
        switch event {
        case .reply(let reply):
            if let problem = validate(reply, from: hosted) {
                fail(hosted, problem)
                return false
            }
            let reply = reply.withCheckedTint
            switch reply {
            case .rendered(let id, _, _), .responded(let id, _, _, _):
                let waiting = hosted.pending.removeValue(forKey: id)!
                waiting.timer.cancel()
                waiting.continuation.resume(returning: .success(reply))
            case .event(let session, let event):
                await contextEvent(event, session: session)
            }
            return true
        case .timer(let id, _):
            guard hosted.pending[id] != nil else { return true }
            fail(hosted, "the extension did not answer within \(Self.seconds(configuration.deadline)); it was killed")
            return false
        case .garbage(let what):
            fail(hosted, "the extension wrote garbage on its channel (\(what)); it was killed")
            return false
        case .closed:
            hosted.process.kill()
            let how = await hosted.process.exitDescription()
            guard processes[hosted.record.bundleIdentifier] === hosted else { return false }
            var reason = "the extension's process ended (\(how))"
            if let limit = configuration.memoryLimit, how.contains("signal") {
                reason += ": a crash, or memory over the limit of \(limit / (1024 * 1024)) MiB"
            }
            fail(hosted, reason)
            return false
        }
    }

    /// Why a reply breaks the protocol or the limits, nil when it is fine. A view's media
    /// tint that is no plain CSS color is dropped, not a failure.
    private func validate(_ reply: ContentExtensionReply, from hosted: HostedProcess) -> String? {
        let session: UInt64
        var view: ContentExtensionViewValue?
        switch reply {
        case .rendered(let id, let s, let v):
            guard hosted.pending[id] != nil else { return "a reply to request \(id), which is not waiting" }
            (session, view) = (s, v)
        case .responded(let id, let s, let option, let v):
            guard hosted.pending[id] != nil else { return "a reply to request \(id), which is not waiting" }
            guard ContentExtensionResponseOption(rawValue: option) != nil else { return "the unknown response option \(option)" }
            (session, view) = (s, v)
        case .event(let s, let event):
            session = s
            if case .render(let v) = event { view = v }
        }
        guard hosted.knows(session) else { return "a message for view \(session), which is not one of this process's" }
        guard let view else { return nil }
        let limits = configuration
        if view.html.utf8.count > limits.maximumHTMLBytes {
            return "a view of \(view.html.utf8.count) bytes of HTML, over the limit of \(limits.maximumHTMLBytes)"
        }
        if let title = view.title, title.utf8.count > limits.maximumTitleBytes {
            return "a title of \(title.utf8.count) bytes, over the limit of \(limits.maximumTitleBytes)"
        }
        if view.actions.count > limits.maximumActions {
            return "\(view.actions.count) actions, over the limit of \(limits.maximumActions)"
        }
        for action in view.actions {
            let texts = [action.identifier, action.title, action.textInput?.buttonTitle ?? "", action.textInput?.placeholder ?? ""]
            if texts.contains(where: { $0.utf8.count > limits.maximumActionTextBytes }) {
                return "an action with a text over \(limits.maximumActionTextBytes) bytes"
            }
            if action.identifier.isEmpty || action.identifier == ActionIdentifier.default || action.identifier == ActionIdentifier.dismiss {
                return "an action with the identifier \"\(action.identifier)\", which no action may have"
            }
        }
        if let size = view.preferredContentSize {
            guard size.count == 2, size.allSatisfy({ $0.isFinite && $0 >= 0 && $0 <= 100_000 }) else {
                return "a preferredContentSize that is no width and height between 0 and 100,000"
            }
        }
        if let media = view.media {
            guard (1...2).contains(media.type) else { return "the unknown play/pause button type \(media.type)" }
            guard media.frame.count == 4, media.frame.allSatisfy({ $0.isFinite && abs($0) <= 100_000 }) else {
                return "a play/pause button frame that is no x, y, width and height within 100,000"
            }
        }
        return nil
    }

    private func contextEvent(_ event: ContentExtensionContextEvent, session id: ContentExtensionSession.ID) async {
        guard let open = sessions[id] else { return }
        switch event {
        case .render(let view):
            sessions[id]?.session.view = view
            open.continuation.yield(.rendered(view))
        case .dismiss:
            finish(id, event: .dismissed)
        case .defaultAction:
            finish(id, event: .forwarded)
            do {
                try await forward(open, actionIdentifier: ActionIdentifier.default, text: nil, action: nil)
            } catch {
                logger.warning("content extension: the default action could not reach the app", metadata: ["reason": "\(error)"])
            }
        }
    }

    /// Kills the process, fails what waits on it, and shows the default content in its views.
    private func fail(_ hosted: HostedProcess, _ reason: String) {
        guard processes[hosted.record.bundleIdentifier] === hosted else { return }
        processes[hosted.record.bundleIdentifier] = nil
        hosted.process.kill()
        let apps = Set(hosted.sessions.compactMap { sessions[$0]?.session.bundleIdentifier })
        log(reason, extension: hosted.record.bundleIdentifier, app: apps.sorted().joined(separator: ","), pid: hosted.process.pid)
        let pending = hosted.pending
        hosted.pending = [:]
        for (_, waiting) in pending {
            waiting.timer.cancel()
            waiting.continuation.resume(returning: .failure(Failure(reason: reason)))
        }
        for id in hosted.sessions {
            guard let open = sessions.removeValue(forKey: id) else { continue }
            open.continuation.yield(.failed(reason))
            open.continuation.finish()
        }
        hosted.sessions = []
    }

    /// Closes a view: the extension releases its instance; the process stays warm if
    /// configured, or is ended when it has no views left.
    private func finish(_ id: ContentExtensionSession.ID, event: ContentExtensionEvent? = nil) {
        guard let open = sessions.removeValue(forKey: id) else { return }
        if let event { open.continuation.yield(event) }
        open.continuation.finish()
        guard let hosted = processes[open.extensionIdentifier], hosted.sessions.contains(id) else { return }
        hosted.closed(id)
        try? hosted.process.send(.close(session: id))
        if hosted.sessions.isEmpty, !configuration.keepWarm, hosted.pending.isEmpty {
            processes[open.extensionIdentifier] = nil
            hosted.process.retire()
        }
    }

    /// Sends the response to the app's delegate by the path of `tidings notifications respond`.
    private func forward(_ open: OpenView, actionIdentifier: String, text: String?, action: ActionValue?) async throws(ContentExtensionError) {
        guard let engine else { throw ContentExtensionError(.notRunning, "the content extension host is not attached to an engine") }
        do {
            try await engine.respond(bundle: open.session.bundleIdentifier, identifier: open.notification.request.identifier,
                                     actionIdentifier: actionIdentifier, userText: text, extensionActions: action.map { [$0] } ?? [])
        } catch {
            throw ContentExtensionError(.forwardingFailed, "the response could not reach the app: \(error)")
        }
    }

    private func forwardAfterFailure(_ open: OpenView, actionIdentifier: String, text: String?, action: ActionValue?) async {
        do {
            try await forward(open, actionIdentifier: actionIdentifier, text: text, action: action)
        } catch {
            logger.warning("content extension: the action of a failed extension could not reach the app", metadata: ["reason": "\(error)"])
        }
    }

    private func log(_ reason: String, extension identifier: String, app: String, pid: Int32? = nil) {
        var metadata: Logger.Metadata = ["extension": "\(identifier)", "app": "\(app)", "reason": "\(reason)"]
        if let pid { metadata["pid"] = "\(pid)" }
        logger.error("content extension failed; showing the default content", metadata: metadata)
    }

    private static func seconds(_ value: TimeInterval) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}

extension ContentExtensionCommand {
    /// The id its reply carries (nil for `close`, which has none).
    var requestID: UInt64? {
        switch self {
        case .open(let id, _, _, _, _), .receive(let id, _, _, _), .respond(let id, _, _), .media(let id, _, _), .userEvent(let id, _, _, _): id
        case .close: nil
        }
    }
}

extension ContentExtensionReply {
    /// The reply with a media tint that is no plain CSS color dropped (it goes into a style).
    var withCheckedTint: ContentExtensionReply {
        func checked(_ view: ContentExtensionViewValue) -> ContentExtensionViewValue {
            var view = view
            if let tint = view.media?.tintColor, !MediaButtonValue.isValidTintColor(tint) { view.media?.tintColor = nil }
            return view
        }
        switch self {
        case .rendered(let id, let session, let view): return .rendered(id: id, session: session, view: checked(view))
        case .responded(let id, let session, let option, let view): return .responded(id: id, session: session, option: option, view: checked(view))
        case .event(let session, .render(let view)): return .event(session: session, event: .render(view: checked(view)))
        case .event: return self
        }
    }
}
