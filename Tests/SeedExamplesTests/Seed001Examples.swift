// Seed 001 ("Notification for iOS 10 — 关于iOS 10 推送的那些事"): its Swift code blocks,
// verbatim, wrapped in the functions and types the post implies. Lines that use UIKit are
// replaced by a `// UIKit removed:` comment quoting them. Tests: Seed001Tests.swift.
//
// Not compiled, because they are UIKit only (push registration lives in UIKit, not in
// UserNotifications):
//   UIApplication.shared.registerForRemoteNotifications()
//   func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) { … }

import Foundation
import UserNotifications

enum Seed001 {
    // MARK: 权限申请 (seed line 29)

    @MainActor static func requestAuthorization() {
        UNUserNotificationCenter.current().requestAuthorization(options: [.alert, .sound, .badge]) {
                    granted, error in
                    if granted {
                        // UIKit removed: UIApplication.shared.registerForRemoteNotifications()
                    } else {
                        if let error = error {
                            // UIKit removed: UIAlertController.showConfirmAlert(message: error.localizedDescription, in: self)
                        }
                    }
                }
    }

    // MARK: 获取推送设置 (seed line 74)

    @MainActor static func printSettings() {
        UNUserNotificationCenter.current().getNotificationSettings {
            settings in
            print(settings.authorizationStatus) // .authorized | .denied | .notDetermined
            print(settings.badgeSetting) // .enabled | .disabled | .notSupported
            // etc...
        }
    }

    // MARK: 取消和更新推送内容 (seed line 140)

    @MainActor static func removeDelivered(content: UNNotificationContent) {
        let trigger = UNTimeIntervalNotificationTrigger(timeInterval: 3, repeats: false)
        let identifier = "com.onevcat.usernotification.notificationWillBeRemovedAfterDisplayed"
        let request = UNNotificationRequest(identifier: identifier, content: content, trigger: trigger)

        UNUserNotificationCenter.current().add(request) { error in
            if error != nil {
                print("Notification request added: \(identifier)")
            }
        }

        delay(4) {
            print("Notification request removed: \(identifier)")
            UNUserNotificationCenter.current().removeDeliveredNotifications(withIdentifiers: [identifier])
        }
    }

    // MARK: 处理推送 (seed line 165)

    class NotificationHandler: NSObject, UNUserNotificationCenterDelegate {
        func userNotificationCenter(_ center: UNUserNotificationCenter,
                           willPresent notification: UNNotification,
                           withCompletionHandler completionHandler: @escaping (UNNotificationPresentationOptions) -> Void)
        {
            completionHandler([.alert, .sound])

            // 如果不想显示某个通知，可以直接用空 options 调用 completionHandler:
            // completionHandler([])
        }
    }

    // MARK: 对通知的响应 (seed lines 186, 195)

    class SimpleResponder: NSObject, UNUserNotificationCenterDelegate {
        func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping () -> Void) {
            completionHandler()
        }
    }

    class NameResponder: NSObject, UNUserNotificationCenterDelegate {
        func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping () -> Void) {
            if let name = response.notification.request.content.userInfo["name"] as? String {
                print("I know it's you! \(name)")
            }
            completionHandler()
        }
    }

    // MARK: 截取并修改通知内容 (seed line 215)

    class NotificationService: UNNotificationServiceExtension {

        var contentHandler: ((UNNotificationContent) -> Void)?
        var bestAttemptContent: UNMutableNotificationContent?

        // 1
        override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
            self.contentHandler = contentHandler
            bestAttemptContent = (request.content.mutableCopy() as? UNMutableNotificationContent)

            if let bestAttemptContent = bestAttemptContent {
                if request.identifier == "mutableContent" {
                    bestAttemptContent.body = "\(bestAttemptContent.body), onevcat"
                }
                contentHandler(bestAttemptContent)
            }
        }

        // 2
        override func serviceExtensionTimeWillExpire() {
            // Called just before the extension will be terminated by the system.
            // Use this as an opportunity to deliver your "best attempt" at modified content, otherwise the original push payload will be used.
            if let contentHandler = contentHandler, let bestAttemptContent =  bestAttemptContent {
                contentHandler(bestAttemptContent)
            }
        }
    }

    // MARK: 访问附件 (seed line 301)

    @MainActor static func readAttachment(of notification: UNNotification) {
        let content = notification.request.content
        if let attachment = content.attachments.first {
            if attachment.url.startAccessingSecurityScopedResource() {
                // UIKit removed: eventImage.image = UIImage(contentsOfFile: attachment.url.path!)
                attachment.url.stopAccessingSecurityScopedResource()
            }
        }
    }
}
