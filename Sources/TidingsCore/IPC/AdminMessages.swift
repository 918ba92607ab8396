import Foundation

// The person's side of the daemon socket: the `tidings` CLI (and later the web UI) installs
// apps, changes settings, lists notifications and answers them. Admin connections open with
// `AppRequest.adminHello` and are accepted only from the daemon's own user (or root).

public enum AdminRequest: Sendable, Hashable, Codable {
    case installApp(AppRecord)
    case removeApp(String)
    case listApps
    case settings(String)
    case changeSettings(String, SettingsChange)
    /// Delivered notifications of one app, or of all.
    case delivered(bundleIdentifier: String?)
    case pending(bundleIdentifier: String?)
    /// The person acts on a delivered notification (tap, action, text reply, dismiss).
    case respond(bundleIdentifier: String?, identifier: String, actionIdentifier: String, userText: String?)
    case openSettings(bundleIdentifier: String, identifier: String?)
    /// A position for location triggers (a scripted location provider).
    case location(latitude: Double, longitude: Double)
}

public enum AdminReply: Sendable, Hashable, Codable {
    case ok
    case failure(NotificationError)
    case apps([AppRecord])
    case settings(NotificationSettingsValue)
    case notifications([AppNotification])
    case requests([AppPendingRequest])
}

/// A delivered notification with its app and category, for the person's list.
public struct AppNotification: Sendable, Hashable, Codable {
    public var bundleIdentifier: String
    public var appName: String
    public var notification: DeliveredNotificationValue
    public var category: CategoryValue?

    public init(bundleIdentifier: String, appName: String, notification: DeliveredNotificationValue, category: CategoryValue?) {
        self.bundleIdentifier = bundleIdentifier
        self.appName = appName
        self.notification = notification
        self.category = category
    }
}

public struct AppPendingRequest: Sendable, Hashable, Codable {
    public var bundleIdentifier: String
    public var request: NotificationRequestValue

    public init(bundleIdentifier: String, request: NotificationRequestValue) {
        self.bundleIdentifier = bundleIdentifier
        self.request = request
    }
}

/// A change the person makes to an app's notification settings; nil leaves a setting as it is.
public struct SettingsChange: Sendable, Hashable, Codable {
    public var authorizationStatus: AuthorizationStatusValue?
    public var alert: SettingValue?
    public var sound: SettingValue?
    public var badge: SettingValue?
    public var notificationCenter: SettingValue?
    public var lockScreen: SettingValue?
    public var alertStyle: AlertStyleValue?
    public var showPreviews: ShowPreviewsValue?
    public var timeSensitive: SettingValue?
    public var criticalAlert: SettingValue?
    public var grouping: NotificationGroupingValue?

    public init(authorizationStatus: AuthorizationStatusValue? = nil, alert: SettingValue? = nil, sound: SettingValue? = nil, badge: SettingValue? = nil, notificationCenter: SettingValue? = nil, lockScreen: SettingValue? = nil, alertStyle: AlertStyleValue? = nil, showPreviews: ShowPreviewsValue? = nil, timeSensitive: SettingValue? = nil, criticalAlert: SettingValue? = nil, grouping: NotificationGroupingValue? = nil) {
        self.grouping = grouping
        self.authorizationStatus = authorizationStatus
        self.alert = alert
        self.sound = sound
        self.badge = badge
        self.notificationCenter = notificationCenter
        self.lockScreen = lockScreen
        self.alertStyle = alertStyle
        self.showPreviews = showPreviews
        self.timeSensitive = timeSensitive
        self.criticalAlert = criticalAlert
    }

    public func apply(to settings: inout NotificationSettingsValue) {
        // The grouping is the person's choice of how to see the app: it outlives turning
        // notifications off and on.
        let grouping = self.grouping ?? settings.grouping
        defer { settings.grouping = grouping }
        if let authorizationStatus {
            let wasAllowed = settings.isAllowed
            settings.authorizationStatus = authorizationStatus
            if authorizationStatus == .denied {
                settings = .deniedSettings
            } else if !wasAllowed, settings.isAllowed {
                // Turning notifications on in Settings enables the usual channels.
                let kept = settings.authorizationStatus
                settings = .granted([.alert, .sound, .badge], provisional: kept == .provisional)
                settings.authorizationStatus = kept
            }
        }
        if let alert { settings.alertSetting = alert; settings.alertStyle = alert == .enabled ? (settings.alertStyle == .none ? .banner : settings.alertStyle) : .none }
        if let sound { settings.soundSetting = sound }
        if let badge { settings.badgeSetting = badge }
        if let notificationCenter { settings.notificationCenterSetting = notificationCenter }
        if let lockScreen { settings.lockScreenSetting = lockScreen }
        if let alertStyle { settings.alertStyle = alertStyle }
        if let showPreviews { settings.showPreviewsSetting = showPreviews }
        if let timeSensitive { settings.timeSensitiveSetting = timeSensitive }
        if let criticalAlert { settings.criticalAlertSetting = criticalAlert }
    }
}
