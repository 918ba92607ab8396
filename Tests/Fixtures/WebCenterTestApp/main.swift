// The app of the browser tests (Tests/Browser): it asks for authorization, registers a
// category with buttons and a text reply, then adds the notifications its standard input
// describes (one JSON object a line) and prints what its delegate receives.
//
//   {"id": "m1", "title": "…", "body": "…", "thread": "t", "category": "message",
//    "image": "/path/to/file.png", "clip": [x, y, w, h], "time": 1 | {"value": 1, "timescale": 1},
//    "summaryArgument": "Ann", "relevance": 0.5,
//    "level": "timeSensitive", "sound": "default" | "<name>", "userInfo": {…}}
//   {"bulk": 10000, "threads": 100}      adds that many, spread over that many threads
//
//   {"settings": true}                   prints the app's notification settings
//
// Output: "authorized <bool>", "added <id> <ms since 1970 before add>", "response <id>
// action=<identifier> text=<text>", "openSettings".
import Foundation
import UserNotifications

final class Delegate: NSObject, UNUserNotificationCenterDelegate {
    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification) async -> UNNotificationPresentationOptions {
        [.banner, .list, .sound, .badge]
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse) async {
        let text = (response as? UNTextInputNotificationResponse).map { " text=\($0.userText)" } ?? ""
        say("response \(response.notification.request.identifier) action=\(response.actionIdentifier)\(text)")
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, openSettingsFor notification: UNNotification?) {
        say("openSettings")
    }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func milliseconds() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

func content(_ item: [String: Any]) throws -> UNMutableNotificationContent {
    let content = UNMutableNotificationContent()
    content.title = item["title"] as? String ?? ""
    content.subtitle = item["subtitle"] as? String ?? ""
    content.body = item["body"] as? String ?? ""
    content.threadIdentifier = item["thread"] as? String ?? ""
    content.categoryIdentifier = item["category"] as? String ?? ""
    content.summaryArgument = item["summaryArgument"] as? String ?? ""
    content.summaryArgumentCount = item["summaryArgumentCount"] as? Int ?? 0
    content.relevanceScore = item["relevance"] as? Double ?? 0
    if let userInfo = item["userInfo"] as? [String: Any] { content.userInfo = userInfo }
    if let badge = item["badge"] as? Int { content.badge = NSNumber(value: badge) }
    switch item["level"] as? String {
    case "passive": content.interruptionLevel = .passive
    case "timeSensitive": content.interruptionLevel = .timeSensitive
    case "critical": content.interruptionLevel = .critical
    default: break
    }
    switch item["sound"] as? String {
    case nil: break
    case "default": content.sound = .default
    case let name?: content.sound = UNNotificationSound(named: UNNotificationSoundName(rawValue: name))
    }
    if let image = item["image"] as? String {
        var options: [AnyHashable: Any] = [:]
        if let clip = item["clip"] as? [Double], clip.count == 4 {
            options[UNNotificationAttachmentOptionsThumbnailClippingRectKey] = ["X": clip[0], "Y": clip[1], "Width": clip[2], "Height": clip[3]]
        }
        if let time = item["time"] {   // a number, or a CMTime dictionary {"value", "timescale"}
            options[UNNotificationAttachmentOptionsThumbnailTimeKey] = time
        }
        content.attachments = [try UNNotificationAttachment(identifier: "image", url: URL(fileURLWithPath: image), options: options)]
    }
    return content
}

@main
struct WebCenterTestApp {
    static func main() async throws {
        let center = UNUserNotificationCenter.current()
        let delegate = Delegate()
        center.delegate = delegate
        // WEB_TEST_PROVISIONAL=1: ask for provisional authorization (no prompt, quiet delivery).
        var options: UNAuthorizationOptions = [.alert, .sound, .badge, .providesAppNotificationSettings]
        if ProcessInfo.processInfo.environment["WEB_TEST_PROVISIONAL"] != nil { options.insert(.provisional) }
        let granted = try await center.requestAuthorization(options: options)
        say("authorized \(granted)")
        let reply = UNTextInputNotificationAction(identifier: "reply", title: "Reply", options: [], textInputButtonTitle: "Send", textInputPlaceholder: "Say something…")
        let like = UNNotificationAction(identifier: "like", title: "Like", options: [])
        let archive = UNNotificationAction(identifier: "archive", title: "Archive", options: [.authenticationRequired])
        let delete = UNNotificationAction(identifier: "delete", title: "Delete", options: [.destructive])
        center.setNotificationCategories([
            UNNotificationCategory(identifier: "message", actions: [reply, like, archive, delete], intentIdentifiers: [],
                                   hiddenPreviewsBodyPlaceholder: "%u new messages", categorySummaryFormat: "%u more messages from %@",
                                   options: [.customDismissAction]),
            // The category of Tests/Fixtures/TestContentExtension in the browser test's manifest.
            UNNotificationCategory(identifier: "fixture", actions: [UNNotificationAction(identifier: "play-self", title: "Play", options: [])],
                                   intentIdentifiers: [], options: []),
        ])
        _ = await center.notificationCategories()
        say("ready")
        // Standard input is read on a thread of its own: the main actor stays free for the delegate.
        let lines = AsyncStream<String> { continuation in
            Thread.detachNewThread {
                while let line = readLine() { continuation.yield(line) }
                continuation.finish()
            }
        }
        for await line in lines {
            guard let data = line.data(using: .utf8), let item = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { continue }
            do {
                if item["settings"] != nil {
                    let settings = await center.notificationSettings()
                    say("settings sound=\(settings.soundSetting.rawValue) alertStyle=\(settings.alertStyle.rawValue)")
                    continue
                }
                if let bulk = item["bulk"] as? Int {
                    let threads = max(1, item["threads"] as? Int ?? 1)
                    for index in 0..<bulk {
                        let body = UNMutableNotificationContent()
                        body.title = "Bulk \(index)"
                        body.body = "Notification \(index) of \(bulk)"
                        body.threadIdentifier = "bulk-\(index % threads)"
                        try await center.add(UNNotificationRequest(identifier: "bulk-\(index)", content: body, trigger: nil))
                    }
                    say("bulk done \(bulk)")
                    continue
                }
                let id = item["id"] as? String ?? UUID().uuidString
                let request = UNNotificationRequest(identifier: id, content: try content(item), trigger: nil)
                let before = milliseconds()
                try await center.add(request)
                say("added \(id) \(before)")
            } catch {
                say("error \(error)")
            }
        }
        // Standard input closed: stay until the test stops the process.
        while true { try await Task.sleep(for: .seconds(3600)) }
        withExtendedLifetime(delegate) {}
    }
}
