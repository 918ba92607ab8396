import Foundation
import Synchronization
import TidingsCore
@_spi(Tidings) import UserNotifications

/// The result an app reports when it finishes handling a silent push
/// (`UIBackgroundFetchResult`).
public enum UIBackgroundFetchResult: UInt, Sendable {
    case newData = 0
    case noData = 1
    case failed = 2
}

/// The app delegate's launch and notification callbacks, with UIKit's names
/// (`UIApplicationDelegate`, main-actor as in UIKit). Every method has a default (Apple's
/// are optional): the launch methods return true, the silent-push method calls the
/// pre-iOS 7 `didReceiveRemoteNotification` and reports `.noData`, each `withResponseInfo`
/// action method calls the one without it, whose default completes. The pre-iOS 10
/// callbacks (deprecated as in UIKit) are called only for an app that uses the legacy API
/// (UIApplication+LegacyNotifications.swift) and sets no `UNUserNotificationCenter`
/// delegate, as on iOS 10 and later.
@MainActor
public protocol UIApplicationDelegate: AnyObject {
    func application(_ application: UIApplication, willFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool
    func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool

    func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data)
    func application(_ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error)
    func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
                     fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void)

    @available(iOS, introduced: 3.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate willPresentNotification:withCompletionHandler:] or -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:] for user visible notifications and -[UIApplicationDelegate application:didReceiveRemoteNotification:fetchCompletionHandler:] for silent remote notifications")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate willPresentNotification:withCompletionHandler:] or -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:] for user visible notifications and -[UIApplicationDelegate application:didReceiveRemoteNotification:fetchCompletionHandler:] for silent remote notifications")
    func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any])

    @available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenter requestAuthorizationWithOptions:completionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenter requestAuthorizationWithOptions:completionHandler:]")
    func application(_ application: UIApplication, didRegister notificationSettings: UIUserNotificationSettings)

    @available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate willPresentNotification:withCompletionHandler:] or -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate willPresentNotification:withCompletionHandler:] or -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    func application(_ application: UIApplication, didReceive notification: UILocalNotification)

    @available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, for notification: UILocalNotification, completionHandler: @escaping () -> Void)

    @available(iOS, introduced: 9.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, for notification: UILocalNotification, withResponseInfo responseInfo: [AnyHashable: Any], completionHandler: @escaping () -> Void)

    @available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, forRemoteNotification userInfo: [AnyHashable: Any], completionHandler: @escaping () -> Void)

    @available(iOS, introduced: 9.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, forRemoteNotification userInfo: [AnyHashable: Any], withResponseInfo responseInfo: [AnyHashable: Any], completionHandler: @escaping () -> Void)
}

extension UIApplicationDelegate {
    public func application(_ application: UIApplication, willFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool { true }
    public func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool { true }
    public func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) {}
    public func application(_ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error) {}

    /// UIKit calls the pre-iOS 7 method when this one is not implemented.
    public func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
                            fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void) {
        let routing: any LegacyNotificationRouting = application
        routing.callPreIOS7RemoteMethod(of: self, userInfo: userInfo)
        completionHandler(.noData)
    }

    @available(*, deprecated)
    public func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any]) {}

    @available(*, deprecated)
    public func application(_ application: UIApplication, didRegister notificationSettings: UIUserNotificationSettings) {}

    @available(*, deprecated)
    public func application(_ application: UIApplication, didReceive notification: UILocalNotification) {}

    @available(*, deprecated)
    public func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, for notification: UILocalNotification, completionHandler: @escaping () -> Void) {
        completionHandler()
    }

    /// UIKit calls the iOS 8 method (without `responseInfo`) when this one is not implemented.
    @available(*, deprecated)
    public func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, for notification: UILocalNotification, withResponseInfo responseInfo: [AnyHashable: Any], completionHandler: @escaping () -> Void) {
        self.application(application, handleActionWithIdentifier: identifier, for: notification, completionHandler: completionHandler)
    }

    @available(*, deprecated)
    public func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, forRemoteNotification userInfo: [AnyHashable: Any], completionHandler: @escaping () -> Void) {
        completionHandler()
    }

    @available(*, deprecated)
    public func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, forRemoteNotification userInfo: [AnyHashable: Any], withResponseInfo responseInfo: [AnyHashable: Any], completionHandler: @escaping () -> Void) {
        self.application(application, handleActionWithIdentifier: identifier, forRemoteNotification: userInfo, completionHandler: completionHandler)
    }
}

/// Why registration failed: no gateway configured or reachable, or no daemon.
public struct RemoteNotificationRegistrationError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// The daemon's `UNError`-style code (1403: the daemon or its gateway is unavailable).
    public var code: Int
    public var message: String
    public var description: String { message }
    public var errorDescription: String? { message }
}

