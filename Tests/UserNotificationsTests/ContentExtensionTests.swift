import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications
import UserNotificationsUI

final class MinimalContentExtension: NSObject, UNNotificationContentExtension {
    var shown: [String] = []
    func didReceive(_ notification: UNNotification) {
        shown.append(notification.request.identifier)
    }
}

final class MediaContentExtension: NSObject, UNNotificationContentExtension {
    var playing = false
    func didReceive(_ notification: UNNotification) {}
    func didReceive(_ response: UNNotificationResponse) async -> UNNotificationContentExtensionResponseOption {
        response.actionIdentifier == "switch" ? .doNotDismiss : .dismiss
    }
    var mediaPlayPauseButtonType: UNNotificationContentExtensionMediaPlayPauseButtonType { .overlay }
    func mediaPlay() { playing = true }
    func mediaPause() { playing = false }
}

@MainActor
@Suite("UserNotificationsUI")
struct ContentExtensionTests {
    @Test func rawValuesAreApples() {
        #expect(UNNotificationContentExtensionResponseOption.doNotDismiss.rawValue == 0)
        #expect(UNNotificationContentExtensionResponseOption.dismiss.rawValue == 1)
        #expect(UNNotificationContentExtensionResponseOption.dismissAndForwardAction.rawValue == 2)
        #expect(UNNotificationContentExtensionMediaPlayPauseButtonType.none.rawValue == 0)
        #expect(UNNotificationContentExtensionMediaPlayPauseButtonType.default.rawValue == 1)
        #expect(UNNotificationContentExtensionMediaPlayPauseButtonType.overlay.rawValue == 2)
    }

    @Test func optionalRequirementsHaveApplesDefaults() async {
        let ext = MinimalContentExtension()
        ext.didReceive(UNNotification(value: Fixtures.delivered("n")))
        #expect(ext.shown == ["n"])
        let response = UNNotificationResponse.make(ResponseValue(notification: Fixtures.delivered(), actionIdentifier: "x"))
        let option = await withCheckedContinuation { continuation in
            ext.didReceive(response) { continuation.resume(returning: $0) }
        }
        #expect(option == .dismissAndForwardAction)
        #expect(ext.mediaPlayPauseButtonType == .none)
        #expect(ext.mediaPlayPauseButtonFrame == .zero)
    }

    @Test func implementedRequirementsAreUsed() async {
        let ext = MediaContentExtension()
        let response = UNNotificationResponse.make(ResponseValue(notification: Fixtures.delivered(), actionIdentifier: "switch"))
        let option = await withCheckedContinuation { continuation in
            ext.didReceive(response) { continuation.resume(returning: $0) }
        }
        #expect(option == .doNotDismiss)
        ext.mediaPlay()
        #expect(ext.playing)
        #expect(ext.mediaPlayPauseButtonType == .overlay)
    }
}
