// Seed 000 ("iOS10中的通知", onevcat): its Swift code blocks, verbatim, wrapped in the
// functions and types the post implies. Lines that use UIKit are replaced by a
// `// UIKit removed:` comment quoting them. Tests: Seed000Tests.swift.

import Foundation
#if canImport(FoundationNetworking)
@preconcurrency import FoundationNetworking // URLSession lives here on Linux; the seed predates Sendable
#endif
import UserNotifications
import UserNotificationsUI

// MARK: 申请权限 (seed line 60)

@MainActor func seed000_requestAuthorization() {
    UNUserNotificationCenter.current().requestAuthorization(options: [.alert, .sound, .badge]) {
        granted, error in
        if granted {
            // 用户允许进行通知
        }
    }
}

// MARK: 时间戳通知 (seed line 158)

@MainActor func seed000_timeIntervalNotification() {
    // 1. 创建通知内容
    let content = UNMutableNotificationContent()
    content.title = "时间戳通知"
    content.body = "我的第一条通知"
    // 2. 创建发送触发器
    let trigger = UNTimeIntervalNotificationTrigger(timeInterval: 5, repeats: false)
    // 3. 发送请求标识符
    let requestIdentifier = "com.onevcat.usernotification.myFirstNotification"
    // 4. 创建一个发送请求
    let request = UNNotificationRequest(identifier: requestIdentifier, content: content, trigger: trigger)
    // 将请求添加到发送中心
    UNUserNotificationCenter.current().add(request) { error in
        if error == nil {
            print("Time Interval Notification scheduled: \(requestIdentifier)")
        }
    }
}

// MARK: 取消还未展示的通知 (seed line 223)

@MainActor func seed000_removePending(title1Content: UNNotificationContent) {
    let trigger = UNTimeIntervalNotificationTrigger(timeInterval: 3, repeats: false)
    let identifier = UserNotificationType.pendingRemoval.rawValue
    let request = UNNotificationRequest(identifier: identifier, content: title1Content, trigger: trigger)

    UNUserNotificationCenter.current().add(request) { error in
        if let error = error {
            // UIKit removed: UIAlertController.showConfirmAlert(message: error.localizedDescription, in: self)
        } else {
            print("通知请求\(identifier)被安排发送")
        }
    }
    delay(2) {
        print("通知请求\(identifier)已经被移除")
        UNUserNotificationCenter.current().removePendingNotificationRequests(withIdentifiers: [identifier])
    }
}

// MARK: 移除已经展示过的通知 (seed line 260)

@MainActor func seed000_removeDelivered(content: UNNotificationContent) {
    let trigger = UNTimeIntervalNotificationTrigger(timeInterval: 3, repeats: false)
    let identifier = "com.onevcat.usernotification.notificationWillBeRemovedAfterDisplayed"
    let request = UNNotificationRequest(identifier: identifier, content: content, trigger: trigger)
    UNUserNotificationCenter.current().add(request) {
        error in
        if error != nil {
            print("通知请求:\(identifier)已被安排发出")
        }
    }
    delay(4) {
        print("通知请求:\(identifier)已经被移除")
        UNUserNotificationCenter.current().removeDeliveredNotifications(withIdentifiers: [identifier])
    }
}

// MARK: 更新通知 (seed line 295)

@MainActor func seed000_update(request: UNNotificationRequest, identifier: String, newContent: UNNotificationContent) {
    UNUserNotificationCenter.current().add(request) { error in
        if error == nil {
            print("通知请求\(identifier)已被安排发出")
        }
    }
    delay(2) {
        let newTrigger = UNTimeIntervalNotificationTrigger(timeInterval: 1, repeats: false)
        let newRequest = UNNotificationRequest(identifier: identifier, content:newContent, trigger: newTrigger)
        UNUserNotificationCenter.current().add(newRequest) { error in
            if error == nil {
                print("通知\(identifier)已经被更新")
            }
        }
    }
}

