// A notification service extension for tests: behaves, or misbehaves, as the request's
// `userInfo["fixture"]` says.
//
// - "noop": delivers the content unchanged (the benchmark's).
// - "modify": prefixes the title, names its bundle identifier and thread in the content.
// - "best-attempt": never calls the handler until `serviceExtensionTimeWillExpire()`, then
//   delivers its best attempt.
// - "hang": never calls the handler, not even on `serviceExtensionTimeWillExpire()`.
// - "crash": crashes.
// - "garbage": writes a frame that is not a reply on the daemon channel.
// - "memory": allocates `userInfo["megabytes"]` MiB of address space, then delivers.
// - "attach": attaches a valid PNG from its staging directory, a PNG that it corrupts
//   after creating the attachment, and the file at `userInfo["outside"]` (outside its
//   container).
@_spi(Tidings) import UserNotifications
import Foundation

final class FixtureService: UNNotificationServiceExtension {
    var contentHandler: ((UNNotificationContent) -> Void)?
    var bestAttempt: UNMutableNotificationContent?

    override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        let content = request.content.mutableCopy() as! UNMutableNotificationContent
        let mode = content.userInfo["fixture"] as? String ?? "modify"
        switch mode {
        case "noop":
            contentHandler(request.content)
        case "modify":
            content.title = "modified: \(content.title)"
            content.subtitle = ProcessInfo.processInfo.environment["TIDINGS_EXTENSION_BUNDLE_ID"] ?? "?"
            content.userInfo["mainThread"] = Thread.isMainThread
            contentHandler(content)
        case "best-attempt":
            content.title = "best attempt: \(content.title)"
            self.contentHandler = contentHandler
            self.bestAttempt = content
        case "hang":
            break
        case "crash":
            fatalError("the fixture crashes on request")
        case "garbage":
            try? ServiceExtensionChannel.current?.writeRaw(frame: Array("this is not JSON".utf8))
        case "memory":
            let megabytes = content.userInfo["megabytes"] as? Int ?? 1024
            let block = UnsafeMutableRawPointer.allocate(byteCount: megabytes << 20, alignment: 16)
            // Touch one byte a page over the first MiB: enough to show the memory is real.
            for offset in stride(from: 0, to: 1 << 20, by: 4096) { block.storeBytes(of: 1, toByteOffset: offset, as: UInt8.self) }
            content.body = "allocated \(megabytes) MiB"
            contentHandler(content)
            block.deallocate()
        case "attach":
            let staging = FileManager.default.temporaryDirectory
            let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 0, count: 24)
            var attachments: [UNNotificationAttachment] = []
            do {
                let good = staging.appendingPathComponent("good.png")
                try Data(png).write(to: good)
                attachments.append(try UNNotificationAttachment(identifier: "good", url: good))
                let corrupt = staging.appendingPathComponent("corrupt.png")
                try Data(png).write(to: corrupt)
                attachments.append(try UNNotificationAttachment(identifier: "corrupt", url: corrupt))
                try Data("not a PNG any more".utf8).write(to: corrupt)
                if let outside = content.userInfo["outside"] as? String {
                    attachments.append(try UNNotificationAttachment(identifier: "outside", url: URL(fileURLWithPath: outside)))
                }
            } catch {
                content.body = "fixture error: \(error)"
            }
            content.attachments = attachments
            contentHandler(content)
        default:
            content.body = "unknown fixture mode \(mode)"
            contentHandler(content)
        }
    }

    override func serviceExtensionTimeWillExpire() {
        if let contentHandler, let bestAttempt {
            contentHandler(bestAttempt)
        }
    }
}

UNNotificationServiceExtensionMain(FixtureService.self)
