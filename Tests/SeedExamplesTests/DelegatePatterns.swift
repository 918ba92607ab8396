// The delegate patterns of code written for iOS that must compile as written (issue 12 §2),
// in Swift 5 mode like such code: each fails to compile when UNUserNotificationCenterDelegate
// is main-actor isolated (Apple's is not). Tests: DelegatePatternTests.swift.

import Foundation
import UserNotifications
import TidingsApplication

/// The seeds' `AppDelegate` without UIKit: a plain class that creates its handler in a
/// property initializer (seed 000: `let notificationHandler = NotificationHandler()`).
class PlainAppDelegate {
    let notificationHandler = NotificationHandler()

    func applicationDidFinishLaunching() -> Bool {
        UNUserNotificationCenter.current().delegate = notificationHandler
        return true
    }
}

/// An `async` function that creates a delegate and installs it.
func installHandlerAsynchronously() async -> NotificationHandler {
    let handler = NotificationHandler()
    UNUserNotificationCenter.current().delegate = handler
    _ = await UNUserNotificationCenter.current().notificationSettings()
    return handler
}

/// Seed 000's `AppDelegate` with UIKit's names (TidingsApplication's `UIApplicationDelegate`,
/// main-actor as UIKit's), `UIResponder` aside.
class SeedAppDelegate: NSObject, UIApplicationDelegate {
    let notificationHandler = NotificationHandler()

    func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil) -> Bool {
        UNUserNotificationCenter.current().delegate = notificationHandler
        return true
    }
}

/// The common iOS pattern of a main-actor app delegate that is also the notification
/// center's delegate (Swift 5 mode accepts its main-actor methods as witnesses, as on iOS).
class AppDelegateAsNotificationDelegate: NSObject, UIApplicationDelegate, UNUserNotificationCenterDelegate {
    var presented: [String] = []

    func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil) -> Bool {
        UNUserNotificationCenter.current().delegate = self
        return true
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping (UNNotificationPresentationOptions) -> Void) {
        presented.append(notification.request.identifier)
        completionHandler([.banner, .sound])
    }
}

/// A delegate built off the main actor, in a detached task, then handed over.
func makeHandlerOffTheMainActor() async -> NotificationHandler {
    await Task.detached { NotificationHandler() }.value
}
