// Seed 000 §3.3: the content extension that shows a notification's items (a title, a text
// and an attachment image each) and switches between them on the "switch" action; "open"
// forwards the action to the app, "dismiss" closes the view. The seed's Swift, with UIKit's
// image view, label and text view replaced by the HTML of the extension's view
// (docs/content-extensions.md). Declared in Examples/SampleApp/manifest.json for the
// category "customUI"; the remote payload is Examples/ContentExtension/items-push.json.
import Foundation
import UserNotificationsUI

/// The seed's model: one item of the notification.
struct NotificationPresentItem {
    let url: URL
    let title: String
    let text: String
}

class NotificationViewController: UNNotificationContentViewController, UNNotificationContentExtension {
    var items: [NotificationPresentItem] = []
    var index: Int = 0

    func didReceive(_ notification: UNNotification) {
        let content = notification.request.content
        items = []
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
        guard index < items.count else {
            view.html = "<p class=\"empty\">No items</p>"
            return
        }
        let item = items[index]
        var image = ""
        if item.url.startAccessingSecurityScopedResource() {
            // UIKit: imageView.image = UIImage(contentsOfFile: item.url.path)
            if let source = view.source(for: item.url) {
                image = "<img src=\"\(UNNotificationContentView.escape(source))\" alt=\"\">"
            }
            item.url.stopAccessingSecurityScopedResource()
        }
        // UIKit: label.text = item.title; textView.text = item.text
        view.html = """
            <style>
            body { font: 15px -apple-system, system-ui, sans-serif; }
            img { display: block; width: 100%; max-height: 60vh; object-fit: cover; }
            h2 { margin: 8px 12px 4px; font-size: 17px; }
            p { margin: 0 12px 8px; color: #444; }
            </style>
            \(image)<h2 id="title">\(UNNotificationContentView.escape(item.title))</h2>
            <p id="text">\(UNNotificationContentView.escape(item.text))</p>
            <p id="position">\(index + 1) / \(items.count)</p>
            """
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

UNNotificationContentExtensionMain(NotificationViewController.self)
