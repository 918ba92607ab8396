import Foundation
@_spi(Tidings) import UserNotifications

// UIApplication's pre-iOS 10 notification API, mapped onto UserNotifications: a
// UILocalNotification becomes a UNNotificationRequest scheduled through the app's
// UNUserNotificationCenter (so the same engine schedules, presents and answers it), and
// the center's delegate callbacks come back as the UIApplicationDelegate callbacks of the
// old API (seed 004's bridge). docs/legacy-api.md.

extension UIApplication.LaunchOptionsKey {
    /// The `UILocalNotification` whose response launched the app.
    @available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenterDelegate didReceiveNotificationResponse:withCompletionHandler:]")
    public static let localNotification = UIApplication.LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsLocalNotificationKey")

    /// The `userInfo` (payload) of the remote notification whose response launched the app.
    public static let remoteNotification = UIApplication.LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsRemoteNotificationKey")
}

extension UIApplication {
    /// How long `scheduledLocalNotifications` and `currentUserNotificationSettings` (UIKit's
    /// synchronous properties) wait for the daemon before answering empty.
    public static let legacyQueryTimeout: TimeInterval = 10

    /// How long `launch(with:)` waits, in a process the daemon started for a response, for
    /// that response before finishing the launch without it.
    public static let launchResponseTimeout: TimeInterval = 10

    // MARK: Scheduling

