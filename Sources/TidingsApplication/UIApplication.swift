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

/// The app delegate's remote-notification callbacks, with UIKit's names
/// (`UIApplicationDelegate`). Every method has a default that does nothing (Apple's are
/// optional); the silent-push default reports `.noData`.
@MainActor
public protocol UIApplicationDelegate: AnyObject {
    func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data)
    func application(_ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error)
    func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
                     fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void)
}

extension UIApplicationDelegate {
    public func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) {}
    public func application(_ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error) {}
    public func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
                            fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void) {
        completionHandler(.noData)
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

    /// The process's application object.
    public static let shared = UIApplication(transport: makeDefaultTransport())

    /// An application object on another transport (tests: an in-process engine).
    @_spi(Tidings) public init(transport: any NotificationServiceTransport) {
        self.transport = transport
    }

    /// The app delegate (held weakly, as UIKit does). Setting it tells the daemon that
    /// silent pushes can be delivered; a launch for a silent push waits for this.
    public var delegate: (any UIApplicationDelegate)? {
        get { storedDelegate }
        set {
            storedDelegate = newValue
            startEvents()
            transport.send(.setRemoteNotificationDelegate(newValue != nil))
        }
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
