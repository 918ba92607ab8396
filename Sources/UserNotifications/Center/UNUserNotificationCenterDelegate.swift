import Foundation

/// Receives notifications that arrive while the app is in the foreground, the person's
/// responses, and requests to show the app's notification settings.
///
/// Declared as Apple declares it: `protocol UNUserNotificationCenterDelegate: NSObjectProtocol`,
/// neither `@MainActor` nor `Sendable`, with `@Sendable` completion handlers. So a plain class
/// adopts it (the seeds' `NotificationHandler`), a nonisolated `AppDelegate` holds one in a
/// `let`, and an `async` function creates one. A main-actor class adopts it as on Apple
/// platforms: with `nonisolated` methods, or with an isolated conformance
/// (`@MainActor UNUserNotificationCenterDelegate`) in Swift 6 mode.
///
/// Apple's protocol has `@objc optional` methods. Here every method has a default
/// implementation, so a conforming type implements only what it needs, with Apple's
/// signatures. Each completion-handler method also has an `async` form; implement either
/// (as with Apple's imported `async` forms, the `async` method runs in a task of its own).
/// Defaults: `willPresent` presents nothing (`[]`, as Apple does without the method),
/// `didReceive` completes at once, `openSettingsFor` does nothing.
///
/// The center calls the delegate **on the main actor** (Apple calls it on the main
/// thread), so the process must service the main actor: an `async` `main`, or
/// `RunLoop.main.run()` / `dispatchMain()`.
public protocol UNUserNotificationCenterDelegate: NSObjectProtocol {
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

/// Hands a delegate and its argument to the task that runs an `async` requirement, as the
/// Objective-C thunk of an imported `async` method does on Apple platforms: the task is
/// the only one using them after the synchronous requirement returned.
struct DelegateCall<Argument>: @unchecked Sendable {
    let delegate: any UNUserNotificationCenterDelegate
    let argument: Argument
}

extension UNUserNotificationCenterDelegate {
    public func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void) {
        let call = DelegateCall(delegate: self, argument: notification)
        Task {
            completionHandler(await call.delegate.userNotificationCenter(center, willPresent: call.argument))
        }
    }

    public func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification) async -> UNNotificationPresentationOptions {
        []
    }

    public func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        let call = DelegateCall(delegate: self, argument: response)
        Task {
            await call.delegate.userNotificationCenter(center, didReceive: call.argument)
            completionHandler()
        }
    }

    public func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse) async {}

    public func userNotificationCenter(_ center: UNUserNotificationCenter, openSettingsFor notification: UNNotification?) {}
}