    /// Schedules `notification` (a copy: later changes do not affect it) as a request whose
    /// identifier is derived from its fields, so an equal notification cancels it.
    @available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenter addNotificationRequest:withCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenter addNotificationRequest:withCompletionHandler:]")
    public func scheduleLocalNotification(_ notification: UILocalNotification) {
        add(UNNotificationRequest(localNotification: notification))
    }

    /// Presents `notification` now, whatever its fire date, as a request of its own (the
    /// scheduled identifier plus `LegacyNotificationIdentity.presentedNowSuffix`): a
    /// scheduled copy of the same notification stays scheduled, as on iOS.
    @available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenter addNotificationRequest:withCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenter addNotificationRequest:withCompletionHandler:]")
    public func presentLocalNotificationNow(_ notification: UILocalNotification) {
        let request = UNNotificationRequest(localNotification: notification)
        add(UNNotificationRequest(identifier: request.identifier + LegacyNotificationIdentity.presentedNowSuffix, content: request.content, trigger: nil))
    }

    /// Cancels the scheduled notification equal to `notification` and withdraws it if
    /// shown, also when it was presented with `presentLocalNotificationNow(_:)`.
    @available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenter removePendingNotificationRequestsWithIdentifiers:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenter removePendingNotificationRequestsWithIdentifiers:]")
    public func cancelLocalNotification(_ notification: UILocalNotification) {
        var scheduled = notification.requestIdentifier ?? notification.identity.requestIdentifier
        if scheduled.hasSuffix(LegacyNotificationIdentity.presentedNowSuffix) {
            scheduled.removeLast(LegacyNotificationIdentity.presentedNowSuffix.count)
        }
        let identifiers = [scheduled, scheduled + LegacyNotificationIdentity.presentedNowSuffix]
        notificationCenter.removePendingNotificationRequests(withIdentifiers: identifiers)
        notificationCenter.removeDeliveredNotifications(withIdentifiers: identifiers)
    }

    /// Cancels every pending request of the app.
    @available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenter removeAllPendingNotificationRequests]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenter removeAllPendingNotificationRequests]")
    public func cancelAllLocalNotifications() {
        notificationCenter.removeAllPendingNotificationRequests()
    }

    /// The notifications scheduled with `scheduleLocalNotification(_:)` and not yet fired
    /// (repeating ones stay). Setting it replaces every pending request of the app. UIKit's
    /// property is synchronous: it waits for the daemon, at most `legacyQueryTimeout`.
    @available(iOS, introduced: 4.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenter getPendingNotificationRequestsWithCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenter getPendingNotificationRequestsWithCompletionHandler:]")
    public var scheduledLocalNotifications: [UILocalNotification]? {
        get {
            let requests = waitForDaemon { done in
                self.notificationCenter.getPendingNotificationRequests { done(Unchecked($0)) }
            }?.value ?? []
            return requests
                .filter { $0.identifier.hasPrefix(LegacyNotificationIdentity.prefix) }
                .map { UILocalNotification(request: $0, date: nil) }
        }
        set {
            cancelAllLocalNotifications()
            for notification in newValue ?? [] { scheduleLocalNotification(notification) }
        }
    }

    private func add(_ request: UNNotificationRequest) {
        installLegacyBridge()
        let center = notificationCenter
        let identifier = request.identifier
        let content = try? request.content.value()
        // UIKit fires a notification whose date has passed at once; the engine refuses a
        // calendar trigger with no date to come (`notificationInvalidNoDate`).
        center.add(request) { error in
            guard let error = error as? UNError, error.code == .notificationInvalidNoDate, let content else { return }
            center.add(UNNotificationRequest(identifier: identifier, content: UNNotificationContent(value: content), trigger: nil))
        }
    }

    // MARK: Registration

    /// Asks for the types (`requestAuthorization`) and registers the categories
    /// (`setNotificationCategories`); the delegate's `application(_:didRegister:)` gets the
    /// types allowed.
    @available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenter requestAuthorizationWithOptions:completionHandler:] and -[UNUserNotificationCenter setNotificationCategories:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenter requestAuthorizationWithOptions:completionHandler:] and -[UNUserNotificationCenter setNotificationCategories:]")
    public func registerUserNotificationSettings(_ notificationSettings: UIUserNotificationSettings) {
        installLegacyBridge()
        let center = notificationCenter
        center.setNotificationCategories(Set((notificationSettings.categories ?? []).map { UNNotificationCategory(userNotificationCategory: $0) }))
        var options: UNAuthorizationOptions = []
        if notificationSettings.types.contains(.badge) { options.insert(.badge) }
        if notificationSettings.types.contains(.sound) { options.insert(.sound) }
        if notificationSettings.types.contains(.alert) { options.insert(.alert) }
        let categories = Unchecked(notificationSettings.categories)
        Task { @MainActor in
            _ = try? await center.requestAuthorization(options: options)
            let granted = Self.types(await center.notificationSettings())
            self.delegate?.application(self, didRegister: UIUserNotificationSettings(types: granted, categories: categories.value))
        }
    }

    /// The types allowed and the registered categories. UIKit's property is synchronous:
    /// it waits for the daemon, at most `legacyQueryTimeout`.
    @available(iOS, introduced: 8.0, deprecated: 10.0, message: "Use UserNotifications Framework's -[UNUserNotificationCenter getNotificationSettingsWithCompletionHandler:] and -[UNUserNotificationCenter getNotificationCategoriesWithCompletionHandler:]")
    @available(*, deprecated, message: "Use UserNotifications Framework's -[UNUserNotificationCenter getNotificationSettingsWithCompletionHandler:] and -[UNUserNotificationCenter getNotificationCategoriesWithCompletionHandler:]")
    public var currentUserNotificationSettings: UIUserNotificationSettings? {
        let center = notificationCenter
        guard let answer = waitForDaemon({ done in
            // Detached: this thread, the main actor's, waits for it.
            Task.detached {
                let settings = await center.notificationSettings()
                let categories = await center.notificationCategories()
                done(Unchecked((settings, categories)))
            }
        })?.value else { return nil }
        return UIUserNotificationSettings(types: Self.types(answer.0),
                                          categories: Set(answer.1.map { UIUserNotificationCategory(category: $0) }))
    }

    @available(*, deprecated)
    static func types(_ settings: UNNotificationSettings) -> UIUserNotificationType {
        guard settings.authorizationStatus == .authorized || settings.authorizationStatus == .provisional else { return [] }
        var types: UIUserNotificationType = []
        if settings.badgeSetting == .enabled { types.insert(.badge) }
        if settings.soundSetting == .enabled { types.insert(.sound) }
        if settings.alertSetting == .enabled { types.insert(.alert) }
        return types
    }

    /// Waits on the main thread for an answer that arrives on another thread (UIKit's
    /// synchronous properties); nil after `legacyQueryTimeout`.
    private func waitForDaemon<T>(_ start: (@escaping @Sendable (Unchecked<T>) -> Void) -> Void) -> Unchecked<T>? {
        let semaphore = DispatchSemaphore(value: 0)
        let box = LockedBox<Unchecked<T>>()
        start { answer in
            box.set(answer)
            semaphore.signal()
        }
        guard semaphore.wait(timeout: .now() + queryTimeout) == .success else { return nil }
        return box.get()
    }

    // MARK: Delegate callbacks

    /// Makes the center's delegate turn notifications into the pre-iOS 10 callbacks, unless
    /// the app set a delegate of its own (then, as on iOS 10, the old callbacks are not used).
    /// Called by the legacy API only: an app that never uses it keeps its center as it set it.
    @discardableResult
    func installLegacyBridge() -> LegacyNotificationBridge? {
        usesLegacyAPI = true
        return attachBridge()
    }

    private func attachBridge() -> LegacyNotificationBridge? {
        if let bridge = legacyBridge as? LegacyNotificationBridge {
            return notificationCenter.delegate === bridge ? bridge : nil
        }
        guard notificationCenter.delegate == nil else { return nil }
        let bridge = LegacyNotificationBridge(application: self)
        legacyBridge = bridge
        notificationCenter.delegate = bridge
        return bridge
    }

    /// Sets the delegate and runs UIKit's launch sequence: `willFinishLaunchingWithOptions`
    /// then `didFinishLaunchingWithOptions`; silent pushes are delivered only after that, as
    /// on iOS. When the daemon started the process for a response
    /// (`TIDINGS_LAUNCH_REASON=response`), the options carry it (`.localNotification`: the
    /// `UILocalNotification`; `.remoteNotification`: the payload) and it is then handled as
    /// UIKit does: a `UNUserNotificationCenter` delegate set during launch receives it, else,
    /// in an app that used the legacy API while launching, a custom action goes to
    /// `handleActionWithIdentifier…`. Returns what the two methods return.
    @discardableResult
    public func launch(with delegate: any UIApplicationDelegate) async -> Bool {
        isLaunching = true
        self.delegate = delegate
        var launchResponse: (response: UNNotificationResponse, done: @Sendable () -> Void)?
        // The bridge is the center's delegate for the wait (the daemon sends a response only
        // to a center with a delegate); it stays only if the app uses the legacy API.
        if launchedForResponse, let bridge = attachBridge() {
            launchResponse = await bridge.awaitLaunchResponse(timeout: launchTimeout)
        }
        let routing: any LegacyNotificationRouting = self
        let options = launchResponse.map { routing.launchOptions(for: $0.response) }
        let willFinish = delegate.application(self, willFinishLaunchingWithOptions: options)
        let didFinish = delegate.application(self, didFinishLaunchingWithOptions: options)
        let center = notificationCenter
        if !usesLegacyAPI, let bridge = legacyBridge {
            if center.delegate === bridge { center.delegate = nil }
            legacyBridge = nil
        }
        if let launchResponse {
            let (response, done) = (launchResponse.response, launchResponse.done)
            if let appDelegate = center.delegate, appDelegate !== legacyBridge {
                appDelegate.userNotificationCenter(center, didReceive: response, withCompletionHandler: done)
            } else if usesLegacyAPI, response.actionIdentifier != UNNotificationDefaultActionIdentifier {
                routing.deliverLegacy(response, completion: done)
            } else {
                done()
            }
        }
        isLaunching = false
        announceRemoteNotificationDelegate()
        return willFinish && didFinish
    }
}

