import Foundation
import TidingsCore
import UserNotifications

// The pre-iOS 10 notification API of UIKit (UILocalNotification.h,
// UIUserNotificationSettings.h), for apps ported from older code. Declared as the iOS SDK
// declares them: main-actor classes (`NS_SWIFT_UI_ACTOR`), deprecated in iOS 10 with
// Apple's messages. `@available(*, deprecated, …)` makes the deprecation show on Linux
// too. UIApplication+LegacyNotifications.swift maps them onto UserNotifications; see
// docs/legacy-api.md.

/// The name of the default alert sound (`UNNotificationSound.default` in UserNotifications).
@available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's +[UNNotificationSound defaultSound]")
@available(*, deprecated, message: "Use UserNotifications Framework's +[UNNotificationSound defaultSound]")
public let UILocalNotificationDefaultSoundName = "UILocalNotificationDefaultSoundName"

/// A notification the app schedules for a date, a repeat interval or a region
/// (`UNNotificationRequest` with a calendar or location trigger in UserNotifications).
@available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNNotificationRequest")
@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationRequest")
@MainActor
open class UILocalNotification: NSObject, @MainActor NSCopying {
    /// When it fires; nil fires at once.
    open var fireDate: Date?
    /// nil: `fireDate` is an absolute time (an egg timer). A time zone: `fireDate` is a
    /// wall-clock time that follows the device's time zone (an alarm clock).
    open var timeZone: TimeZone?
    /// 0 (`[]`) does not repeat.
    open var repeatInterval: NSCalendar.Unit = []
    open var repeatCalendar: Calendar?
    /// Fires on entering or leaving the region instead of at a date.
    open var region: CLRegion?
    /// true (the default): fires once for the region; false: every time.
    open var regionTriggersOnce = true
    open var alertBody: String?
    /// Dropped by UserNotifications (no equivalent).
    open var hasAction = true
    /// Dropped by UserNotifications (no equivalent).
    open var alertAction: String?
    open var alertLaunchImage: String?
    open var alertTitle: String?
    /// A sound in the app's bundle, or `UILocalNotificationDefaultSoundName`; nil is silent.
    open var soundName: String?
    /// 0 leaves the badge unchanged.
    open var applicationIconBadgeNumber = 0
    open var userInfo: [AnyHashable: Any]?
    open var category: String?

    /// The identifier of the request this notification was read back from
    /// (`scheduledLocalNotifications`, delegate callbacks), so cancelling it finds it.
    var requestIdentifier: String?

    public override init() {
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any {
        let copy = UILocalNotification()
        copy.fireDate = fireDate
        copy.timeZone = timeZone
        copy.repeatInterval = repeatInterval
        copy.repeatCalendar = repeatCalendar
        copy.region = region
        copy.regionTriggersOnce = regionTriggersOnce
        copy.alertBody = alertBody
        copy.hasAction = hasAction
        copy.alertAction = alertAction
        copy.alertLaunchImage = alertLaunchImage
        copy.alertTitle = alertTitle
        copy.soundName = soundName
        copy.applicationIconBadgeNumber = applicationIconBadgeNumber
        copy.userInfo = userInfo
        copy.category = category
        copy.requestIdentifier = requestIdentifier
        return copy
    }

    /// The fields as a value: what `cancelLocalNotification(_:)` matches on (UIKit matches
    /// an equal notification), through the identifier of the scheduled request.
    var identity: LegacyNotificationIdentity {
        LegacyNotificationIdentity(
            fireDate: fireDate, timeZone: timeZone?.identifier, repeatInterval: repeatInterval.rawValue,
            repeatCalendar: repeatCalendar.map { "\($0.identifier)" },
            region: (region as? CLCircularRegion).map { "\($0.identifier)|\($0.center.latitude)|\($0.center.longitude)|\($0.radius)|\($0.notifyOnEntry)|\($0.notifyOnExit)" } ?? region.map { "\($0.identifier)" },
            regionTriggersOnce: regionTriggersOnce, alertBody: alertBody, hasAction: hasAction, alertAction: alertAction,
            alertLaunchImage: alertLaunchImage, alertTitle: alertTitle, soundName: soundName,
            applicationIconBadgeNumber: applicationIconBadgeNumber,
            userInfo: userInfo.flatMap { PropertyListValue(any: $0) }, category: category)
    }
}

/// Every field of a `UILocalNotification`, for equality and a stable request identifier.
struct LegacyNotificationIdentity: Hashable, Encodable {
    var fireDate: Date?
    var timeZone: String?
    var repeatInterval: UInt
    var repeatCalendar: String?
    var region: String?
    var regionTriggersOnce: Bool
    var alertBody: String?
    var hasAction: Bool
    var alertAction: String?
    var alertLaunchImage: String?
    var alertTitle: String?
    var soundName: String?
    var applicationIconBadgeNumber: Int
    var userInfo: PropertyListValue?
    var category: String?