// MARK: 应用内展示通知 (seed lines 341, 363)

class NotificationHandler: NSObject, UNUserNotificationCenterDelegate {
    func userNotificationCenter(_ center: UNUserNotificationCenter,
                       willPresent notification: UNNotification,
                       withCompletionHandler completionHandler: @escaping (UNNotificationPresentationOptions) -> Void)
    {
        completionHandler([.alert, .sound])

        // 如果不想显示某个通知，可以直接用空 options 调用 completionHandler:
        // completionHandler([])
    }

    // 对通知进行响应 (seed line 383)
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping () -> Void) {
        completionHandler()
    }
}

// UIKit removed: `class AppDelegate: UIResponder, UIApplicationDelegate {` — the same class
// without UIKit; UIApplicationDelegate would make it @MainActor.
@MainActor class AppDelegate {
    let notificationHandler = NotificationHandler()
    // UIKit removed: `func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [NSObject: AnyObject]?) -> Bool {`
    // — the same method without the UIApplication parameter.
    func application(didFinishLaunchingWithOptions launchOptions: [NSObject: AnyObject]?) -> Bool {
        UNUserNotificationCenter.current().delegate = notificationHandler
        return true
    }
}

// MARK: Actionable 通知 (seed lines 419, 509)

private func registerNotificationCategory() {
    let saySomethingCategory: UNNotificationCategory = {
        let inputAction = UNTextInputNotificationAction(
            identifier: "action.input",
            title: "输入",
            options: [.foreground],
            textInputButtonTitle: "发送",
            textInputPlaceholder: "你想说什么...")

        let goodbyeAction = UNNotificationAction(
            identifier: "action.goodbye",
            title: "再见",
            options: [.foreground])

        let cancelAction = UNNotificationAction(
            identifier: "action.cancel",
            title: "取消",
            options: [.destructive])

        return UNNotificationCategory(identifier:"saySomethingCategory", actions: [inputAction, goodbyeAction, cancelAction], intentIdentifiers: [], options: [.customDismissAction])
    }()
    UNUserNotificationCenter.current().setNotificationCategories([saySomethingCategory])
}

@MainActor func seed000_registerNotificationCategory() {
    registerNotificationCategory()
}

class ActionableNotificationHandler: NSObject, UNUserNotificationCenterDelegate {
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping () -> Void) {
        if let category = UserNotificationCategoryType(rawValue: response.notification.request.content.categoryIdentifier) {
            switch category {
            case .saySomething:
                handleSaySomthing(response: response)
            }
        }
        completionHandler()
    }

    private func handleSaySomthing(response: UNNotificationResponse) {
        let text: String
        if let actionType = SaySomethingCategoryAction(rawValue: response.actionIdentifier) {
            switch actionType {
            case .input: text = (response as! UNTextInputNotificationResponse).userText
            case .goodbye: text = "再见"
            case .none: text = ""
            }
        } else {
            text = ""
        }
        if !text.isEmpty {
            // UIKit removed: UIAlertController.showConfirmAlertFromTopViewController(message: "你刚刚说：\(text)")
        }
    }
}

// MARK: Notification Service Extension (seed line 581)

class NotificationService: UNNotificationServiceExtension {
    var contentHandler: ((UNNotificationContent) -> Void)?
    var bestAttemptContent: UNMutableNotificationContent?
    override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        self.contentHandler = contentHandler
        bestAttemptContent = (request.content.mutableCopy() as? UNMutableNotificationContent)

        if let bestAttemptContent = bestAttemptContent {
            if request.identifier == "mutableContent" {
                bestAttemptContent.body = "\(bestAttemptContent.body), 科比·布莱恩特"
            }
            contentHandler(bestAttemptContent)
        }
    }
    override func serviceExtensionTimeWillExpire() {
        if let contentHandler = contentHandler, let bestAttemptContent =  bestAttemptContent {
            contentHandler(bestAttemptContent)
        }
    }
}

// MARK: 多媒体内容 (seed line 631)

