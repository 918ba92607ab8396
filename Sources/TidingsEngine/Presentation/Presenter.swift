import Foundation
import TidingsCore

/// How a notification is shown: the union of what the app's settings allow and, for a
/// foreground app, what its delegate asked for.
public struct Presentation: Sendable, Hashable {
    /// A banner (alert) the person sees now.
    public var banner: Bool
    /// Kept in the notification center list (the delivered list).
    public var list: Bool
    public var sound: Bool
    public var badge: Bool

    public init(banner: Bool, list: Bool, sound: Bool, badge: Bool) {
        self.banner = banner
        self.list = list
        self.sound = sound
        self.badge = badge
    }

    public static let none = Presentation(banner: false, list: false, sound: false, badge: false)

    public var isVisible: Bool { banner || list }

    /// What a delegate's `willPresent` options mean (`.alert` is banner + list).
    public init(options: PresentationOptionsValue) {
        self.init(
            banner: options.contains(.banner) || options.contains(.alert),
            list: options.contains(.list) || options.contains(.alert),
            sound: options.contains(.sound),
            badge: options.contains(.badge))
    }

    /// What the person's settings allow for an app that is not in the foreground: nothing
    /// when its notifications are not allowed at all.
    public init(settings: NotificationSettingsValue, content: NotificationContentValue) {
        guard settings.isAllowed else {
            self = .none
            return
        }
        let passive = content.interruptionLevel == .passive
        self.init(
            banner: settings.alertSetting == .enabled && settings.alertStyle != .none && !passive,
            list: settings.notificationCenterSetting == .enabled,
            sound: settings.soundSetting == .enabled && content.sound != nil && !passive,
            badge: settings.badgeSetting == .enabled && content.badge != nil)
    }

    /// The presentation as one byte (banner 1, list 2, sound 4, badge 8): what a fire
    /// records for the presenters (`FireWrite.present`), 0 when nothing is to be seen.
    public var recordedFlags: UInt8 {
        guard isVisible else { return 0 }
        return (banner ? 1 : 0) | (list ? 2 : 0) | (sound ? 4 : 0) | (badge ? 8 : 0)
    }

    public init(recordedFlags flags: UInt8) {
        self.init(banner: flags & 1 != 0, list: flags & 2 != 0, sound: flags & 4 != 0, badge: flags & 8 != 0)
    }

    /// Limits a delegate's wishes to what the person allows.
    public func limited(by settings: NotificationSettingsValue) -> Presentation {
        Presentation(
            banner: banner && settings.alertSetting == .enabled,
            list: list && settings.notificationCenterSetting == .enabled,
            sound: sound && settings.soundSetting == .enabled,
            badge: badge && settings.badgeSetting == .enabled)
    }
}

/// A notification on its way to the person.
public struct PresentedNotification: Sendable, Hashable {
    public var bundleIdentifier: String
    public var appName: String
    public var notification: DeliveredNotificationValue
    /// The category named by the content, if the app registered it: its actions become buttons.
    public var category: CategoryValue?
    public var presentation: Presentation
    /// The app's badge after this notification, when it changed it.
    public var badge: Int?
    /// The app's settings as the engine read them to present it (the alert style, hidden
    /// previews); nil when they could not be read. Presenters never ask the engine again.
    public var settings: NotificationSettingsValue?
    /// The app's folder (its manifest's directory: icon, sounds); nil when the app is unknown.
    public var appDirectory: String?

    public init(bundleIdentifier: String, appName: String, notification: DeliveredNotificationValue, category: CategoryValue?, presentation: Presentation, badge: Int?,
                settings: NotificationSettingsValue? = nil, appDirectory: String? = nil) {
        self.bundleIdentifier = bundleIdentifier
        self.appName = appName
        self.notification = notification
        self.category = category
        self.presentation = presentation
        self.badge = badge
        self.settings = settings
        self.appDirectory = appDirectory
    }
}

/// Something that shows notifications to a person: the daemon's terminal, a web
/// notification center, desktop notifications over D-Bus.
public protocol Presenter: Sendable {
    /// Shows a notification (a replacement shows in place of the one with the same identifier).
    func present(_ notification: PresentedNotification) async
    /// Takes notifications away (removed by the app, answered, or replaced by a non-visible one).
    func withdraw(bundleIdentifier: String, identifiers: [String]) async
    /// The app's badge changed.
    func badgeChanged(bundleIdentifier: String, count: Int) async
    /// The app's settings changed (Settings, `tidings settings`, a consent answer).
    func settingsChanged(bundleIdentifier: String, settings: NotificationSettingsValue) async
}

extension Presenter {
    public func withdraw(bundleIdentifier: String, identifiers: [String]) async {}
    public func badgeChanged(bundleIdentifier: String, count: Int) async {}
    public func settingsChanged(bundleIdentifier: String, settings: NotificationSettingsValue) async {}
}
