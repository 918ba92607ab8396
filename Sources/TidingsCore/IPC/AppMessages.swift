import Foundation

// The app ↔ daemon protocol (docs/app-ipc.md): an app sends `AppRequest`s, each answered
// by one `AppReply` with the same id; the daemon sends `DaemonEvent`s on its own. Frames
// are a 4-byte big-endian length followed by the JSON of one `AppEnvelope`/`DaemonEnvelope`.

/// The identity an app claims when it connects.
public struct AppHello: Sendable, Hashable, Codable {
    /// The bundle identifier the process claims (`TIDINGS_BUNDLE_ID`), or nil to let the
    /// daemon find the app by the process's executable.
    public var bundleIdentifier: String?
    /// The process's idea of its state (`UIApplication.applicationState`).
    public var state: AppState
    /// Protocol version, for later changes.
    public var version: Int

    public init(bundleIdentifier: String?, state: AppState, version: Int = 1) {
        self.bundleIdentifier = bundleIdentifier
        self.state = state
        self.version = version
    }
}

/// The foreground state of an app process. See docs/app-ipc.md, "Foreground".
public enum AppState: String, Sendable, Hashable, Codable {
    case active, inactive, background
}

/// Why the daemon launched an app's process (`TIDINGS_LAUNCH_REASON`, docs/app-ipc.md):
/// for a person's response to a notification, or to deliver a silent push.
public enum LaunchReason: String, Sendable, Hashable, Codable {
    case response
    case remoteNotification = "remote-notification"
}

public enum AppRequest: Sendable, Hashable, Codable {
    case hello(AppHello)
    /// Opens an admin connection (the `tidings` CLI) instead of an app's.
    case adminHello
    case admin(AdminRequest)
    case requestAuthorization(AuthorizationOptionsValue)
    case getSettings
    case setCategories([CategoryValue])
    case getCategories
    case add(NotificationRequestValue)
    case getPending
    case removePending([String])
    case removeAllPending
    case getDelivered
    case removeDelivered([String])
    case removeAllDelivered
    case setBadge(Int)
    /// The app set (true) or cleared (false) its delegate; held responses flow once true.
    case setDelegate(Bool)
    case setState(AppState)
    /// The app's answer to `DaemonEvent.willPresent`.
    case presentationDecision(eventID: UInt64, options: PresentationOptionsValue)
    /// The app called the completion handler of `didReceive`.
    case responseHandled(eventID: UInt64)
    /// The app called the completion handler of a background (silent push) wake.
    case backgroundFetchCompleted(eventID: UInt64, result: Int)
    /// `UIApplication.registerForRemoteNotifications()`: answered with `deviceToken`, or a
    /// failure when no gateway is configured or reachable (docs/remote-notifications.md).
    case registerForRemoteNotifications
    /// `UIApplication.unregisterForRemoteNotifications()`: the app's tokens die at the gateway.
    case unregisterForRemoteNotifications
    /// The process has (true) or no longer has (false) an application delegate for silent
    /// pushes; held `remoteNotification` events flow once true.
    case setRemoteNotificationDelegate(Bool)
    /// Like `getPending`, answered with `pendingRequests`: each request with the date it
    /// fires next, which `UNTimeIntervalNotificationTrigger.nextTriggerDate()` reports.
    case getPendingScheduled
}

public enum AppReply: Sendable, Hashable, Codable {
    case ok
    case failure(NotificationError)
    case hello(bundleIdentifier: String, displayName: String)
    case authorization(granted: Bool)
    case settings(NotificationSettingsValue)
    case categories([CategoryValue])
    case requests([NotificationRequestValue])
    case notifications([DeliveredNotificationValue])
    /// `add` succeeded; the attachments as stored in the data store.
    case added(NotificationRequestValue)
    case admin(AdminReply)
    /// `registerForRemoteNotifications` succeeded: the app's device token (32 bytes).
    case deviceToken([UInt8])
    /// The answer to `getPendingScheduled`.
    case pendingRequests([PendingRequestValue])
}

/// A pending request with its scheduled fire date (nil for location triggers).
public struct PendingRequestValue: Sendable, Hashable, Codable {
    public var request: NotificationRequestValue
    public var nextTriggerDate: Date?

    public init(request: NotificationRequestValue, nextTriggerDate: Date?) {
        self.request = request
        self.nextTriggerDate = nextTriggerDate
    }
}

public enum DaemonEvent: Sendable, Hashable, Codable {
    /// A notification arrives while the app is in the foreground: answer with
    /// `AppRequest.presentationDecision`.
    case willPresent(eventID: UInt64, notification: DeliveredNotificationValue)
    /// The person responded: answer with `AppRequest.responseHandled`.
    case didReceive(eventID: UInt64, response: ResponseValue)
    /// The person asked for the app's own notification settings.
    case openSettings(eventID: UInt64, notification: DeliveredNotificationValue?)
    /// The person changed this app's settings.
    case settingsChanged(NotificationSettingsValue)
    /// A silent push for the app (`content-available`): answer with `backgroundFetchCompleted`.
    case remoteNotification(eventID: UInt64, userInfo: [String: PropertyListValue])
}

public struct AppEnvelope: Sendable, Hashable, Codable {
    public var id: UInt64
    public var request: AppRequest
    public init(id: UInt64, request: AppRequest) {
        self.id = id
        self.request = request
    }
}

public enum DaemonEnvelope: Sendable, Hashable, Codable {
    case reply(id: UInt64, AppReply)
    case event(DaemonEvent)
}
