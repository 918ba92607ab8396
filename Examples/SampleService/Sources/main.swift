// The sample app's notification service extension: both of the seeds' flows in one
// extension, as an app ships one service extension. Reuses the example classes of
// Examples/ServiceExtensions:
//
// - a payload with `e2e` (an alert sealed with the key shared with the app, see
//   Examples/SecureMessages) is decrypted first;
// - a payload with `image` (a URL) then gets the image downloaded and attached;
// - a payload with `items` (seed 000 §3.3, each with an `image` URL) gets the items' images
//   attached in order, for the content extension (Examples/ContentExtension).
//
// Either step that fails leaves the content as it was; the other still runs.
import ExampleServiceExtensions
import UserNotifications

final class SampleService: UNNotificationServiceExtension {
    /// The step running now, told when the time is about to run out.
    var current: UNNotificationServiceExtension?

    override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        let info = request.content.userInfo
        let downloadItems: (UNNotificationContent) -> Void = { content in
            guard !ItemImagesService.imageURLs(info).isEmpty else {
                contentHandler(content)
                return
            }
            let step = ItemImagesService()
            self.current = step
            step.didReceive(UNNotificationRequest(identifier: request.identifier, content: content, trigger: request.trigger),
                            withContentHandler: contentHandler)
        }
        let downloadImage: (UNNotificationContent) -> Void = { content in
            guard info["image"] != nil else {
                downloadItems(content)
                return
            }
            let step = ImageDownloadService()
            self.current = step
            step.didReceive(UNNotificationRequest(identifier: request.identifier, content: content, trigger: request.trigger),
                            withContentHandler: downloadItems)
        }
        if info["e2e"] != nil {
            let step = SecureMessageService()
            current = step
            step.didReceive(request, withContentHandler: downloadImage)
        } else {
            downloadImage(request.content)
        }
    }

    override func serviceExtensionTimeWillExpire() {
        current?.serviceExtensionTimeWillExpire()
    }
}

UNNotificationServiceExtensionMain(SampleService.self)
