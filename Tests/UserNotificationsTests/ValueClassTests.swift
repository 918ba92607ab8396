import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

@Suite("Value classes")
struct ValueClassTests {
    @Test func mutableContentDefaultsMatchApple() {
        let content = UNMutableNotificationContent()
        #expect(content.title == "")
        #expect(content.subtitle == "")
        #expect(content.body == "")
        #expect(content.badge == nil)
        #expect(content.sound == nil)
        #expect(content.launchImageName == "")
        #expect(content.userInfo.isEmpty)
        #expect(content.attachments.isEmpty)
        #expect(content.categoryIdentifier == "")
        #expect(content.threadIdentifier == "")
        #expect(content.targetContentIdentifier == nil)
        #expect(content.interruptionLevel == .active)
        #expect(content.relevanceScore == 0)
        #expect(content.filterCriteria == nil)
    }

    @Test func copyIsImmutableAndMutableCopyIsMutable() throws {
        let content = UNMutableNotificationContent()
        content.title = "Title"
        content.body = "Body"
        content.badge = 3
        content.userInfo = ["name": "Adu Test", "n": 1]

        let frozen = content.copy()
        #expect(type(of: frozen) == UNNotificationContent.self)
        #expect(!(frozen is UNMutableNotificationContent))
        let immutable = try #require(frozen as? UNNotificationContent)
        #expect(immutable.title == "Title")
        #expect(immutable == content)

        let editable = try #require(immutable.mutableCopy() as? UNMutableNotificationContent)
        editable.body = "\(editable.body), edited"
        #expect(editable.body == "Body, edited")
        #expect(immutable.body == "Body")
        #expect(content.body == "Body")
        #expect(editable.userInfo["name"] as? String == "Adu Test")
        #expect(editable.badge == 3)
    }

    @Test func requestCopiesItsContent() {
        let content = UNMutableNotificationContent()
        content.title = "Before"
        let request = UNNotificationRequest(identifier: "id", content: content, trigger: nil)
        content.title = "After"
        #expect(request.content.title == "Before")
        #expect(!(request.content is UNMutableNotificationContent))
        #expect(request.trigger == nil)
    }

    @Test func contentEqualityAndHashAreByValue() {
        func make() -> UNMutableNotificationContent {
            let c = UNMutableNotificationContent()
            c.title = "T"
            c.userInfo = ["k": [1, 2, 3]]
            c.sound = .default
            return c
        }
        #expect(make() == make())
        #expect(make().hash == make().hash)
        let other = make()
        other.subtitle = "x"
        #expect(make() != other)
    }

    @Test func setOfCategoriesDeduplicatesEqualCategories() {
        func make() -> UNNotificationCategory {
            UNNotificationCategory(identifier: "c", actions: [UNNotificationAction(identifier: "a", title: "A", options: [.foreground])], intentIdentifiers: [], options: [.customDismissAction])
        }
        let set: Set<UNNotificationCategory> = [make(), make()]
        #expect(set.count == 1)
        let different = UNNotificationCategory(identifier: "c", actions: [], intentIdentifiers: [], options: [])
        #expect(!set.contains(different))
    }

    @Test func categoryInitializersKeepEveryField() {
        let icon = UNNotificationActionIcon(systemImageName: "star")
        let input = UNTextInputNotificationAction(identifier: "in", title: "Reply", options: [.authenticationRequired], icon: icon, textInputButtonTitle: "Send", textInputPlaceholder: "Say…")
        let category = UNNotificationCategory(identifier: "msg", actions: [input], intentIdentifiers: ["INSendMessageIntent"], hiddenPreviewsBodyPlaceholder: "%u messages", categorySummaryFormat: "%u more from %@", options: [.hiddenPreviewsShowTitle])
        #expect(category.hiddenPreviewsBodyPlaceholder == "%u messages")
        #expect(category.categorySummaryFormat == "%u more from %@")
        #expect(category.intentIdentifiers == ["INSendMessageIntent"])
        let action = try? #require(category.actions.first as? UNTextInputNotificationAction)
        #expect(action?.textInputPlaceholder == "Say…")
        #expect(action?.icon == icon)

        let short = UNNotificationCategory(identifier: "s", actions: [], intentIdentifiers: [], hiddenPreviewsBodyPlaceholder: "hidden", options: [])
        #expect(short.hiddenPreviewsBodyPlaceholder == "hidden")
        #expect(short.categorySummaryFormat == "")

        // Round trip through the value model keeps the subclass.
        let back = UNNotificationCategory(value: category.value)
        #expect(back == category)
        #expect(back.actions.first is UNTextInputNotificationAction)
    }

