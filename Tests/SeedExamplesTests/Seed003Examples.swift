// Seed 003 ("NotificationSampleiOS10"): its Swift code, verbatim, wrapped in the type the
// post implies (a view controller with `center` and `curIdentifier`). Lines that use UIKit
// are replaced by a `// UIKit removed:` comment quoting them. Tests: Seed003Tests.swift.

import Foundation
import UserNotifications

@MainActor final class Seed003ViewController {
    var center: UNUserNotificationCenter!
    var curIdentifier: String?
    // UIKit stand-in: the post's image view (SeedHelpers.swift).
    var eventImage = UIImageView()
    /// Which API `adapt()` chose (fills the seed's `// Use UserNotification` placeholder).
    var adaptedTo: String?

    // MARK: 注册通知 (seed lines 17–21)

    func registerNotification() {
        center = UNUserNotificationCenter.current()
        center.requestAuthorization(options: [.alert, .sound])     { (granted, error) in
            // Enable or disable features based on authorization
            print("adu authorization completion: \(granted)")
        }
    }

    // MARK: Notification settings (seed lines 25–27)

    func printSettings() {
        center.getNotificationSettings { (UNNotificationSettings) in
            print("adu getNotificationSettings: \(UNNotificationSettings)")
        }
    }

    // MARK: 创建并且发送一条本地通知 (seed lines 43–65)

    func addLocalNotification(identifier: String = "FiveSecond", body:String = "Hello_message_body") {
        let content = UNMutableNotificationContent()
        content.title = NSString.localizedUserNotificationString(forKey: "Hello!", arguments: nil)
        content.subtitle = "副标题看看"
        content.body = NSString.localizedUserNotificationString(forKey:body, arguments: nil)
        content.sound = UNNotificationSound.default() // Deliver the notification in five seconds.
        content.userInfo = ["name": "Adu Test"]

        if identifier == "FiveSecond" {
            if let imageURL = Bundle.main.url(forResource: "name", withExtension: "jpg"),
                let attachment = try? UNNotificationAttachment(identifier: "imageAttachment", url: imageURL, options: nil)
            {
                content.attachments = [attachment]
            }
        }

        let trigger = UNTimeIntervalNotificationTrigger(timeInterval: 5, repeats: false)
        let request = UNNotificationRequest(identifier: identifier, content: content, trigger: trigger) // Schedule the notification.
        center.add(request)

        self.curIdentifier = identifier

        print("adu add a location notification");
    }

    // MARK: 读取附件 (seed lines 77–83)

    func readAttachment(of notification: UNNotification) {
        let content = notification.request.content
        if let attachment = content.attachments.first {
            if attachment.url.startAccessingSecurityScopedResource() {
                // The seed's `attachment.url.path!`: `URL.path` was optional in Swift 3's betas.
                eventImage.image = UIImage(contentsOfFile: attachment.url.path)
                attachment.url.stopAccessingSecurityScopedResource()
            }
        }
    }

    // MARK: 适配 (seed lines 176–178)

    func adapt() {
        if #available(iOS 10.0, *) {
            // Use UserNotification
            adaptedTo = "UserNotifications"
        }
    }
}
