// An inventory of Apple's API as ../shared/reference/usernotifications-api.md lists it: every
// type, initializer, property and method, used once with Apple's labels, written as iOS code
// (Swift 5 mode, no Tidings SPI). It must compile; APIInventoryTests runs it against an
// in-process notification system. Not here: UNNotificationAttributedMessageContext (needs
// Intents' INSendMessageIntent), UNNotificationResponse.targetScene (UIKit's UIScene) and
// the NSExtensionContext additions of UserNotificationsUI (no NSExtensionContext on Linux).

import Foundation
import UserNotifications
import UserNotificationsUI

/// Everything the inventory read back, for the tests.
struct InventoryReport {
    var granted = false
    var settings: UNNotificationSettings?
    var categories: Set<UNNotificationCategory> = []
    var pendingIdentifiers: [String] = []
    var deliveredIdentifiers: [String] = []
    var completionErrors: [String] = []
    var badgeError: Error?
}

/// Every option, status and setting value, with Apple's names.
func inventoryOfValues() -> [UInt] {
    let authorization: UNAuthorizationOptions = [.badge, .sound, .alert, .carPlay, .criticalAlert, .providesAppNotificationSettings, .provisional]
    let deprecatedAuthorization: UNAuthorizationOptions = [.announcement, .timeSensitive]
    let statuses: [UNAuthorizationStatus] = [.notDetermined, .denied, .authorized, .provisional, .ephemeral]
    let settings: [UNNotificationSetting] = [.notSupported, .disabled, .enabled]
    let styles: [UNAlertStyle] = [.none, .banner, .alert]
    let previews: [UNShowPreviewsSetting] = [.always, .whenAuthenticated, .never]
    let presentation: UNNotificationPresentationOptions = [.badge, .sound, .alert, .list, .banner]
    let levels: [UNNotificationInterruptionLevel] = [.passive, .active, .timeSensitive, .critical]
    let categoryOptions: UNNotificationCategoryOptions = [.customDismissAction, .allowInCarPlay, .hiddenPreviewsShowTitle, .hiddenPreviewsShowSubtitle, .allowAnnouncement]
    let actionOptions: UNNotificationActionOptions = [.authenticationRequired, .destructive, .foreground]
    let responseOptions: [UNNotificationContentExtensionResponseOption] = [.doNotDismiss, .dismiss, .dismissAndForwardAction]
    let buttons: [UNNotificationContentExtensionMediaPlayPauseButtonType] = [.none, .default, .overlay]
    let codes: [UNError.Code] = [.notificationsNotAllowed, .attachmentInvalidURL, .attachmentUnrecognizedType, .attachmentInvalidFileSize,
                                 .attachmentNotInDataStore, .attachmentMoveIntoDataStoreFailed, .attachmentCorrupt,
                                 .notificationInvalidNoDate, .notificationInvalidNoContent,
                                 .contentProvidingObjectNotAllowed, .contentProvidingInvalid, .badgeInputInvalid]
    return [authorization.rawValue, deprecatedAuthorization.rawValue, UInt(statuses.count), UInt(settings.count), UInt(styles.count),
            UInt(previews.count), presentation.rawValue, UInt(levels.count), categoryOptions.rawValue, actionOptions.rawValue,
            UInt(responseOptions.count), UInt(buttons.count), UInt(codes.count)]
}

/// The content of a request, every property set.
func inventoryContent(attachmentURL: URL?) throws -> UNMutableNotificationContent {
    let content = UNMutableNotificationContent()
    content.title = NSString.localizedUserNotificationString(forKey: "Inventory", arguments: nil)
    content.subtitle = "Subtitle"
    content.body = "Body"
    content.badge = 3
    content.sound = UNNotificationSound.default
    content.sound = UNNotificationSound(named: UNNotificationSoundName("chime.caf"))
    _ = [UNNotificationSound.defaultCritical, UNNotificationSound.defaultCriticalSound(withAudioVolume: 0.5),
         UNNotificationSound.criticalSoundNamed(UNNotificationSoundName("alarm.caf")),
         UNNotificationSound.criticalSoundNamed(UNNotificationSoundName("alarm.caf"), withAudioVolume: 0.5),
         UNNotificationSound.defaultRingtone, UNNotificationSound.ringtoneSoundNamed(UNNotificationSoundName("ring.caf"))]
    content.launchImageName = "Launch"
    content.userInfo = ["key": "value", "number": 1]
    content.categoryIdentifier = "inventory.category"
    content.threadIdentifier = "inventory.thread"
    content.targetContentIdentifier = "inventory.target"
    content.interruptionLevel = .timeSensitive
    content.relevanceScore = 0.5
    content.filterCriteria = "work"
    if let attachmentURL = attachmentURL {
        let attachment = try UNNotificationAttachment(identifier: "image", url: attachmentURL, options: [
            UNNotificationAttachmentOptionsTypeHintKey: "public.png",
            UNNotificationAttachmentOptionsThumbnailHiddenKey: false,
            UNNotificationAttachmentOptionsThumbnailClippingRectKey: CGRect(x: 0, y: 0, width: 1, height: 1).dictionaryRepresentation,
            UNNotificationAttachmentOptionsThumbnailTimeKey: 0,
        ])
        _ = (attachment.identifier, attachment.url, attachment.type)
        content.attachments = [attachment]
    }
    let immutable = content.copy() as! UNNotificationContent
    let mutable = immutable.mutableCopy() as! UNMutableNotificationContent
    _ = (immutable.title, immutable.subtitle, immutable.body, immutable.badge, immutable.sound, immutable.launchImageName,
         immutable.userInfo, immutable.categoryIdentifier, immutable.threadIdentifier, immutable.attachments,
         immutable.targetContentIdentifier, immutable.interruptionLevel, immutable.relevanceScore, immutable.filterCriteria, mutable)
    return content
}