    @Test func rawValuesAreApples() {
        #expect(UNAuthorizationOptions.badge.rawValue == 1)
        #expect(UNAuthorizationOptions.sound.rawValue == 2)
        #expect(UNAuthorizationOptions.alert.rawValue == 4)
        #expect(UNAuthorizationOptions.carPlay.rawValue == 8)
        #expect(UNAuthorizationOptions.criticalAlert.rawValue == 16)
        #expect(UNAuthorizationOptions.providesAppNotificationSettings.rawValue == 32)
        #expect(UNAuthorizationOptions.provisional.rawValue == 64)
        #expect(UNNotificationPresentationOptions.badge.rawValue == 1)
        #expect(UNNotificationPresentationOptions.sound.rawValue == 2)
        #expect(UNNotificationPresentationOptions.list.rawValue == 8)
        #expect(UNNotificationPresentationOptions.banner.rawValue == 16)
        #expect(UNNotificationActionOptions.authenticationRequired.rawValue == 1)
        #expect(UNNotificationActionOptions.destructive.rawValue == 2)
        #expect(UNNotificationActionOptions.foreground.rawValue == 4)
        #expect(UNNotificationCategoryOptions.customDismissAction.rawValue == 1)
        #expect(UNNotificationCategoryOptions.allowInCarPlay.rawValue == 2)
        #expect(UNNotificationCategoryOptions.hiddenPreviewsShowTitle.rawValue == 4)
        #expect(UNNotificationCategoryOptions.hiddenPreviewsShowSubtitle.rawValue == 8)
        #expect(UNNotificationCategoryOptions.allowAnnouncement.rawValue == 16)
        #expect(UNAuthorizationStatus.allCases.map(\.rawValue) == [0, 1, 2, 3, 4])
        #expect(UNNotificationSetting.enabled.rawValue == 2)
        #expect(UNAlertStyle.alert.rawValue == 2)
        #expect(UNShowPreviewsSetting.never.rawValue == 2)
        #expect(UNNotificationInterruptionLevel.passive.rawValue == 0)
        #expect(UNNotificationInterruptionLevel.critical.rawValue == 3)
        #expect(UNNotificationDefaultActionIdentifier == "com.apple.UNNotificationDefaultActionIdentifier")
        #expect(UNNotificationDismissActionIdentifier == "com.apple.UNNotificationDismissActionIdentifier")
        // The option sets carry the same bits as the wire values.
        #expect(AuthorizationOptionsValue([.alert, .provisional]).rawValue == AuthorizationOptionsValue([.alert, .provisional]).rawValue)
        #expect(PresentationOptionsValue(UNNotificationPresentationOptions([.banner, .sound])) == [.banner, .sound])
    }

    @Test func sounds() {
        #expect(UNNotificationSound.default == UNNotificationSound.default)
        #expect(UNNotificationSound(named: "ding.wav").value == SoundValue(kind: .named, name: "ding.wav"))
        #expect(UNNotificationSound(named: UNNotificationSoundName("a.caf")) != UNNotificationSound(named: "b.caf"))
        #expect(UNNotificationSound.defaultCriticalSound(withAudioVolume: 3).value.volume == 1)
        #expect(UNNotificationSound.defaultCriticalSound(withAudioVolume: -1).value.volume == 0)
        #expect(UNNotificationSound.criticalSoundNamed("siren.wav", withAudioVolume: 0.5).value == SoundValue(kind: .criticalNamed, name: "siren.wav", volume: 0.5))
        #expect(UNNotificationSound.criticalSoundNamed("siren.wav").value.kind == .criticalNamed)
        #expect(UNNotificationSound.defaultCritical.value.kind == .defaultCritical)
        #expect(UNNotificationSound.defaultRingtone.value.kind == .defaultRingtone)
        #expect(UNNotificationSound.ringtoneSoundNamed("ring.caf").value == SoundValue(kind: .ringtoneNamed, name: "ring.caf"))
    }

    @available(*, deprecated)
    @Test func swift3DefaultSoundSpellingMeansDefault() {
        #expect(UNNotificationSound.default() == .default)
    }

    @Test func settingsDescriptionLooksLikeApples() {
        let settings = UNNotificationSettings(.granted([.alert, .sound, .badge, .carPlay], provisional: false))
        let text = settings.description
        #expect(text.hasPrefix("<UNNotificationSettings: 0x"))
        #expect(text.contains("authorizationStatus: Authorized, notificationCenterSetting: Enabled, soundSetting: Enabled, badgeSetting: Enabled, lockScreenSetting: Enabled, carPlaySetting: Enabled"))
        #expect(text.contains("alertStyle: Banner"))
        #expect(text.hasSuffix("providesAppNotificationSettings: No>"))
        #expect(settings.authorizationStatus == .authorized)
        #expect(settings.badgeSetting == .enabled)
        #expect(settings.criticalAlertSetting == .disabled)
        #expect(settings.showPreviewsSetting == .always)
        #expect("\(settings.authorizationStatus)" == "authorized")
        #expect("\(settings.badgeSetting)" == "enabled")

        let denied = UNNotificationSettings(.deniedSettings)
        #expect(denied.authorizationStatus == .denied)
        #expect(denied.alertSetting == .disabled)
        #expect(denied.description.contains("authorizationStatus: Denied"))
    }