/// The legacy machinery's entry points for code that is not itself deprecated (the bridge,
/// `launch(with:)`): their implementations use the deprecated API.
@MainActor
protocol LegacyNotificationRouting: AnyObject {
    func launchOptions(for response: UNNotificationResponse) -> [UIApplication.LaunchOptionsKey: Any]
    func deliverLegacy(_ notification: UNNotification)
    func deliverLegacy(_ response: UNNotificationResponse, completion: @escaping @Sendable () -> Void)
    /// `application(_:didReceiveRemoteNotification:)`, deprecated in iOS 10.
    func callPreIOS7RemoteMethod(of delegate: any UIApplicationDelegate, userInfo: [AnyHashable: Any])
}

extension UIApplication: LegacyNotificationRouting {
    @available(*, deprecated)
    func callPreIOS7RemoteMethod(of delegate: any UIApplicationDelegate, userInfo: [AnyHashable: Any]) {
        delegate.application(self, didReceiveRemoteNotification: userInfo)
    }

    @available(*, deprecated)
    func launchOptions(for response: UNNotificationResponse) -> [UIApplication.LaunchOptionsKey: Any] {
        let request = response.notification.request
        return request.trigger is UNPushNotificationTrigger
            ? [.remoteNotification: request.content.userInfo]
            : [.localNotification: UILocalNotification(request: request, date: response.notification.date)]
    }

