import Foundation

/// The principal class of a notification service extension: modifies the content of a
/// remote notification (`aps.mutable-content: 1` with an alert) before it is shown —
/// download media, decrypt, rewrite the text.
///
/// Subclass it and override `didReceive(_:withContentHandler:)`; call the content handler
/// exactly once with the content to show (usually a modified `mutableCopy()` of
/// `request.content`). If the handler is not called within about 30 seconds,
/// `serviceExtensionTimeWillExpire()` is called as a last chance; if nothing is delivered,
/// the original content is shown.
///
/// The daemon starts the extension's executable (declared in the app's manifest) and
/// drives an instance of this class; the same process may receive several requests, each
/// on a new instance, as on iOS. The executable's `main` hands control to
/// `UNNotificationServiceExtensionMain(_:)` with the subclass; both methods run on the main
/// thread (the main actor). See docs/service-extensions.md.
open class UNNotificationServiceExtension: NSObject {
    /// Required: the entry point creates an instance of the principal class per request.
    public required override init() {
        super.init()
    }

    /// Called with the original request. The default implementation delivers the
    /// content unchanged.
    open func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        contentHandler(request.content)
    }

    /// Called just before the extension's time runs out. The default does nothing (the
    /// original content is shown unless the handler was called).
    open func serviceExtensionTimeWillExpire() {}
}
