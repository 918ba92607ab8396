// The images of seed 000 §3.3's items, for a remote notification: the payload carries
// `"items": [{"title": …, "text": …, "image": "https://…"}, …]` (Examples/ContentExtension/
// items-push.json); this step downloads each item's image in order and attaches it, so
// the content extension finds item i's image in `content.attachments[i]`, as the seed's
// code expects. An image that cannot be downloaded is left out (and the items after it
// move up, as in the seed). Examples/SampleService runs it.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import UserNotifications

open class ItemImagesService: UNNotificationServiceExtension {
    public required init() {
        super.init()
    }

    public var contentHandler: ((UNNotificationContent) -> Void)?
    public var bestAttemptContent: UNMutableNotificationContent?

    /// The image URLs of the payload's items, in order.
    public static func imageURLs(_ userInfo: [AnyHashable: Any]) -> [URL] {
        guard let items = userInfo["items"] as? [[String: Any]] else { return [] }
        return items.compactMap { ($0["image"] as? String).flatMap(URL.init(string:)) }
    }

    open override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        self.contentHandler = contentHandler
        let content = request.content.mutableCopy() as! UNMutableNotificationContent
        bestAttemptContent = content
        download(Self.imageURLs(content.userInfo), index: 0, into: content) {
            contentHandler(content)
        }
    }

    open override func serviceExtensionTimeWillExpire() {
        if let contentHandler, let bestAttemptContent {
            contentHandler(bestAttemptContent)
        }
    }

    private func download(_ urls: [URL], index: Int, into content: UNMutableNotificationContent, done: @escaping () -> Void) {
        guard index < urls.count else {
            done()
            return
        }
        let url = urls[index]
        URLSession.shared.dataTask(with: url) { data, response, error in
            if let data, error == nil, (response as? HTTPURLResponse)?.statusCode ?? 200 == 200 {
                let file = FileManager.default.temporaryDirectory
                    .appendingPathComponent("item-\(index)-\(UUID().uuidString)")
                    .appendingPathExtension(url.pathExtension.isEmpty ? "png" : url.pathExtension)
                do {
                    try data.write(to: file)
                    content.attachments.append(try UNNotificationAttachment(identifier: "item-\(index)", url: file, options: nil))
                } catch {
                    print("item image \(index) not attached: \(error)")
                }
            } else {
                print("item image \(index) not downloaded: \(String(describing: error))")
            }
            self.download(urls, index: index + 1, into: content, done: done)
        }.resume()
    }
}
