import Foundation
import TidingsCore

/// A snapshot of the person's notification settings for the app. Immutable; ask again
/// with `getNotificationSettings` to see later changes.
public final class UNNotificationSettings: NSObject, NSCopying, NSSecureCoding, Sendable {
    let value: NotificationSettingsValue

    /// The daemon reports settings; this initializer exists for tests and tools.
    @_spi(Tidings) public init(_ value: NotificationSettingsValue) {
        self.value = value
    }

    public var authorizationStatus: UNAuthorizationStatus { UNAuthorizationStatus(rawValue: value.authorizationStatus.rawValue) ?? .notDetermined }
    public var soundSetting: UNNotificationSetting { Self.setting(value.soundSetting) }
    public var badgeSetting: UNNotificationSetting { Self.setting(value.badgeSetting) }
    public var alertSetting: UNNotificationSetting { Self.setting(value.alertSetting) }
    public var notificationCenterSetting: UNNotificationSetting { Self.setting(value.notificationCenterSetting) }
    public var lockScreenSetting: UNNotificationSetting { Self.setting(value.lockScreenSetting) }
    public var carPlaySetting: UNNotificationSetting { Self.setting(value.carPlaySetting) }
    public var alertStyle: UNAlertStyle { UNAlertStyle(rawValue: value.alertStyle.rawValue) ?? .none }
    public var showPreviewsSetting: UNShowPreviewsSetting { UNShowPreviewsSetting(rawValue: value.showPreviewsSetting.rawValue) ?? .always }
    public var criticalAlertSetting: UNNotificationSetting { Self.setting(value.criticalAlertSetting) }
    public var providesAppNotificationSettings: Bool { value.providesAppNotificationSettings }
    public var announcementSetting: UNNotificationSetting { Self.setting(value.announcementSetting) }
    public var timeSensitiveSetting: UNNotificationSetting { Self.setting(value.timeSensitiveSetting) }
    public var scheduledDeliverySetting: UNNotificationSetting { Self.setting(value.scheduledDeliverySetting) }
    public var directMessagesSetting: UNNotificationSetting { Self.setting(value.directMessagesSetting) }

    private static func setting(_ value: SettingValue) -> UNNotificationSetting {
        UNNotificationSetting(rawValue: value.rawValue) ?? .notSupported
    }

    public override func isEqual(_ object: Any?) -> Bool { (object as? UNNotificationSettings)?.value == value }
    public override var hash: Int { value.hashValue }

    /// Apple's format: `<UNNotificationSettings: 0x…; authorizationStatus: Authorized,
    /// notificationCenterSetting: Enabled, …, alertStyle: Banner, …>`.
    public override var description: String {
        func cap(_ name: String) -> String { name.prefix(1).uppercased() + name.dropFirst() }
        let address = String(UInt(bitPattern: ObjectIdentifier(self).hashValue), radix: 16)
        let fields: [(String, String)] = [
            ("authorizationStatus", cap(value.authorizationStatus.name)),
            ("notificationCenterSetting", cap(value.notificationCenterSetting.name)),
            ("soundSetting", cap(value.soundSetting.name)),
            ("badgeSetting", cap(value.badgeSetting.name)),
            ("lockScreenSetting", cap(value.lockScreenSetting.name)),
            ("carPlaySetting", cap(value.carPlaySetting.name)),
            ("announcementSetting", cap(value.announcementSetting.name)),
            ("criticalAlertSetting", cap(value.criticalAlertSetting.name)),
            ("timeSensitiveSetting", cap(value.timeSensitiveSetting.name)),
            ("alertSetting", cap(value.alertSetting.name)),
            ("scheduledDeliverySetting", cap(value.scheduledDeliverySetting.name)),
            ("directMessagesSetting", cap(value.directMessagesSetting.name)),
            ("alertStyle", cap(value.alertStyle.name)),
            ("showPreviewsSetting", cap(value.showPreviewsSetting.name)),
            ("providesAppNotificationSettings", value.providesAppNotificationSettings ? "Yes" : "No"),
        ]
        return "<UNNotificationSettings: 0x\(address); " + fields.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + ">"
    }

    public func copy(with zone: NSZone? = nil) -> Any { self }
    public static var supportsSecureCoding: Bool { true }
    public func encode(with coder: NSCoder) { ArchivedValue.encode(value, with: coder) }
    public init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(NotificationSettingsValue.self, from: coder) else { return nil }
        self.value = value
    }
}

extension UNAuthorizationStatus: CustomStringConvertible {
    public var description: String { AuthorizationStatusValue(rawValue: rawValue)?.name ?? "unknown" }
}

extension UNNotificationSetting: CustomStringConvertible {
    public var description: String { SettingValue(rawValue: rawValue)?.name ?? "unknown" }
}

extension UNAlertStyle: CustomStringConvertible {
    public var description: String { AlertStyleValue(rawValue: rawValue)?.name ?? "unknown" }
}

extension UNShowPreviewsSetting: CustomStringConvertible {
    public var description: String { ShowPreviewsValue(rawValue: rawValue)?.name ?? "unknown" }
}
