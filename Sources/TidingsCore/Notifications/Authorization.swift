import Foundation

/// `UNAuthorizationOptions` raw bits.
public struct AuthorizationOptionsValue: OptionSet, Sendable, Hashable, Codable {
    public var rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let badge = AuthorizationOptionsValue(rawValue: 1 << 0)
    public static let sound = AuthorizationOptionsValue(rawValue: 1 << 1)
    public static let alert = AuthorizationOptionsValue(rawValue: 1 << 2)
    public static let carPlay = AuthorizationOptionsValue(rawValue: 1 << 3)
    public static let criticalAlert = AuthorizationOptionsValue(rawValue: 1 << 4)
    public static let providesAppNotificationSettings = AuthorizationOptionsValue(rawValue: 1 << 5)
    public static let provisional = AuthorizationOptionsValue(rawValue: 1 << 6)
    public static let announcement = AuthorizationOptionsValue(rawValue: 1 << 7)
    public static let timeSensitive = AuthorizationOptionsValue(rawValue: 1 << 8)
}

/// `UNAuthorizationStatus` raw values.
public enum AuthorizationStatusValue: Int, Sendable, Hashable, Codable, CaseIterable {
    case notDetermined = 0, denied = 1, authorized = 2, provisional = 3, ephemeral = 4

    public var name: String {
        switch self {
        case .notDetermined: "notDetermined"
        case .denied: "denied"
        case .authorized: "authorized"
        case .provisional: "provisional"
        case .ephemeral: "ephemeral"
        }
    }
}

/// `UNNotificationSetting` raw values.
public enum SettingValue: Int, Sendable, Hashable, Codable, CaseIterable {
    case notSupported = 0, disabled = 1, enabled = 2

    public var name: String {
        switch self {
        case .notSupported: "notSupported"
        case .disabled: "disabled"
        case .enabled: "enabled"
        }
    }
}

/// `UNAlertStyle` raw values.
public enum AlertStyleValue: Int, Sendable, Hashable, Codable, CaseIterable {
    case none = 0, banner = 1, alert = 2
    public var name: String {
        switch self {
        case .none: "none"
        case .banner: "banner"
        case .alert: "alert"
        }
    }
}

/// `UNShowPreviewsSetting` raw values.
public enum ShowPreviewsValue: Int, Sendable, Hashable, Codable, CaseIterable {
    case always = 0, whenAuthenticated = 1, never = 2
    public var name: String {
        switch self {
        case .always: "always"
        case .whenAuthenticated: "whenAuthenticated"
        case .never: "never"
        }
    }
}

/// `UNNotificationSettings`' state: the person's choices for one app.
/// Settings ▸ Notifications ▸ Notification Grouping: by thread (automatic), one stack per
/// app, or none.
public enum NotificationGroupingValue: String, Sendable, Hashable, Codable, CaseIterable {
    case automatic, byApp, off
}

public struct NotificationSettingsValue: Sendable, Hashable, Codable {
    public var authorizationStatus: AuthorizationStatusValue = .notDetermined
    public var soundSetting: SettingValue = .notSupported
    public var badgeSetting: SettingValue = .notSupported
    public var alertSetting: SettingValue = .notSupported
    public var notificationCenterSetting: SettingValue = .notSupported
    public var lockScreenSetting: SettingValue = .notSupported
    public var carPlaySetting: SettingValue = .notSupported
    public var alertStyle: AlertStyleValue = .none
    public var showPreviewsSetting: ShowPreviewsValue = .always
    public var criticalAlertSetting: SettingValue = .notSupported
    public var providesAppNotificationSettings: Bool = false
    public var announcementSetting: SettingValue = .notSupported
    public var timeSensitiveSetting: SettingValue = .notSupported
    public var scheduledDeliverySetting: SettingValue = .notSupported
    public var directMessagesSetting: SettingValue = .notSupported
    /// Settings ▸ Notifications ▸ Notification Grouping (how the center stacks the app's
    /// notifications; iOS has no API for it); nil: automatic. Optional, so settings stored
    /// before it existed still decode.
    public var grouping: NotificationGroupingValue?

    public init() {}

    /// The settings a grant of `options` produces. `provisional` delivers quietly:
    /// notification center only, no alert, sound or lock-screen banner.
    public static func granted(_ options: AuthorizationOptionsValue, provisional: Bool) -> NotificationSettingsValue {
        var s = NotificationSettingsValue()
        s.authorizationStatus = provisional ? .provisional : .authorized
        let on: (AuthorizationOptionsValue) -> SettingValue = { options.contains($0) ? .enabled : .disabled }
        s.badgeSetting = on(.badge)
        s.soundSetting = provisional ? .disabled : on(.sound)
        s.alertSetting = provisional ? .disabled : on(.alert)
        s.notificationCenterSetting = .enabled
        s.lockScreenSetting = provisional ? .disabled : on(.alert)
        s.carPlaySetting = provisional ? .disabled : on(.carPlay)
        s.alertStyle = provisional || !options.contains(.alert) ? .none : .banner
        s.criticalAlertSetting = on(.criticalAlert)
        s.providesAppNotificationSettings = options.contains(.providesAppNotificationSettings)
        s.announcementSetting = on(.announcement)
        s.timeSensitiveSetting = on(.timeSensitive)
        s.scheduledDeliverySetting = .disabled
        s.directMessagesSetting = .notSupported
        return s
    }

    /// The settings after a denial: every channel disabled.
    public static var deniedSettings: NotificationSettingsValue {
        var s = NotificationSettingsValue()
        s.authorizationStatus = .denied
        s.badgeSetting = .disabled
        s.soundSetting = .disabled
        s.alertSetting = .disabled
        s.notificationCenterSetting = .disabled
        s.lockScreenSetting = .disabled
        s.carPlaySetting = .disabled
        s.criticalAlertSetting = .disabled
        s.announcementSetting = .disabled
        s.timeSensitiveSetting = .disabled
        s.scheduledDeliverySetting = .disabled
        return s
    }

    public var isAllowed: Bool {
        authorizationStatus == .authorized || authorizationStatus == .provisional || authorizationStatus == .ephemeral
    }
}

/// `UNNotificationPresentationOptions` raw bits.
public struct PresentationOptionsValue: OptionSet, Sendable, Hashable, Codable {
    public var rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let badge = PresentationOptionsValue(rawValue: 1 << 0)
    public static let sound = PresentationOptionsValue(rawValue: 1 << 1)
    public static let alert = PresentationOptionsValue(rawValue: 1 << 2)
    public static let list = PresentationOptionsValue(rawValue: 1 << 3)
    public static let banner = PresentationOptionsValue(rawValue: 1 << 4)
}
