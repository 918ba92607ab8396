import ArgumentParser
import Foundation
import TidingsCore
import TidingsDaemon

enum Switch: String, ExpressibleByArgument, CaseIterable {
    case on, off
    var setting: SettingValue { self == .on ? .enabled : .disabled }
}

extension AlertStyleValue: ExpressibleByArgument {
    public init?(argument: String) {
        guard let value = Self.allCases.first(where: { $0.name == argument }) else { return nil }
        self = value
    }
    public static var allValueStrings: [String] { allCases.map(\.name) }
}

extension ShowPreviewsValue: ExpressibleByArgument {
    public init?(argument: String) {
        guard let value = Self.allCases.first(where: { $0.name == argument }) else { return nil }
        self = value
    }
    public static var allValueStrings: [String] { allCases.map(\.name) }
}

extension NotificationGroupingValue: ExpressibleByArgument {}

struct Settings: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or change an app's notification settings, as the person does in Settings.")

    @Argument(help: "The app's bundle identifier.") var bundleIdentifier: String
    @Flag(help: "Allow notifications.") var allow = false
    @Flag(help: "Turn notifications off.") var deny = false
    @Option(help: "Banners and alerts (on|off).") var alerts: Switch?
    @Option(help: "Sounds (on|off).") var sounds: Switch?
    @Option(help: "Badges (on|off).") var badges: Switch?
    @Option(name: .customLong("list"), help: "Notification center list (on|off).") var list: Switch?
    @Option(name: .customLong("lock-screen"), help: "Lock screen (on|off).") var lockScreen: Switch?
    @Option(help: "Alert style: none, banner or alert.") var style: AlertStyleValue?
    @Option(help: "Show previews: always, whenAuthenticated or never.") var previews: ShowPreviewsValue?
    @Option(help: "Notification grouping, as Settings ▸ Notifications shows it: automatic (by thread), byApp or off.")
    var grouping: NotificationGroupingValue?
    @OptionGroup var location: LocationOptions

    func validate() throws {
        if allow && deny { throw ValidationError("--allow and --deny contradict each other") }
    }

    func run() async throws {
        let admin = try await location.admin()
        let change = SettingsChange(
            authorizationStatus: allow ? .authorized : deny ? .denied : nil,
            alert: alerts?.setting, sound: sounds?.setting, badge: badges?.setting,
            notificationCenter: list?.setting, lockScreen: lockScreen?.setting,
            alertStyle: style, showPreviews: previews, grouping: grouping)
        let reply = try await admin.run(change == SettingsChange() ? .settings(bundleIdentifier) : .changeSettings(bundleIdentifier, change))
        guard case .settings(let settings) = reply else { return }
        print(Self.describe(settings, bundleIdentifier: bundleIdentifier))
    }

    static func describe(_ s: NotificationSettingsValue, bundleIdentifier: String) -> String {
        """
        \(bundleIdentifier)
          authorizationStatus        \(s.authorizationStatus.name)
          alertSetting               \(s.alertSetting.name)
          alertStyle                 \(s.alertStyle.name)
          soundSetting               \(s.soundSetting.name)
          badgeSetting               \(s.badgeSetting.name)
          notificationCenterSetting  \(s.notificationCenterSetting.name)
          lockScreenSetting          \(s.lockScreenSetting.name)
          carPlaySetting             \(s.carPlaySetting.name)
          showPreviewsSetting        \(s.showPreviewsSetting.name)
          criticalAlertSetting       \(s.criticalAlertSetting.name)
          timeSensitiveSetting       \(s.timeSensitiveSetting.name)
          announcementSetting        \(s.announcementSetting.name)
          scheduledDeliverySetting   \(s.scheduledDeliverySetting.name)
          directMessagesSetting      \(s.directMessagesSetting.name)
          providesAppNotificationSettings \(s.providesAppNotificationSettings)
          grouping                   \((s.grouping ?? .automatic).rawValue)
        """
    }
}
