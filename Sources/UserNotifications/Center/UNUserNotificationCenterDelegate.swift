import Foundation

/// Receives notifications that arrive while the app is in the foreground, the person's
/// responses, and requests to show the app's notification settings.
///
/// Apple's protocol has `@objc optional` methods. Here every method has a default
/// implementation, so a conforming type implements only what it needs, with Apple's
/// signatures. Each completion-handler method also has an `async` form; implement either.
/// Defaults: `willPresent` presents nothing (`[]`, as Apple does without the method),
/// `didReceive` completes at once, `openSettingsFor` does nothing.
///
/// The center calls the delegate **on the main actor** (Apple calls it on the main
/// thread), so the process must service the main actor: an `async` `main`, or
/// `RunLoop.main.run()` / `dispatchMain()`. Conforming classes are main-actor-isolated,
/// like the `UIApplicationDelegate`s that usually adopt this protocol.
@MainActor
public protocol UNUserNotificationCenterDelegate: NSObjectProtocol, Sendable {
    /// A notification arrived while the app is in the foreground. Call the handler with
    /// how to present it; `[]` shows nothing.
    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void)

    /// The `async` form of `userNotificationCenter(_:willPresent:withCompletionHandler:)`.
    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification) async -> UNNotificationPresentationOptions

    /// The person responded: tapped (`UNNotificationDefaultActionIdentifier`), picked an
    /// action, typed text (`UNTextInputNotificationResponse`) or dismissed
    /// (`UNNotificationDismissActionIdentifier`, only with `.customDismissAction`). Call
    /// the handler when done.
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void)

    /// The `async` form of `userNotificationCenter(_:didReceive:withCompletionHandler:)`.
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse) async

    /// The person asked for the app's own notification settings (the app requested
    /// `.providesAppNotificationSettings`). `notification` is nil when asked from the
    /// system settings rather than from a notification.
    func userNotificationCenter(_ center: UNUserNotificationCenter, openSettingsFor notification: UNNotification?)
}

extension UNUserNotificationCenterDelegate {
    public func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void) {
        Task { @MainActor in
            completionHandler(await self.userNotificationCenter(center, willPresent: notification))
        }
    }

    public func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification) async -> UNNotificationPresentationOptions {
        []
    }

    public func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        Task { @MainActor in
            await self.userNotificationCenter(center, didReceive: response)
            completionHandler()
        }
    }

    public func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse) async {}

    public func userNotificationCenter(_ center: UNUserNotificationCenter, openSettingsFor notification: UNNotification?) {}
}
