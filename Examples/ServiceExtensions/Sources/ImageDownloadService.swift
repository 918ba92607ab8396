// The seeds' image download, as a service extension class (Examples/ImageService and
// Examples/SampleService run it).
//
// The push carries an image URL in its payload (`"image": "https://…/cat.png"`, next to
// `aps` with `"mutable-content": 1` and an alert). The extension downloads the image,
// attaches it, and delivers; if the download fails or the time runs out, the original
// alert is shown. The code is the seeds' (URLSession callback, a file in the temporary
// directory, `UNNotificationAttachment`), as it runs on iOS.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import UserNotifications

open class ImageDownloadService: UNNotificationServiceExtension {
    public required init() {
        super.init()
    }

    public var contentHandler: ((UNNotificationContent) -> Void)?
    public var bestAttemptContent: UNMutableNotificationContent?

    open override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        self.contentHandler = contentHandler
        let bestAttemptContent = request.content.mutableCopy() as! UNMutableNotificationContent
        self.bestAttemptContent = bestAttemptContent

        guard let imageURLString = bestAttemptContent.userInfo["image"] as? String,
              let url = URL(string: imageURLString) else {
            contentHandler(bestAttemptContent)
            return
        }
        downloadAndSave(url: url) { localURL in
            if let localURL {
                do {
                    let attachment = try UNNotificationAttachment(identifier: "image_downloaded", url: localURL, options: nil)
                    bestAttemptContent.attachments = [attachment]
                } catch {
                    print("image attachment failed: \(error)")
                }
            }
            contentHandler(bestAttemptContent)
        }
    }

    open override func serviceExtensionTimeWillExpire() {
        // Called just before the extension is killed: deliver the best attempt (without the
        // image), or the original content is shown.
        if let contentHandler, let bestAttemptContent {
            contentHandler(bestAttemptContent)
        }
    }

    /// Downloads `url` into the temporary directory (the request's staging directory under
    /// Tidings), keeping the file name extension so the attachment's type is known.
    private func downloadAndSave(url: URL, handler: @escaping (_ localURL: URL?) -> Void) {
        let task = URLSession.shared.dataTask(with: url) { data, response, error in
            var localURL: URL?
            if let data, error == nil, (response as? HTTPURLResponse)?.statusCode ?? 200 == 200 {
                let ext = url.pathExtension.isEmpty ? "png" : url.pathExtension
                let file = FileManager.default.temporaryDirectory
                    .appendingPathComponent(UUID().uuidString)
                    .appendingPathExtension(ext)
                if (try? data.write(to: file)) != nil {
                    localURL = file
                }
            } else {
                print("image download failed: \(String(describing: error))")
            }
            handler(localURL)
        }
        task.resume()
    }
}
