import Foundation
@_exported import UserNotifications

/// What a content extension does after the person picked an action in its interface.
public enum UNNotificationContentExtensionResponseOption: UInt, Sendable, Hashable, CaseIterable {
    /// Keep the interface open; the extension handled the action.
    case doNotDismiss = 0
    /// Close the interface; the extension handled the action.
    case dismiss = 1
    /// Close the interface and pass the response on to the app's delegate.
    case dismissAndForwardAction = 2
}

/// The play/pause button the system draws over an extension's media.
public enum UNNotificationContentExtensionMediaPlayPauseButtonType: UInt, Sendable, Hashable, CaseIterable {
    /// No button (the default).
    case none = 0
    /// An always-visible play/pause toggle.
    case `default` = 1
    /// A translucent button that hides while the media plays.
    case overlay = 2
}


/// The custom interface of a notification category, shown when the person expands a
/// notification whose `categoryIdentifier` the extension's manifest names
/// (`UNNotificationExtensionCategory`).
///
/// On Apple platforms the adopter is a `UIViewController`. Linux has no UIKit, so the
/// protocol does not require a view controller: the adopter is any class, and the
/// daemon's presenters render what it produces. Declared as Apple declares it:
/// `protocol UNNotificationContentExtension: NSObjectProtocol`, not isolated to an actor
/// (the host calls it on the main thread, as iOS does). Every method but
/// `didReceive(_ notification:)` is optional (default implementations below), matching
/// Apple's `@objc optional` requirements.
public protocol UNNotificationContentExtension: NSObjectProtocol {
    /// Configure the interface for `notification`. Called again while the interface is
    /// shown when a notification with the same identifier replaces it or a new one of the
    /// same thread arrives.
    func didReceive(_ notification: UNNotification)

    /// The person picked an action while the interface is shown; call `completion` with
    /// what happens next. Without this method the action goes to the app's delegate.
    func didReceive(_ response: UNNotificationResponse, completionHandler completion: @escaping @Sendable (UNNotificationContentExtensionResponseOption) -> Void)

    /// The `async` form of `didReceive(_:completionHandler:)`.
    func didReceive(_ response: UNNotificationResponse) async -> UNNotificationContentExtensionResponseOption

    /// The system-drawn play/pause button; `.none` by default.
    var mediaPlayPauseButtonType: UNNotificationContentExtensionMediaPlayPauseButtonType { get }
    /// Where the play/pause button goes, in the extension's coordinates.
    var mediaPlayPauseButtonFrame: CGRect { get }
    /// The button's tint as a CSS color string (Linux has no `UIColor`); nil for the default.
    var mediaPlayPauseButtonTintColor: String? { get }
    /// Start playing the media.
    func mediaPlay()
    /// Pause the media.
    func mediaPause()
}

private struct ExtensionCall: @unchecked Sendable {
    let `extension`: any UNNotificationContentExtension
    let response: UNNotificationResponse
}

extension UNNotificationContentExtension {
    public func didReceive(_ response: UNNotificationResponse, completionHandler completion: @escaping @Sendable (UNNotificationContentExtensionResponseOption) -> Void) {
        // As the Objective-C thunk of an imported `async` method: a task of its own, the
        // only user of the extension and the response once this method returned.
        let call = ExtensionCall(extension: self, response: response)
        Task {
            completion(await call.extension.didReceive(call.response))
        }
    }

    /// Default: forward the action to the app, as when the method is not implemented.
    public func didReceive(_ response: UNNotificationResponse) async -> UNNotificationContentExtensionResponseOption {
        .dismissAndForwardAction
    }

    public var mediaPlayPauseButtonType: UNNotificationContentExtensionMediaPlayPauseButtonType { .none }
    public var mediaPlayPauseButtonFrame: CGRect { .zero }
    public var mediaPlayPauseButtonTintColor: String? { nil }
    public func mediaPlay() {}
    public func mediaPause() {}
}