    /// `UILocalNotification.` and a 64-bit FNV-1a hash of the fields: the same notification
    /// always maps to the same request, so cancelling an equal notification (as UIKit
    /// matches them, by equality) needs no round trip to the daemon.
    var requestIdentifier: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.dateEncodingStrategy = .secondsSince1970
        let bytes = (try? encoder.encode(self)) ?? Data()
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return LegacyNotificationIdentity.prefix + String(hash, radix: 16)
    }

    static let prefix = "UILocalNotification."
    /// Ends the identifier of a notification presented with `presentLocalNotificationNow(_:)`.
    static let presentedNowSuffix = ".now"
}

/// What a notification may do: badge, sound, alert (`UNAuthorizationOptions`).
@available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNAuthorizationOptions")
@available(*, deprecated, message: "Use UserNotifications Framework's UNAuthorizationOptions")
public struct UIUserNotificationType: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static let badge = UIUserNotificationType(rawValue: 1 << 0)
    public static let sound = UIUserNotificationType(rawValue: 1 << 1)
    public static let alert = UIUserNotificationType(rawValue: 1 << 2)
}

@available(iOS, introduced: 9.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNNotificationAction or UNTextInputNotificationAction")
@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationAction or UNTextInputNotificationAction")
public enum UIUserNotificationActionBehavior: UInt, Sendable {
    case `default` = 0
    case textInput = 1
}

@available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNNotificationActionOptions")
@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationActionOptions")
public enum UIUserNotificationActivationMode: UInt, Sendable {
    case foreground = 0
    case background = 1
}

@available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNNotificationCategory actions] or -[UNNotificationCategory minimalActions]")
@available(*, deprecated, message: "Use UserNotifications Framework's -[UNNotificationCategory actions] or -[UNNotificationCategory minimalActions]")
public enum UIUserNotificationActionContext: UInt, Sendable {
    case `default` = 0
    case minimal = 1
}

/// The key of a text-input action's button title in `parameters`.
@available(iOS, introduced: 9.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNTextInputNotificationAction textInputButtonTitle]")
@available(*, deprecated, message: "Use UserNotifications Framework's -[UNTextInputNotificationAction textInputButtonTitle]")
public let UIUserNotificationTextInputActionButtonTitleKey = "UIUserNotificationTextInputActionButtonTitleKey"

/// The key of the typed text in a text-input action's `responseInfo`.
@available(iOS, introduced: 9.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNTextInputNotificationResponse userText]")
@available(*, deprecated, message: "Use UserNotifications Framework's -[UNTextInputNotificationResponse userText]")
public let UIUserNotificationActionResponseTypedTextKey = "UIUserNotificationActionResponseTypedTextKey"

/// What the app may do and its categories (`requestAuthorization` + `setNotificationCategories`).
@available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNNotificationSettings")
@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationSettings")
@MainActor
open class UIUserNotificationSettings: NSObject {
    public let types: UIUserNotificationType
    public let categories: Set<UIUserNotificationCategory>?

    public init(types: UIUserNotificationType, categories: Set<UIUserNotificationCategory>?) {
        self.types = types
        self.categories = categories
        super.init()
    }
}