    /// A notification arrived in the foreground: before iOS 10 it was not shown and went
    /// to the app delegate.
    @available(*, deprecated)
    func deliverLegacy(_ notification: UNNotification) {
        guard let delegate else { return }
        let request = notification.request
        if request.trigger is UNPushNotificationTrigger {
            delegate.application(self, didReceiveRemoteNotification: request.content.userInfo, fetchCompletionHandler: { _ in })
        } else {
            delegate.application(self, didReceive: UILocalNotification(request: request, date: notification.date))
        }
    }

    /// The person responded: a tap goes where a foreground notification goes, an action to
    /// `handleActionWithIdentifier…` (with the typed text in `responseInfo`), a dismissal
    /// nowhere (the old API had none).
    @available(*, deprecated)
    func deliverLegacy(_ response: UNNotificationResponse, completion: @escaping @Sendable () -> Void) {
        guard let delegate else { return completion() }
        let request = response.notification.request
        switch response.actionIdentifier {
        case UNNotificationDismissActionIdentifier:
            completion()
        case UNNotificationDefaultActionIdentifier:
            deliverLegacy(response.notification)
            completion()
        case let identifier:
            var responseInfo: [AnyHashable: Any] = [:]
            if let text = (response as? UNTextInputNotificationResponse)?.userText {
                responseInfo[UIUserNotificationActionResponseTypedTextKey] = text
            }
            if request.trigger is UNPushNotificationTrigger {
                delegate.application(self, handleActionWithIdentifier: identifier, forRemoteNotification: request.content.userInfo,
                                     withResponseInfo: responseInfo, completionHandler: { completion() })
            } else {
                delegate.application(self, handleActionWithIdentifier: identifier, for: UILocalNotification(request: request, date: response.notification.date),
                                     withResponseInfo: responseInfo, completionHandler: { completion() })
            }
        }
    }
}

/// The `UNUserNotificationCenter` delegate of an app that uses the pre-iOS 10 API: seed
/// 004's glue, which hands each UN callback to the matching `UIApplicationDelegate` one.
/// Foreground notifications are not shown (`[]`), as before iOS 10.
@MainActor
final class LegacyNotificationBridge: NSObject, @MainActor UNUserNotificationCenterDelegate {
    private unowned let application: any LegacyNotificationRouting
    private var launchWaiter: CheckedContinuation<Unchecked<(UNNotificationResponse, @Sendable () -> Void)>?, Never>?
    private var launchTimeout: Task<Void, Never>?

    init(application: any LegacyNotificationRouting) {
        self.application = application
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void) {
        application.deliverLegacy(notification)
        completionHandler([])
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        if let waiter = launchWaiter {
            launchWaiter = nil
            launchTimeout?.cancel()
            waiter.resume(returning: Unchecked((response, completionHandler)))
            return
        }
        application.deliverLegacy(response, completion: completionHandler)
    }

    /// The first response after the process started, or nil after `timeout`.
    func awaitLaunchResponse(timeout: TimeInterval) async -> (response: UNNotificationResponse, done: @Sendable () -> Void)? {
        let answer = await withCheckedContinuation { continuation in
            launchWaiter = continuation
            launchTimeout = Task { @MainActor [weak self] in
                guard (try? await Task.sleep(for: .seconds(timeout))) != nil else { return }
                if let waiter = self?.launchWaiter {
                    self?.launchWaiter = nil
                    waiter.resume(returning: nil)
                }
            }
        }
        guard let answer else { return nil }
        return (answer.value.0, answer.value.1)
    }
}

/// A value handed between threads by code that knows only one of them uses it at a time.
struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A value written on one thread and read on another.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value?
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func get() -> Value? { lock.withLock { value } }
}
