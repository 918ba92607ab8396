// The quick start's sample app: the seeds' local notifications, with a delegate that
// prints every response. Install it with `tidings apps install Examples/SampleApp/manifest.json`
// and run `.build/debug/SampleApp` while `tidings serve` runs.
//
//   SampleApp            ask for authorization, register categories, schedule the seeds'
//                        notifications (one of them drawn by the content extension of
//                        Examples/ContentExtension), then wait for responses
//   SampleApp --listen   only wait for responses (what the daemon's launch does)
//   SampleApp --remote   also register for remote notifications: prints "token <hex>"
//                        (push to it with `tidings push` or any APNs client) and every
//                        silent push it gets
import Foundation
import TidingsApplication
import UserNotifications

final class NotificationHandler: NSObject, UNUserNotificationCenterDelegate {
    // A foreground app decides how its notifications show (seed 000: `completionHandler([.alert, .sound])`).
    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void) {
        say("willPresent \(notification.request.identifier)")
        completionHandler([.banner, .list, .sound, .badge])
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        let identifier = response.notification.request.identifier
        if let textResponse = response as? UNTextInputNotificationResponse {
            say("response \(identifier) action=\(response.actionIdentifier) text=\(textResponse.userText)")
        } else if response.actionIdentifier == UNNotificationDefaultActionIdentifier {
            say("response \(identifier) action=tap\(response.notification.request.trigger is UNPushNotificationTrigger ? " remote" : "")")
        } else if response.actionIdentifier == UNNotificationDismissActionIdentifier {
            say("response \(identifier) action=dismiss")
        } else {
            say("response \(identifier) action=\(response.actionIdentifier)")
        }
        completionHandler()
    }
}

/// The app delegate's remote-notification part (UIKit's names, from TidingsApplication).
@MainActor
final class AppDelegate: UIApplicationDelegate {
    func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) {
        say("token \(deviceToken.map { String(format: "%02x", $0) }.joined())")
    }

    func application(_ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error) {
        say("remote registration failed: \(error)")
    }

    func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
                     fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void) {
        let keys = userInfo.keys.map { "\($0)" }.sorted().joined(separator: ",")
        say("silent push keys=\(keys)")
        completionHandler(.newData)
    }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data("SampleApp: \(line)\n".utf8))
}

/// Seed 000's actionable category: a text reply and two buttons.
func registerCategories(_ center: UNUserNotificationCenter) {
    let inputAction = UNTextInputNotificationAction(
        identifier: "action.input", title: "Input", options: [.foreground],
        textInputButtonTitle: "Send", textInputPlaceholder: "What do you want to say...")
    let goodbyeAction = UNNotificationAction(identifier: "action.goodbye", title: "Goodbye", options: [.foreground])
    let cancelAction = UNNotificationAction(identifier: "action.cancel", title: "Cancel", options: [.destructive])
    let category = UNNotificationCategory(
        identifier: "saySomethingCategory", actions: [inputAction, goodbyeAction, cancelAction],
        intentIdentifiers: [], options: [.customDismissAction])
    // Seed 000 §3.3: the category the content extension draws (the manifest's
    // UNNotificationExtensionCategory), with its three actions.
    let customUI = UNNotificationCategory(
        identifier: "customUI",
        actions: [UNNotificationAction(identifier: "switch", title: "Switch"),
                  UNNotificationAction(identifier: "open", title: "Open", options: [.foreground]),
                  UNNotificationAction(identifier: "dismiss", title: "Dismiss", options: [.destructive])],
        intentIdentifiers: [], options: [])
    center.setNotificationCategories([category, customUI])
}

func schedule(_ center: UNUserNotificationCenter) async throws {
    // Seed 000: 时间戳通知 — a time-interval trigger.
    let content = UNMutableNotificationContent()
    content.title = "时间戳通知"
    content.body = "我的第一条通知"
    let request = UNNotificationRequest(
        identifier: "com.onevcat.usernotification.myFirstNotification", content: content,
        trigger: UNTimeIntervalNotificationTrigger(timeInterval: 5, repeats: false))
    try await center.add(request)
    say("scheduled \(request.identifier) in 5 s")

    // Seed 000: an actionable notification in the saySomething category, delivered now.
    let actionable = UNMutableNotificationContent()
    actionable.title = "Say something"
    actionable.body = "Reply with text, or pick Goodbye"
    actionable.categoryIdentifier = "saySomethingCategory"
    actionable.sound = .default
    try await center.add(UNNotificationRequest(identifier: "saySomething", content: actionable, trigger: nil))
    say("scheduled saySomething now")

    // Seed 000 §3.3: two items, each a title, a text and an image; expanding the
    // notification runs the content extension, whose "switch" shows the other item.
    let items = UNMutableNotificationContent()
    items.title = "Two items"
    items.body = "Expand to see them"
    items.categoryIdentifier = "customUI"
    items.userInfo = ["items": [["title": "Blue", "text": "The first item"], ["title": "Orange", "text": "The second item"]]]
    // `add` moves attachment files into the store, as on iOS: attach copies.
    let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("items")
    do {
        items.attachments = try ["one", "two"].map { name in
            let copy = FileManager.default.temporaryDirectory.appendingPathComponent("\(UUID().uuidString).png")
            try FileManager.default.copyItem(at: folder.appendingPathComponent("\(name).png"), to: copy)
            return try UNNotificationAttachment(identifier: name, url: copy, options: nil)
        }
        try await center.add(UNNotificationRequest(identifier: "items", content: items, trigger: nil))
        say("scheduled items now")
    } catch {
        say("items not scheduled: \(error)")
    }
}

let center = UNUserNotificationCenter.current()
let handler = NotificationHandler()
center.delegate = handler
let listenOnly = CommandLine.arguments.contains("--listen")
let remote = CommandLine.arguments.contains("--remote")
say("started pid \(getpid())")
let appDelegate = AppDelegate()
UIApplication.shared.delegate = appDelegate

do {
    if !listenOnly {
        let granted = try await center.requestAuthorization(options: [.alert, .sound, .badge])
        say("authorization granted=\(granted)")
        registerCategories(center)
        if granted, !remote { try await schedule(center) }
    }
    if remote { UIApplication.shared.registerForRemoteNotifications() }
    say("waiting for responses")
    while true { try await Task.sleep(for: .seconds(3600)) }
} catch {
    say("error: \(error)")
    exit(1)
}
