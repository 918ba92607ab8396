import Foundation
import Synchronization
import TidingsCore

/// What the center needs from a content extension host (docs/content-extensions.md); the
/// daemon's `ContentExtensionHost` answers it through a small adapter in the CLI, so this
/// module depends on the engine's vocabulary only.
public protocol WebContentExtensions: Sendable {
    /// Runs the notification's extension and returns its first view (or the failure, with
    /// no document: the page shows the default content). `attachmentURLs` gives the frame's
    /// URLs for a notification's attachments in this view.
    func open(app: String, identifier: String, frameOrigin: String,
              attachmentURLs: @escaping @Sendable (UInt64, DeliveredNotificationValue) -> [String]) async throws -> WebExtensionView
    func perform(session: UInt64, action: String, text: String?) async throws -> WebExtensionOutcome
    /// The play/pause button the page draws over the view was pressed: the extension's
    /// `mediaPlay()` (play) or `mediaPause()`, then its new view.
    func media(session: UInt64, play: Bool) async throws -> WebExtensionOutcome
    /// A script in an interactive view sent an event: the extension's `view.eventHandler`,
    /// then its new view. Throws when the view is not interactive, the event is over the
    /// limits or too many came this second (`WebExtensionEventError`).
    func userEvent(session: UInt64, element: String, value: String) async throws -> WebExtensionOutcome
    func close(session: UInt64) async
    /// What the extension does on its own while the view is open; ends when it closes.
    func events(session: UInt64) async -> AsyncStream<WebExtensionOutcome>
}

/// An extension's view as the frame shows it.
public struct WebExtensionView: Sendable, Codable, Hashable {
    public var session: UInt64
    /// The frame's whole document, with its own Content-Security-Policy; nil: the extension
    /// failed, show the default content.
    public var document: String?
    public var contentSecurityPolicy: String
    /// The iframe's `sandbox` attribute (never `allow-same-origin`).
    public var sandbox: String
    /// Height ÷ width of the frame.
    public var heightRatio: Double
    public var defaultContentHidden: Bool
    /// The header instead of the app's name (`UNNotificationExtensionOverridesDefaultTitle`).
    public var title: String?
    public var actions: [ActionValue]
    public var failure: String?
    /// The play/pause button the page draws over the frame (`mediaPlayPauseButtonType` and
    /// the rest), with whether the media plays; nil: none.
    public var media: MediaButtonValue?

    public init(session: UInt64, document: String?, contentSecurityPolicy: String, sandbox: String, heightRatio: Double, defaultContentHidden: Bool, title: String?, actions: [ActionValue], failure: String?, media: MediaButtonValue? = nil) {
        self.media = media
        self.session = session
        self.document = document
        self.contentSecurityPolicy = contentSecurityPolicy
        self.sandbox = sandbox
        self.heightRatio = heightRatio
        self.defaultContentHidden = defaultContentHidden
        self.title = title
        self.actions = actions
        self.failure = failure
    }
}

/// Why a view's event was refused, for the HTTP status.
public enum WebExtensionEventError: Error, Sendable, Hashable {
    case tooMany(String)
    case tooLarge(String)
    case refused(String)
}

public enum WebExtensionOutcome: Sendable, Hashable {
    case rendered(WebExtensionView)
    case dismissed
    case forwarded
    case failed(String)
}

/// The open views' capability URLs: `/x/<token>/frame` (the frame's document) and
/// `/x/<token>/<n>` (the notification's n-th attachment). The frame has an opaque origin,
/// so its requests carry no cookie: an unguessable token per view stands in for it, and is
/// forgotten when the view closes.
final class ExtensionFrames: Sendable {
    struct Frame {
        var document: String
        var policy: String
        var attachments: [String]
    }
    private let frames = Mutex<(byToken: [String: Frame], tokens: [UInt64: String])>(([:], [:]))

    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// The session's token, made on first use.
    func token(for session: UInt64) -> String {
        frames.withLock { state in
            if let token = state.tokens[session] { return token }
            let token = Self.newToken()
            state.tokens[session] = token
            state.byToken[token] = Frame(document: "", policy: "", attachments: [])
            return token
        }
    }

    func setAttachments(_ paths: [String], session: UInt64) {
        let token = token(for: session)
        frames.withLock { $0.byToken[token]?.attachments = paths }
    }

    func setDocument(_ document: String, policy: String, session: UInt64) {
        let token = token(for: session)
        frames.withLock { $0.byToken[token]?.document = document; $0.byToken[token]?.policy = policy }
    }

    func frame(token: String) -> Frame? {
        frames.withLock { $0.byToken[token] }
    }

    /// Whether `token` is the open view `session`'s (a frame names only its own view).
    func token(_ token: String, isFor session: UInt64) -> Bool {
        guard let known = frames.withLock({ $0.tokens[session] }), known.utf8.count == token.utf8.count else { return false }
        return zip(known.utf8, token.utf8).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    func forget(session: UInt64) {
        frames.withLock { state in
            if let token = state.tokens.removeValue(forKey: session) { state.byToken[token] = nil }
        }
    }
}
