// A notification content extension for tests: renders, or misbehaves, as the notification's
// `userInfo["fixture"]` says when it opens, and as the action's identifier says afterwards.
//
// Open ("fixture"): "render" (the default: title, body, attachment sources, its bundle ids,
// the main thread, every notification this process has seen), "crash", "hang", "garbage",
// "html" (`userInfo["bytes"]` bytes of HTML), "title" (a title of `userInfo["bytes"]` bytes),
// "actions" (`userInfo["count"]` actions via `notificationActions`), "media" (an overlay
// play/pause button, tint `userInfo["tint"]`), "foreign" (a message for another view),
// "spam" (`userInfo["count"]` calls of `setNeedsDisplay()`), "interactive" (buttons whose
// events add their value to the count, through `view.eventHandler`).
//
// Actions: "keep" (count, `.doNotDismiss`), "close" (`.dismiss`), "forward"
// (`.dismissAndForwardAction`), "reply" (shows the text, `.doNotDismiss`), "later"
// (completes on a later turn of the main queue), "hang", "crash", "set-actions" (replaces
// the buttons with "added"), "default" (`performNotificationDefaultAction()`),
// "dismiss-context" (`dismissNotificationContentExtension()`), "play-self"
// (`mediaPlayingStarted()`); any other: `.dismissAndForwardAction`.
@_spi(Tidings) import UserNotifications
import UserNotificationsUI
import Foundation

/// Every notification this process has seen (touched on the main thread only).
enum Seen { nonisolated(unsafe) static var identifiers: [String] = [] }

/// Hands the view controller to a later turn of the main queue.
struct MainThreadBox<Value>: @unchecked Sendable { let value: Value }

final class FixtureViewController: UNNotificationContentViewController, UNNotificationContentExtension {
    var count = 0
    var notification: UNNotification?

    func didReceive(_ notification: UNNotification) {
        self.notification = notification
        let content = notification.request.content
        Seen.identifiers.append(notification.request.identifier)
        let bytes = content.userInfo["bytes"] as? Int ?? 0
        switch content.userInfo["fixture"] as? String ?? "render" {
        case "crash":
            fatalError("the fixture crashes on request")
        case "hang":
            while true { sleep(60) }
        case "garbage":
            try? ServiceExtensionChannel.current?.writeRaw(frame: Array("this is not JSON".utf8))
        case "html":
            view.html = String(repeating: "x", count: bytes)
        case "title":
            title = String(repeating: "t", count: bytes)
            render()
        case "actions":
            let count = content.userInfo["count"] as? Int ?? 1
            extensionContext?.notificationActions = (0..<count).map { UNNotificationAction(identifier: "a\($0)", title: "A \($0)") }
            render()
        case "foreign":
            let reply = #"{"event": {"session": 999999, "event": {"dismiss": {}}}}"#
            try? ServiceExtensionChannel.current?.writeRaw(frame: Array(reply.utf8))
            render()
        case "interactive":
            let buttons = #"<button id="add" data-tidings-event data-value="5">Add five</button>"#
            view.eventHandler = { [unowned self] element, value in
                count += Int(value) ?? 0
                render("<p>event=\(UNNotificationContentView.escape(element)):\(UNNotificationContentView.escape(value))</p>" + buttons)
            }
            render(buttons)
        case "spam":
            render()
            for _ in 0..<(content.userInfo["count"] as? Int ?? 100) { view.setNeedsDisplay() }
        default:
            title = "Custom: \(content.title)"
            render()
        }
    }

    func render(_ extra: String = "") {
        guard let notification else { return }
        let content = notification.request.content
        let environment = ProcessInfo.processInfo.environment
        let sources = content.attachments.map { attachment -> String in
            let readable = attachment.url.startAccessingSecurityScopedResource() && FileManager.default.isReadableFile(atPath: attachment.url.path)
            attachment.url.stopAccessingSecurityScopedResource()
            return "\(view.source(for: attachment.url) ?? "none") readable=\(readable)"
        }
        view.html = """
            <h1>\(UNNotificationContentView.escape(content.title))</h1><p>\(UNNotificationContentView.escape(content.body))</p>
            <ul>\(sources.map { "<li>\($0)</li>" }.joined())</ul>
            <p>count=\(count) main=\(Thread.isMainThread) extension=\(environment["TIDINGS_EXTENSION_BUNDLE_ID"] ?? "?") app=\(environment["TIDINGS_APP_BUNDLE_ID"] ?? "?")</p>
            <p>seen=\(Seen.identifiers.joined(separator: ","))</p>\(extra)
            """
    }

    func didReceive(_ response: UNNotificationResponse, completionHandler completion: @escaping @Sendable (UNNotificationContentExtensionResponseOption) -> Void) {
        switch response.actionIdentifier {
        case "keep":
            count += 1
            render()
            completion(.doNotDismiss)
        case "close":
            completion(.dismiss)
        case "forward":
            completion(.dismissAndForwardAction)
        case "reply":
            render("<p>reply=\(UNNotificationContentView.escape((response as? UNTextInputNotificationResponse)?.userText ?? "none"))</p>")
            completion(.doNotDismiss)
        case "later":
            let box = MainThreadBox(value: self)
            DispatchQueue.main.async {
                box.value.count += 10
                box.value.render()
                completion(.doNotDismiss)
            }
        case "hang":
            break
        case "crash":
            fatalError("the fixture crashes on an action")
        case "set-actions":
            extensionContext?.notificationActions = [UNNotificationAction(identifier: "added", title: "Added")]
            completion(.doNotDismiss)
        case "default":
            extensionContext?.performNotificationDefaultAction()
            completion(.doNotDismiss)
        case "dismiss-context":
            extensionContext?.dismissNotificationContentExtension()
            completion(.doNotDismiss)
        case "play-self":
            extensionContext?.mediaPlayingStarted()
            completion(.doNotDismiss)
        default:
            completion(.dismissAndForwardAction)
        }
    }

    var mediaPlayPauseButtonType: UNNotificationContentExtensionMediaPlayPauseButtonType {
        notification?.request.content.userInfo["fixture"] as? String == "media" ? .overlay : .none
    }
    var mediaPlayPauseButtonFrame: CGRect { CGRect(x: 10, y: 20, width: 44, height: 44) }
    var mediaPlayPauseButtonTintColor: String? { notification?.request.content.userInfo["tint"] as? String }
    func mediaPlay() { render("<p>playing</p>") }
    func mediaPause() { render("<p>paused</p>") }
}

UNNotificationContentExtensionMain(FixtureViewController.self)