    @Test func secureCodingRoundTripsThroughKeyedArchiver() throws {
        let content = UNMutableNotificationContent()
        content.title = "Archived"
        content.userInfo = ["k": "v", "n": 2]
        content.sound = UNNotificationSound(named: "a.wav")
        let request = UNNotificationRequest(identifier: "arch", content: content, trigger: UNCalendarNotificationTrigger(dateMatching: DateComponents(hour: 8, minute: 30), repeats: true))
        #expect(UNNotificationRequest.supportsSecureCoding)
        #expect(UNNotificationContent.supportsSecureCoding)
        #expect(UNNotificationSettings.supportsSecureCoding)

        let data = try NSKeyedArchiver.archivedData(withRootObject: request, requiringSecureCoding: true)
        let decoded = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: UNNotificationRequest.self, from: data))
        #expect(decoded == request)
        #expect(decoded.trigger is UNCalendarNotificationTrigger)
        #expect(decoded.content.userInfo["k"] as? String == "v")
    }

    @Test func responseValuesBecomeTheRightSubclass() {
        let text = UNNotificationResponse.make(ResponseValue(notification: Fixtures.delivered(), actionIdentifier: "action.input", userText: "hi"))
        #expect((text as? UNTextInputNotificationResponse)?.userText == "hi")
        let tap = UNNotificationResponse.make(ResponseValue(notification: Fixtures.delivered(), actionIdentifier: UNNotificationDefaultActionIdentifier))
        #expect(!(tap is UNTextInputNotificationResponse))
        #expect(tap.notification.request.content.userInfo["name"] as? String == "Adu Test")
        #expect(tap.notification.date == Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test func contentMapsToValuesAndBack() throws {
        let content = UNMutableNotificationContent()
        content.title = "t"
        content.subtitle = "s"
        content.body = "b"
        content.badge = 0
        content.sound = .defaultCritical
        content.launchImageName = "launch"
        content.userInfo = ["date": Date(timeIntervalSince1970: 5), "nested": ["a": [true, 1.5]]]
        content.categoryIdentifier = "cat"
        content.threadIdentifier = "thread"
        content.targetContentIdentifier = "scene"
        content.interruptionLevel = .timeSensitive
        content.relevanceScore = 0.75
        content.filterCriteria = "work"
        let value = try content.value()
        #expect(value.badge == 0)
        #expect(value.interruptionLevel == .timeSensitive)
        #expect(value.userInfo["nested"] == .dictionary(["a": .array([.bool(true), .double(1.5)])]))
        let back = UNNotificationContent(value: value)
        #expect(back == content)
        #expect(back.targetContentIdentifier == "scene")
        #expect(back.filterCriteria == "work")
    }

    @Test func nonPropertyListUserInfoIsATypedError() throws {
        let content = UNMutableNotificationContent()
        content.userInfo = ["object": NSObject()]
        #expect(throws: UNError.self) { try content.value() }
        do {
            _ = try content.value()
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains("userInfo[\"object\"]"))
        }
        content.userInfo = [1: "int key"]
        #expect { try content.value() } throws: { ($0 as? UNError)?.code == .invalidRequest }
    }

    @Test func negativeBadgeInContentIsATypedError() {
        let content = UNMutableNotificationContent()
        content.badge = -1
        #expect { try content.value() } throws: { ($0 as? UNError)?.code == .badgeInputInvalid }
    }

    @Test func updatingFromAProviderIsRefusedWithAClearError() {
        final class Provider: NSObject, UNNotificationContentProviding {}
        #expect { try UNNotificationContent().updating(from: Provider()) } throws: {
            ($0 as? UNError)?.code == .contentProvidingObjectNotAllowed
        }
    }

    @Test func localizedUserNotificationStringFallsBackToTheFormattedKey() {
        #expect(NSString.localizedUserNotificationString(forKey: "Hello!", arguments: nil) == "Hello!")
        #expect(NSString.localizedUserNotificationString(forKey: "%@ has %d new messages", arguments: ["Ann", 3]) == "Ann has 3 new messages")
        #expect(NSString.localizedUserNotificationString(forKey: "%@ paid %.2f", arguments: [NSString(string: "Bo"), NSNumber(value: 2.5)]) == "Bo paid 2.50")
    }

    @Test func securityScopedAccessIsAlwaysGrantedOnLinux() {
        let url = URL(fileURLWithPath: "/tmp")
        #expect(url.startAccessingSecurityScopedResource())
        url.stopAccessingSecurityScopedResource()
    }

    @Test func serviceExtensionDefaultDeliversTheOriginalContent() {
        let content = UNMutableNotificationContent()
        content.title = "Original"
        let request = UNNotificationRequest(identifier: "x", content: content, trigger: nil)
        var received: String?
        UNNotificationServiceExtension().didReceive(request) { delivered in
            received = delivered.title
        }
        #expect(received == "Original")
        UNNotificationServiceExtension().serviceExtensionTimeWillExpire()
    }
}