/// A set of actions for notifications whose `category` names it (`UNNotificationCategory`).
@available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNNotificationCategory")
@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationCategory")
@MainActor
open class UIUserNotificationCategory: NSObject, @MainActor NSCopying, @MainActor NSMutableCopying {
    var storedIdentifier: String?
    var actionsByContext: [UIUserNotificationActionContext: [UIUserNotificationAction]] = [:]

    public override init() {
        super.init()
    }

    open var identifier: String? { storedIdentifier }

    /// The actions, in display order, for `context` (`.default`: up to 4; `.minimal`: 2).
    open func actions(for context: UIUserNotificationActionContext) -> [UIUserNotificationAction]? {
        actionsByContext[context]
    }

    open func copy(with zone: NSZone? = nil) -> Any { copy(into: UIUserNotificationCategory()) }
    open func mutableCopy(with zone: NSZone? = nil) -> Any { copy(into: UIMutableUserNotificationCategory()) }

    private func copy(into copy: UIUserNotificationCategory) -> UIUserNotificationCategory {
        copy.storedIdentifier = storedIdentifier
        copy.actionsByContext = actionsByContext
        return copy
    }
}

@available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNNotificationCategory")
@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationCategory")
@MainActor
open class UIMutableUserNotificationCategory: UIUserNotificationCategory {
    open override var identifier: String? {
        get { storedIdentifier }
        set { storedIdentifier = newValue }
    }

    open func setActions(_ actions: [UIUserNotificationAction]?, for context: UIUserNotificationActionContext) {
        actionsByContext[context] = actions
    }
}

/// A button of a notification (`UNNotificationAction`, `UNTextInputNotificationAction`).
@available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNNotificationAction")
@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationAction")
@MainActor
open class UIUserNotificationAction: NSObject, @MainActor NSCopying, @MainActor NSMutableCopying {
    var fields = Fields()

    struct Fields {
        var identifier: String?
        var title: String?
        var behavior: UIUserNotificationActionBehavior = .default
        var parameters: [AnyHashable: Any] = [:]
        var activationMode: UIUserNotificationActivationMode = .foreground
        var isAuthenticationRequired = false
        var isDestructive = false
    }

    public override init() {
        super.init()
    }

    open var identifier: String? { fields.identifier }
    open var title: String? { fields.title }
    open var behavior: UIUserNotificationActionBehavior { fields.behavior }
    open var parameters: [AnyHashable: Any] { fields.parameters }
    open var activationMode: UIUserNotificationActivationMode { fields.activationMode }
    open var isAuthenticationRequired: Bool { fields.isAuthenticationRequired }
    open var isDestructive: Bool { fields.isDestructive }

    open func copy(with zone: NSZone? = nil) -> Any {
        let copy = UIUserNotificationAction()
        copy.fields = fields
        return copy
    }

    open func mutableCopy(with zone: NSZone? = nil) -> Any {
        let copy = UIMutableUserNotificationAction()
        copy.fields = fields
        return copy
    }
}

@available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's UNNotificationAction")
@available(*, deprecated, message: "Use UserNotifications Framework's UNNotificationAction")
@MainActor
open class UIMutableUserNotificationAction: UIUserNotificationAction {
    open override var identifier: String? { get { fields.identifier } set { fields.identifier = newValue } }
    open override var title: String? { get { fields.title } set { fields.title = newValue } }
    open override var behavior: UIUserNotificationActionBehavior { get { fields.behavior } set { fields.behavior = newValue } }
    open override var parameters: [AnyHashable: Any] { get { fields.parameters } set { fields.parameters = newValue } }
    open override var activationMode: UIUserNotificationActivationMode { get { fields.activationMode } set { fields.activationMode = newValue } }
    open override var isAuthenticationRequired: Bool { get { fields.isAuthenticationRequired } set { fields.isAuthenticationRequired = newValue } }
    open override var isDestructive: Bool { get { fields.isDestructive } set { fields.isDestructive = newValue } }
}