@MainActor func seed000_mediaAttachmentFromBundle() -> UNMutableNotificationContent {
    let content = UNMutableNotificationContent()
    content.title = "精彩瞬间"
    content.body = "科比·布莱恩特！夺冠时刻！"
    if let imageURL = Bundle.main.url(forResource: "image", withExtension: "jpg"),
       let attachment = try? UNNotificationAttachment(identifier: "imageAttachment", url: imageURL, options: nil)
    {
        content.attachments = [attachment]
    }
    return content
}

// MARK: 下载远程图片并作为附件 (seed lines 694, 735)

class ImageNotificationService: UNNotificationServiceExtension {
    var contentHandler: ((UNNotificationContent) -> Void)?
    var bestAttemptContent: UNMutableNotificationContent?

    override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        self.contentHandler = contentHandler
        bestAttemptContent = (request.content.mutableCopy() as? UNMutableNotificationContent)
        if let bestAttemptContent = bestAttemptContent {
            if let imageURLString = bestAttemptContent.userInfo["image"] as? String,
               let URL = URL(string: imageURLString)
            {
                downloadAndSave(url: URL) { localURL in
                    if let localURL = localURL {
                        do {
                            let attachment = try UNNotificationAttachment(identifier: "image_downloaded", url: localURL, options: nil)
                            bestAttemptContent.attachments = [attachment]
                        } catch {
                            print(error)
                        }
                    }
                    contentHandler(bestAttemptContent)
                }
            }
        }
    }

    private func downloadAndSave(url: URL, handler: @escaping (_ localURL: URL?) -> Void) {
        let task = URLSession.shared.dataTask(with: url, completionHandler: {
            data, res, error in

            var localURL: URL? = nil

            if let data = data {
                let ext = (url.absoluteString as NSString).pathExtension
                let cacheURL = URL(fileURLWithPath: FileManager.default.cachesDirectory)
                let url = cacheURL.appendingPathComponent(url.absoluteString.md5).appendingPathExtension(ext)

                if let _ = try? data.write(to: url) {
                    localURL = url
                }
            }

            handler(localURL)
        })

        task.resume()
    }
}

// MARK: Notification Content Extension (seed lines 809, 870)

class NotificationViewController: NSObject, UNNotificationContentExtension {
    var items: [NotificationPresentItem] = []
    var index: Int = 0

    func didReceive(_ notification: UNNotification) {
        let content = notification.request.content
        if let items = content.userInfo["items"] as? [[String: AnyObject]] {
            for i in 0..<items.count {
                let item = items[i]
                guard let title = item["title"] as? String, let text = item["text"] as? String else {
                    continue
                }
                if i > content.attachments.count - 1 {
                    continue
                }
                let url = content.attachments[i].url

                let presentItem = NotificationPresentItem(url: url, title: title, text: text)
                self.items.append(presentItem)
            }
        }
        updateUI(index: 0)
    }

    private func updateUI(index: Int) {
        let item = items[index]
        if item.url.startAccessingSecurityScopedResource() {
            // UIKit removed: imageView.image = UIImage(contentsOfFile: item.url.path)
            item.url.stopAccessingSecurityScopedResource()
        }
        // UIKit removed: label.text = item.title
        // UIKit removed: textView.text = item.text
        self.index = index
    }

    func didReceive(_ response: UNNotificationResponse, completionHandler completion: @escaping (UNNotificationContentExtensionResponseOption) -> Void) {
        if response.actionIdentifier == "switch" {
            let nextIndex: Int
            if index == 0 {
                nextIndex = 1
            } else {
                nextIndex = 0
            }

            updateUI(index: nextIndex)
            completion(.doNotDismiss)
        } else if response.actionIdentifier == "open" {
            completion(.dismissAndForwardAction)
        } else if response.actionIdentifier == "dismiss" {
            completion(.dismiss)
        } else {
            completion(.dismissAndForwardAction)
        }
    }
}