/// The categories and actions, every initializer.
func inventoryCategories() -> Set<UNNotificationCategory> {
    let icon = UNNotificationActionIcon(systemImageName: "star")
    let template = UNNotificationActionIcon(templateImageName: "Star")
    let plain = UNNotificationAction(identifier: "plain", title: "Plain", options: [])
    let withIcon = UNNotificationAction(identifier: "icon", title: "Icon", options: [.foreground], icon: template)
    let reply = UNTextInputNotificationAction(identifier: "reply", title: "Reply", options: [], textInputButtonTitle: "Send", textInputPlaceholder: "Say…")
    let replyWithIcon = UNTextInputNotificationAction(identifier: "reply.icon", title: "Reply", options: [.authenticationRequired], icon: icon,
                                                      textInputButtonTitle: "Send", textInputPlaceholder: "Say…")
    _ = (plain.identifier, plain.title, plain.options, withIcon.icon, reply.textInputButtonTitle, reply.textInputPlaceholder)
    let first = UNNotificationCategory(identifier: "inventory.category", actions: [plain, withIcon, reply, replyWithIcon], intentIdentifiers: [], options: [.customDismissAction])
    let second = UNNotificationCategory(identifier: "inventory.hidden", actions: [], intentIdentifiers: ["INSendMessageIntent"],
                                        hiddenPreviewsBodyPlaceholder: "%u messages", options: [.hiddenPreviewsShowTitle])
    let third = UNNotificationCategory(identifier: "inventory.summary", actions: [], intentIdentifiers: [],
                                       hiddenPreviewsBodyPlaceholder: "%u new", categorySummaryFormat: "%u more from %@", options: [])
    _ = (first.identifier, first.actions, first.intentIdentifiers, first.options, second.hiddenPreviewsBodyPlaceholder, third.categorySummaryFormat)
    return [first, second, third]
}

/// The triggers, every initializer and property.
func inventoryTriggers() -> [UNNotificationTrigger] {
    let interval = UNTimeIntervalNotificationTrigger(timeInterval: 60, repeats: true)
    var components = DateComponents()
    components.hour = 8
    components.minute = 30
    let calendar = UNCalendarNotificationTrigger(dateMatching: components, repeats: false)
    let region = CLCircularRegion(center: CLLocationCoordinate2D(latitude: 35.68, longitude: 139.76), radius: 100, identifier: "tokyo")
    region.notifyOnEntry = true
    region.notifyOnExit = false
    let location = UNLocationNotificationTrigger(region: region, repeats: false)
    _ = (interval.timeInterval, interval.nextTriggerDate(), interval.repeats, calendar.dateComponents, calendar.nextTriggerDate(), location.region)
    return [interval, calendar, location]
}

/// A delegate implementing every method (completion-handler forms; the `async` forms are in
/// AsyncInventoryDelegate).
class InventoryDelegate: NSObject, UNUserNotificationCenterDelegate {
    var seen: [String] = []
    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping (UNNotificationPresentationOptions) -> Void) {
        seen.append("willPresent \(notification.request.identifier) \(notification.date.timeIntervalSince1970 > 0)")
        completionHandler([.banner, .list, .sound, .badge])
    }
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping () -> Void) {
        let text = (response as? UNTextInputNotificationResponse)?.userText ?? ""
        let tapped = response.actionIdentifier == UNNotificationDefaultActionIdentifier
        let dismissed = response.actionIdentifier == UNNotificationDismissActionIdentifier
        seen.append("didReceive \(response.notification.request.identifier) \(response.actionIdentifier) \(text) \(tapped) \(dismissed)")
        completionHandler()
    }
    func userNotificationCenter(_ center: UNUserNotificationCenter, openSettingsFor notification: UNNotification?) {
        seen.append("openSettings \(notification?.request.identifier ?? "-")")
    }
}

class AsyncInventoryDelegate: NSObject, UNUserNotificationCenterDelegate {
    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification) async -> UNNotificationPresentationOptions {
        [.list]
    }
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse) async {}
}

