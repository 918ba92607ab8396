import Foundation
import Logging
import Synchronization
import TidingsCore
import TidingsEngine

/// The web center's link to the engine: a `Presenter` that sends each banner, withdrawal and
/// badge to every open page, and a `ConsentProvider` that asks the person in the page.
/// Pages listen on a WebSocket each (at most `maximumPages`); a page that falls
/// `pageQueueLimit` messages behind is disconnected, and reloads the center when it returns.
public final class WebHub: Presenter, ConsentProvider {
    public struct Limits: Sendable {
        /// Pages listening at once; one more is refused (503).
        public var maximumPages = 16
        /// Messages waiting for one page; past it the page is disconnected.
        public var pageQueueLimit = 4_096
        /// Consent prompts waiting for an answer; past it a request is denied at once.
        public var maximumPendingPrompts = 64
        public init() {}
    }

    struct Prompt {
        var view: ConsentPromptView
        var continuation: CheckedContinuation<Bool, Never>
    }

    struct State {
        var pages: [Int: AsyncStream<String>.Continuation] = [:]
        var nextPage = 0
        var prompts: [Int: Prompt] = [:]
        var nextPrompt = 1
    }

    public let limits: Limits
    let attachmentsRoot: String
    let logger: Logger
    private let state = Mutex(State())
    /// Told when a prompt waits and no page is open (the daemon prints where to answer).
    private let unattendedPrompt: @Sendable (String) -> Void

    /// `attachmentsRoot`: the engine's attachment store (`DaemonConfiguration.attachmentsDirectory`);
    /// the center serves only files directly in an app's folder of it.
    public init(attachmentsRoot: String, limits: Limits = Limits(), logger: Logger, unattendedPrompt: @escaping @Sendable (String) -> Void = { _ in }) {
        self.limits = limits
        self.attachmentsRoot = attachmentsRoot
        self.logger = logger
        self.unattendedPrompt = unattendedPrompt
    }

    public var pageCount: Int { state.withLock { $0.pages.count } }

    // MARK: Pages

    /// A new page's stream of messages, or nil when `maximumPages` are open.
    func openPage() -> (id: Int, messages: AsyncStream<String>)? {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingOldest(limits.pageQueueLimit))
        let id: Int? = state.withLock { state in
            guard state.pages.count < limits.maximumPages else { return nil }
            let id = state.nextPage
            state.nextPage += 1
            state.pages[id] = continuation
            return id
        }
        guard let id else { return nil }
        continuation.onTermination = { [weak self] _ in self?.closePage(id) }
        return (id, stream)
    }

    func closePage(_ id: Int) {
        let continuation = state.withLock { $0.pages.removeValue(forKey: id) }
        continuation?.finish()
    }

    func broadcast(_ event: WebEvent) {
        let pages = state.withLock { $0.pages }
        // Encoded only for pages to send it to (none open is the common case under a burst).
        guard !pages.isEmpty else { return }
        let json = event.json
        for (id, page) in pages {
            if case .dropped = page.yield(json) {
                logger.notice("a web center page fell behind; disconnected (it reloads)", metadata: ["page": "\(id)"])
                closePage(id)
            }
        }
    }

    // MARK: Presenter

    public func present(_ presented: PresentedNotification) async {
        guard pageCount > 0 else { return }
        let view = NotificationView(app: presented.bundleIdentifier, appName: presented.appName, notification: presented.notification,
                                    category: presented.category, presentation: presented.presentation, badge: presented.badge,
                                    settings: presented.settings, attachmentsRoot: attachmentsRoot)
        broadcast(.present(view))
    }

    public func withdraw(bundleIdentifier: String, identifiers: [String]) async {
        broadcast(.withdraw(app: bundleIdentifier, identifiers: identifiers))
    }

    public func badgeChanged(bundleIdentifier: String, count: Int) async {
        broadcast(.badge(app: bundleIdentifier, count: count))
    }

    /// Every change reaches the open pages, whoever made it (the page, `tidings settings`).
    public func settingsChanged(bundleIdentifier: String, settings: NotificationSettingsValue) async {
        broadcast(.settings(app: bundleIdentifier, settings: settings))
    }

    // MARK: ConsentProvider

    /// Shows the prompt in every open page (and in pages opened later) until the person
    /// answers in one of them.
    public func requestConsent(appName: String, bundleIdentifier: String, options: AuthorizationOptionsValue) async -> Bool {
        var names: [String] = []
        if options.contains(.alert) { names.append("alerts") }
        if options.contains(.sound) { names.append("sounds") }
        if options.contains(.badge) { names.append("badges") }
        if options.contains(.criticalAlert) { names.append("critical alerts") }
        if options.contains(.timeSensitive) { names.append("time-sensitive") }
        let allowed: Bool = await withCheckedContinuation { continuation in
            let result: (view: ConsentPromptView, pages: Int)? = state.withLock { state in
                guard state.prompts.count < limits.maximumPendingPrompts else { return nil }
                let view = ConsentPromptView(id: state.nextPrompt, app: bundleIdentifier, appName: appName, options: names)
                state.nextPrompt += 1
                state.prompts[view.id] = Prompt(view: view, continuation: continuation)
                return (view, state.pages.count)
            }
            guard let result else {
                logger.warning("too many consent prompts waiting; denied", metadata: ["app": "\(bundleIdentifier)", "limit": "\(limits.maximumPendingPrompts)"])
                continuation.resume(returning: false)
                return
            }
            if result.pages == 0 { unattendedPrompt("“\(appName)” (\(bundleIdentifier)) asks to send notifications: answer in the web center (`tidings open` prints its address)") }
            broadcast(.consent(result.view))
        }
        logger.info("consent answered in the web center", metadata: ["app": "\(bundleIdentifier)", "allowed": "\(allowed)"])
        return allowed
    }

    /// The person's answer from a page; false when no such prompt waits (answered elsewhere).
    func answer(prompt id: Int, allow: Bool) -> Bool {
        guard let prompt = state.withLock({ $0.prompts.removeValue(forKey: id) }) else { return false }
        prompt.continuation.resume(returning: allow)
        broadcast(.consentAnswered(id: id))
        return true
    }

    var pendingPrompts: [ConsentPromptView] {
        state.withLock { $0.prompts.values.map(\.view).sorted { $0.id < $1.id } }
    }
}