/// The part of `UIApplication` that remote notifications need, for apps on Linux:
/// registration for a device token, unregistration, and the silent-push callback.
///
/// ```swift
/// UIApplication.shared.delegate = appDelegate      // gets the token, errors, silent pushes
/// UIApplication.shared.registerForRemoteNotifications()
/// // or: let token = try await UIApplication.shared.deviceTokenForRemoteNotifications()
/// ```
/// It talks to the notification daemon over its own connection; the daemon asks its push
/// gateway for the token of topic = the app's bundle ID. The token stays the same across
/// launches and daemon restarts, and changes when the app is removed and installed again.
@MainActor
public final class UIApplication {
    private let transport: any NotificationServiceTransport
    private var eventTask: Task<Void, Never>?
    private weak var storedDelegate: (any UIApplicationDelegate)?
    private let centerOverride: UNUserNotificationCenter?
    /// Whether the daemon started this process for a response
    /// (`TIDINGS_LAUNCH_REASON=response`; not for a silent push).
    let launchedForResponse: Bool
    /// The `UNUserNotificationCenter` delegate that turns notifications into the pre-iOS 10
    /// callbacks (a `LegacyNotificationBridge`), once the app uses the legacy API; also the
    /// center's delegate while `launch(with:)` waits for the response that launched the app.
    var legacyBridge: NSObject?
    /// True once the app called the legacy notification API (scheduling, registering).
    var usesLegacyAPI = false
    /// True while `launch(with:)` runs: silent pushes wait until `didFinishLaunching` returned.
    var isLaunching = false
    /// `legacyQueryTimeout` and `launchResponseTimeout` of this object (tests shorten them).
    @_spi(Tidings) public var queryTimeout = UIApplication.legacyQueryTimeout
    @_spi(Tidings) public var launchTimeout = UIApplication.launchResponseTimeout

    /// The process's application object.
    public static let shared = UIApplication(
        transport: makeDefaultTransport(),
        launchedForResponse: isResponseLaunch(ProcessInfo.processInfo.environment))

    /// Whether `environment` is that of a process the daemon launched for a response
    /// (`TIDINGS_LAUNCH_REASON=response`); a launch for a silent push is not.
    @_spi(Tidings) public nonisolated static func isResponseLaunch(_ environment: [String: String]) -> Bool {
        environment["TIDINGS_LAUNCH_REASON"] == LaunchReason.response.rawValue
    }

    /// An application object on another transport (tests: an in-process engine), with the
    /// notification center its legacy notification API uses (default: `.current()`).
    @_spi(Tidings) public init(transport: any NotificationServiceTransport, notificationCenter: UNUserNotificationCenter? = nil, launchedForResponse: Bool = false) {
        self.transport = transport
        self.centerOverride = notificationCenter
        self.launchedForResponse = launchedForResponse
    }

    /// The center the legacy notification API schedules through and listens on.
    @_spi(Tidings) public var notificationCenter: UNUserNotificationCenter { centerOverride ?? .current() }

    /// Keys of the launch options (`application(_:didFinishLaunchingWithOptions:)`).
    public struct LaunchOptionsKey: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }
    }

    /// The app delegate (held weakly, as UIKit does). Setting it tells the daemon that
    /// silent pushes can be delivered (during `launch(with:)`: once `didFinishLaunching`
    /// returned); a launch for a silent push waits for this.
    public var delegate: (any UIApplicationDelegate)? {
        get { storedDelegate }
        set {
            storedDelegate = newValue
            if !isLaunching { announceRemoteNotificationDelegate() }
        }
    }

    func announceRemoteNotificationDelegate() {
        startEvents()
        transport.send(.setRemoteNotificationDelegate(storedDelegate != nil))
    }

    /// True after a registration succeeded in this process, until `unregister…`.
    public private(set) var isRegisteredForRemoteNotifications = false

    /// Asks for the device token; the delegate's `didRegister…` or `didFail…` follows.
    public func registerForRemoteNotifications() {
        Task { @MainActor in
            do {
                let token = try await self.deviceTokenForRemoteNotifications()
                self.delegate?.application(self, didRegisterForRemoteNotificationsWithDeviceToken: token)
            } catch {
                self.delegate?.application(self, didFailToRegisterForRemoteNotificationsWithError: error)
            }
        }
    }

    /// The async form of `registerForRemoteNotifications()`: returns the device token
    /// (32 bytes) or throws `RemoteNotificationRegistrationError`; the delegate is not called.
    /// (A different name: an `async` overload of the same name would be chosen over UIKit's
    /// in every `async` context, breaking code written for iOS.)
    public func deviceTokenForRemoteNotifications() async throws -> Data {
        startEvents()
        let reply: AppReply
        do {
            reply = try await transport.call(.registerForRemoteNotifications)
        } catch {
            throw RemoteNotificationRegistrationError(code: error.code.rawValue, message: error.message)
        }
        switch reply {
        case .deviceToken(let bytes):
            isRegisteredForRemoteNotifications = true
            return Data(bytes)
        case .failure(let error):
            throw RemoteNotificationRegistrationError(code: error.code.rawValue, message: error.message)
        default:
            throw RemoteNotificationRegistrationError(code: NotificationError.Code.daemonUnavailable.rawValue, message: "the daemon answered with \(reply)")
        }
    }

    /// Stops remote notifications for the app: its tokens die at the gateway (providers
    /// get `410 Unregistered`); registering again later gives a new token.
    public func unregisterForRemoteNotifications() {
        isRegisteredForRemoteNotifications = false
        let transport = transport
        Task { _ = try? await transport.call(.unregisterForRemoteNotifications) }
    }

    private func startEvents() {
        guard eventTask == nil else { return }
        let stream = transport.events()
        eventTask = Task { @MainActor [weak self] in
            for await event in stream {
                guard let self else { return }
                self.handle(event)
            }
        }
    }

    private func handle(_ event: DaemonEvent) {
        guard case .remoteNotification(let eventID, let userInfo) = event else { return }
        let transport = transport
        let once = Mutex(false)
        let done: @Sendable (UIBackgroundFetchResult) -> Void = { result in
            guard once.withLock({ called in defer { called = true }; return !called }) else { return }
            transport.send(.backgroundFetchCompleted(eventID: eventID, result: Int(result.rawValue)))
        }
        guard let delegate else {
            done(.noData)
            return
        }
        delegate.application(self, didReceiveRemoteNotification: userInfo.reduce(into: [AnyHashable: Any]()) { $0[$1.key] = $1.value.anyValue }, fetchCompletionHandler: done)
    }
}
