import Foundation
import TidingsCore

// Apple's option sets and enums, with the raw values of Apple's headers (so the daemon
// protocol carries the same numbers).

/// What an app asks the person to allow.
public struct UNAuthorizationOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let badge = UNAuthorizationOptions(rawValue: 1 << 0)
    public static let sound = UNAuthorizationOptions(rawValue: 1 << 1)
    public static let alert = UNAuthorizationOptions(rawValue: 1 << 2)
    public static let carPlay = UNAuthorizationOptions(rawValue: 1 << 3)
    /// Critical alerts bypass mute and Focus (Apple: needs an entitlement).
    public static let criticalAlert = UNAuthorizationOptions(rawValue: 1 << 4)
    /// The app has its own notification settings screen (delegate `openSettingsFor`).
    public static let providesAppNotificationSettings = UNAuthorizationOptions(rawValue: 1 << 5)
    /// Granted without asking; notifications are delivered quietly.
    public static let provisional = UNAuthorizationOptions(rawValue: 1 << 6)
    @available(*, deprecated, message: "Announcement is always included")
    public static let announcement = UNAuthorizationOptions(rawValue: 1 << 7)
    @available(*, deprecated, message: "Use time-sensitive entitlement")
    public static let timeSensitive = UNAuthorizationOptions(rawValue: 1 << 8)
}

/// How a notification that arrives while the app is in the foreground is presented.
public struct UNNotificationPresentationOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let badge = UNNotificationPresentationOptions(rawValue: 1 << 0)
    public static let sound = UNNotificationPresentationOptions(rawValue: 1 << 1)
    @available(*, deprecated, message: "Use 'list | banner' instead")
    public static let alert = UNNotificationPresentationOptions(rawValue: 1 << 2)
    public static let list = UNNotificationPresentationOptions(rawValue: 1 << 3)
    public static let banner = UNNotificationPresentationOptions(rawValue: 1 << 4)
}

/// Behaviour of an action button.
public struct UNNotificationActionOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let authenticationRequired = UNNotificationActionOptions(rawValue: 1 << 0)
    public static let destructive = UNNotificationActionOptions(rawValue: 1 << 1)
    public static let foreground = UNNotificationActionOptions(rawValue: 1 << 2)
}

/// Behaviour of a category.
public struct UNNotificationCategoryOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Report dismissals to the delegate as `UNNotificationDismissActionIdentifier`.
    public static let customDismissAction = UNNotificationCategoryOptions(rawValue: 1 << 0)
    public static let allowInCarPlay = UNNotificationCategoryOptions(rawValue: 1 << 1)
    public static let hiddenPreviewsShowTitle = UNNotificationCategoryOptions(rawValue: 1 << 2)
    public static let hiddenPreviewsShowSubtitle = UNNotificationCategoryOptions(rawValue: 1 << 3)
    public static let allowAnnouncement = UNNotificationCategoryOptions(rawValue: 1 << 4)
}

/// Whether the app may post notifications.
public enum UNAuthorizationStatus: Int, Sendable, Hashable, CaseIterable {
    case notDetermined = 0
    case denied = 1
    case authorized = 2
    case provisional = 3
    case ephemeral = 4
}

/// The state of one notification setting.
public enum UNNotificationSetting: Int, Sendable, Hashable, CaseIterable {
    case notSupported = 0
    case disabled = 1
    case enabled = 2
}

/// How alerts are shown.
public enum UNAlertStyle: Int, Sendable, Hashable, CaseIterable {
    case none = 0
    case banner = 1
    case alert = 2
}

/// When notification previews are shown.
public enum UNShowPreviewsSetting: Int, Sendable, Hashable, CaseIterable {
    case always = 0
    case whenAuthenticated = 1
    case never = 2
}

/// How urgently a notification interrupts the person.
public enum UNNotificationInterruptionLevel: UInt, Sendable, Hashable, CaseIterable {
    /// Added to the list without lighting the screen or playing a sound.
    case passive = 0
    /// The default: presented immediately, lights the screen, may play a sound.
    case active = 1
    /// Breaks through Focus and scheduled summaries.
    case timeSensitive = 2
    /// Bypasses the mute switch and Focus.
    case critical = 3
}

/// The action identifier of a tap on the notification itself.
public let UNNotificationDefaultActionIdentifier: String = ActionIdentifier.default
/// The action identifier of a dismissal (reported only for categories with
/// `.customDismissAction`).
public let UNNotificationDismissActionIdentifier: String = ActionIdentifier.dismiss
