import Foundation
import TidingsCore
@_spi(Tidings) import UserNotifications

/// The stand-in for `UIViewController` that a content extension's principal class
/// subclasses (Linux has no UIKit): its `view` holds HTML, `title` is the header when the
/// manifest sets `UNNotificationExtensionOverridesDefaultTitle`, `preferredContentSize`
/// resizes the frame, and `extensionContext` is iOS 12's.
///
///     final class NotificationViewController: UNNotificationContentViewController, UNNotificationContentExtension {
///         func didReceive(_ notification: UNNotification) {
///             view.html = "<h1>\(UNNotificationContentView.escape(notification.request.content.title))</h1>"
///         }
///     }
///     UNNotificationContentExtensionMain(NotificationViewController.self)
///
/// See docs/content-extensions.md. The host calls it on the main thread only.
open class UNNotificationContentViewController: NSObject {
    /// The view: the HTML the center shows in the extension's frame.
    public let view = UNNotificationContentView()
    /// The header when the manifest sets `UNNotificationExtensionOverridesDefaultTitle`.
    open var title: String?
    /// The view's size in CSS pixels; its height ÷ width sizes the frame. `.zero` (the
    /// default) keeps `UNNotificationExtensionInitialContentSizeRatio`.
    open var preferredContentSize: CGSize = .zero
    /// The context of the view while it is shown (nil outside the host).
    public internal(set) var extensionContext: NSExtensionContext?

    public required override init() {
        super.init()
    }
}

/// A content extension's view: an HTML fragment, shown as the body of a document in a
/// sandboxed frame (no scripts unless the manifest sets
/// `UNNotificationExtensionUserInteractionEnabled`).
public final class UNNotificationContentView {
    /// The view's HTML, sent to the center after each call into the extension returns (or
    /// on `setNeedsDisplay()`).
    public var html: String = ""
    /// The notification's attachment files (standardized paths) → the URLs the center serves
    /// them under for this view.
    var sources: [String: String] = [:]
    var needsDisplay: (@Sendable () -> Void)?
    /// Called on the main thread when a script of the view sends an event — only in a view
    /// whose manifest sets `UNNotificationExtensionUserInteractionEnabled`: a click on an
    /// element with an `id` and `data-tidings-event` (its `data-value`), a change of such an
    /// input (its value), or `tidings.send(id, value)`. Change `html` here; the view is sent
    /// again when the handler returns. Without a handler, events are ignored.
    public var eventHandler: ((_ element: String, _ value: String) -> Void)?

    init() {}

    /// The URL under which the center serves `url`, one of the shown notification's
    /// attachments (`attachment.url`), to use in `src`; nil for any other URL.
    public func source(for url: URL) -> String? {
        guard url.isFileURL else { return nil }
        return sources[url.standardizedFileURL.path]
    }

    /// Sends the view to the center again (after a change made outside a call from the host,
    /// e.g. when a download finished). May be called from any thread.
    public func setNeedsDisplay() {
        needsDisplay?()
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` escaped: safe in HTML text and attribute values
    /// (`MarkupText.escape`, for extensions that import only UserNotificationsUI).
    public static func escape(_ text: String) -> String { MarkupText.escape(text) }
}

/// The extension context of a content extension's view (iOS 12's additions to
/// `NSExtensionContext` in UserNotificationsUI; Foundation on Linux has no
/// `NSExtensionContext`, so the class is declared here). Its methods may be called from
/// any thread.
open class NSExtensionContext: NSObject, @unchecked Sendable {
    private let lock = NSLock()
    private var actions: [UNNotificationAction]
    let host: any ContentExtensionContextHost

    init(actions: [UNNotificationAction], host: any ContentExtensionContextHost) {
        self.actions = actions
        self.host = host
        super.init()
    }

    /// The action buttons under the view: the category's until the extension sets others.
    public var notificationActions: [UNNotificationAction] {
        get { lock.withLock { actions } }
        set {
            lock.withLock { actions = newValue }
            host.contextChanged()
        }
    }

    /// Behaves as if the person tapped the notification: the view closes and the app's
    /// delegate gets `UNNotificationDefaultActionIdentifier`.
    public func performNotificationDefaultAction() {
        host.performDefaultAction()
    }

    /// Closes the view.
    public func dismissNotificationContentExtension() {
        host.dismiss()
    }

    /// The extension's own media started playing: the play/pause button shows "pause".
    public func mediaPlayingStarted() {
        host.mediaPlaying(true)
    }

    /// The extension's own media paused: the play/pause button shows "play".
    public func mediaPlayingPaused() {
        host.mediaPlaying(false)
    }
}

/// What the extension context reports to the entry point's session.
protocol ContentExtensionContextHost: Sendable {
    func contextChanged()
    func performDefaultAction()
    func dismiss()
    func mediaPlaying(_ playing: Bool)
}