/// A content extension with every requirement.
class InventoryContentExtension: NSObject, UNNotificationContentExtension {
    var shown: [String] = []
    func didReceive(_ notification: UNNotification) { shown.append(notification.request.identifier) }
    func didReceive(_ response: UNNotificationResponse, completionHandler completion: @escaping (UNNotificationContentExtensionResponseOption) -> Void) {
        completion(.dismissAndForwardAction)
    }
    var mediaPlayPauseButtonType: UNNotificationContentExtensionMediaPlayPauseButtonType { .overlay }
    var mediaPlayPauseButtonFrame: CGRect { CGRect(x: 0, y: 0, width: 44, height: 44) }
    func mediaPlay() {}
    func mediaPause() {}
}

/// A content extension with the `async` form of the response method.
class AsyncInventoryContentExtension: NSObject, UNNotificationContentExtension {
    func didReceive(_ notification: UNNotification) {}
    func didReceive(_ response: UNNotificationResponse) async -> UNNotificationContentExtensionResponseOption { .doNotDismiss }
}

/// Communication notifications: Apple allows only its own providers (INSendMessageIntent…).
class InventoryContentProvider: NSObject, UNNotificationContentProviding {}

/// `updating(from:)` and what tells a remote notification from a local one.
func inventoryOfProvidersAndTriggers(_ notification: UNNotification) -> (updatingError: Error?, isRemote: Bool) {
    var updatingError: Error?
    do {
        _ = try notification.request.content.updating(from: InventoryContentProvider())
    } catch {
        updatingError = error
    }
    return (updatingError, notification.request.trigger is UNPushNotificationTrigger)
}

/// A service extension overriding both methods, as Xcode's template does.
class InventoryServiceExtension: UNNotificationServiceExtension {
    var contentHandler: ((UNNotificationContent) -> Void)?
    var bestAttemptContent: UNMutableNotificationContent?
    override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        self.contentHandler = contentHandler
        bestAttemptContent = (request.content.mutableCopy() as? UNMutableNotificationContent)
        if let bestAttemptContent = bestAttemptContent {
            bestAttemptContent.title = "\(bestAttemptContent.title) [modified]"
            contentHandler(bestAttemptContent)
        }
    }
    override func serviceExtensionTimeWillExpire() {
        if let contentHandler = contentHandler, let bestAttemptContent = bestAttemptContent {
            contentHandler(bestAttemptContent)
        }
    }
}

/// The center, every method, in both forms where Apple has both.
func inventoryOfTheCenter(attachmentURL: URL?) async throws -> InventoryReport {
    var report = InventoryReport()
    let center = UNUserNotificationCenter.current()
    _ = center.supportsContentExtensions
    _ = center.delegate

    center.requestAuthorization(options: [.alert, .sound, .badge]) { granted, error in }
    report.granted = try await center.requestAuthorization(options: [.alert, .sound, .badge, .providesAppNotificationSettings])
    center.getNotificationSettings { settings in }
    let settings = await center.notificationSettings()
    _ = (settings.authorizationStatus, settings.soundSetting, settings.badgeSetting, settings.alertSetting,
         settings.notificationCenterSetting, settings.lockScreenSetting, settings.carPlaySetting, settings.alertStyle,
         settings.showPreviewsSetting, settings.criticalAlertSetting, settings.providesAppNotificationSettings,
         settings.announcementSetting, settings.timeSensitiveSetting, settings.scheduledDeliverySetting, settings.directMessagesSetting)
    report.settings = settings

    center.setNotificationCategories(inventoryCategories())
    center.getNotificationCategories { categories in }
    report.categories = await center.notificationCategories()

    let content = try inventoryContent(attachmentURL: attachmentURL)
    let triggers = inventoryTriggers()
    let later = UNNotificationRequest(identifier: "inventory.later", content: content, trigger: triggers[0])
    _ = (later.identifier, later.content, later.trigger)
    center.add(later) { error in }
    center.add(UNNotificationRequest(identifier: "inventory.completion", content: content, trigger: triggers[1]), withCompletionHandler: nil)
    try await center.add(UNNotificationRequest(identifier: "inventory.now", content: UNMutableNotificationContent.plain("Now"), trigger: nil))
    center.getPendingNotificationRequests { requests in }
    center.removePendingNotificationRequests(withIdentifiers: ["inventory.completion"])
    report.pendingIdentifiers = await center.pendingNotificationRequests().map { $0.identifier }.sorted()
    center.removeAllPendingNotificationRequests()

    center.getDeliveredNotifications { notifications in }
    report.deliveredIdentifiers = await center.deliveredNotifications().map { $0.request.identifier }
    center.removeDeliveredNotifications(withIdentifiers: ["unknown"])
    center.removeAllDeliveredNotifications()

    center.setBadgeCount(0) { error in }
    center.setBadgeCount(1, withCompletionHandler: nil)
    try await center.setBadgeCount(0)
    do {
        try await center.setBadgeCount(-1)
    } catch {
        report.badgeError = error
        _ = ((error as NSError).domain == UNErrorDomain, (error as? UNError)?.code)
    }
    return report
}

extension UNMutableNotificationContent {
    static func plain(_ title: String) -> UNMutableNotificationContent {
        let content = UNMutableNotificationContent()
        content.title = title
        return content
    }
}
