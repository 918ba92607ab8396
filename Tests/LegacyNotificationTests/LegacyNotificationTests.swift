import Foundation
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting
@_spi(Tidings) import TidingsApplication
@_spi(Tidings) import UserNotifications

/// An app delegate of the pre-iOS 10 kind, recording every callback.
@MainActor
final class LegacyAppDelegate: NSObject, UIApplicationDelegate {
    var launches: [[UIApplication.LaunchOptionsKey: Any]?] = []
    var registered: [UIUserNotificationType] = []
    var local: [UILocalNotification] = []
    var remote: [[AnyHashable: Any]] = []
    var actions: [(identifier: String?, notification: UILocalNotification, responseInfo: [AnyHashable: Any])] = []
    /// A UserNotifications delegate the app installs while launching (an app ported halfway).
    var notificationDelegate: (any UNUserNotificationCenterDelegate)?
    /// A notification the app schedules while launching (it uses the legacy API).
    var scheduleWhileLaunching: UILocalNotification?
    /// The launch and silent-push callbacks, in the order they came.
    var order: [String] = []

    func application(_ application: UIApplication, willFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool {
        order.append("willFinishLaunching")
        return true
    }

    func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool {
        order.append("didFinishLaunching")
        launches.append(launchOptions)
        if let notificationDelegate { application.notificationCenter.delegate = notificationDelegate }
        if let scheduleWhileLaunching { application.scheduleLocalNotification(scheduleWhileLaunching) }
        return true
    }

    func application(_ application: UIApplication, didRegister notificationSettings: UIUserNotificationSettings) {
        registered.append(notificationSettings.types)
    }

    func application(_ application: UIApplication, didReceive notification: UILocalNotification) {
        local.append(notification)
    }

    // Only the pre-iOS 7 remote method: UIKit falls back to it.
    func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any]) {
        order.append("didReceiveRemoteNotification")
        remote.append(userInfo)
    }

    func application(_ application: UIApplication, handleActionWithIdentifier identifier: String?, for notification: UILocalNotification,
                     withResponseInfo responseInfo: [AnyHashable: Any], completionHandler: @escaping () -> Void) {
        actions.append((identifier, notification, responseInfo))
        completionHandler()
    }
}

/// A UserNotifications delegate recording responses.
final class ResponseRecorder: NSObject, UNUserNotificationCenterDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var responses: [String] { lock.withLock { stored } }
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        lock.withLock { stored.append("\(response.notification.request.content.body) \(response.actionIdentifier)") }
        completionHandler()
    }
}

/// An app on an in-process notification system: its center and its UIApplication.
@MainActor
struct LegacyApp {
    static let bundle = "com.example.legacy"
    let system: NotificationTestSystem
    let center: UNUserNotificationCenter
    let application: UIApplication
    let delegate = LegacyAppDelegate()

    static func start(system: NotificationTestSystem? = nil, state: AppState = .active, launchedForResponse: Bool = false) async throws -> LegacyApp {
        let system = if let system { system } else { try await NotificationTestSystem.start() }
        let center = try await system.center(for: bundle, state: state)
        let application = UIApplication(transport: try await system.connect(bundle), notificationCenter: center, launchedForResponse: launchedForResponse)
        return LegacyApp(system: system, center: center, application: application)
    }

    /// Registers for alerts, sounds and badges with one category: a background text reply.
    func register() async {
        let reply = UIMutableUserNotificationAction()
        reply.identifier = "reply"
        reply.title = "Reply"
        reply.activationMode = .background
        reply.behavior = .textInput
        reply.parameters = [UIUserNotificationTextInputActionButtonTitleKey: "Send"]
        let open = UIMutableUserNotificationAction()
        open.identifier = "open"
        open.title = "Open"
        open.activationMode = .foreground
        open.isDestructive = true
        let category = UIMutableUserNotificationCategory()
        category.identifier = "message"
        category.setActions([reply, open], for: .default)
        application.delegate = delegate
        application.registerUserNotificationSettings(UIUserNotificationSettings(types: [.alert, .sound, .badge], categories: [category]))
        _ = await eventually { await MainActor.run { !delegate.registered.isEmpty } }
    }

    func note(_ body: String, in seconds: TimeInterval? = nil) -> UILocalNotification {
        let notification = UILocalNotification()
        notification.alertTitle = "Title"
        notification.alertBody = body
        notification.fireDate = seconds.map { system.clock.now.addingTimeInterval($0) }
        notification.soundName = UILocalNotificationDefaultSoundName
        notification.applicationIconBadgeNumber = 5
        notification.userInfo = ["id": 7, "kind": "message"]
        notification.category = "message"
        return notification
    }
}

@MainActor
@Suite("UIApplication's pre-iOS 10 notification API", .serialized, .timeLimit(.minutes(1)))
struct LegacyNotificationTests {
    @Test func registeringAsksForTheTypesAndRegistersTheCategories() async throws {
        let app = try await LegacyApp.start()
        await app.register()
        #expect(app.delegate.registered == [[.alert, .sound, .badge]])
        let categories = await app.center.notificationCategories()
        let category = try #require(categories.first)
        #expect(category.identifier == "message")
        let reply = try #require(category.actions.first as? UNTextInputNotificationAction)
        #expect(reply.identifier == "reply" && reply.textInputButtonTitle == "Send" && reply.options == [])
        #expect(category.actions.last?.options == [.foreground, .destructive])
        let current = try #require(app.application.currentUserNotificationSettings)
        #expect(current.types == [.alert, .sound, .badge])
        #expect(current.categories?.first?.actions(for: .default)?.map(\.identifier) == ["reply", "open"])
        await app.system.shutdown()
    }

    @Test func aScheduledNotificationIsACalendarRequestThatFiresOnTheEngine() async throws {
        let app = try await LegacyApp.start()
        await app.register()
        let note = app.note("in a minute", in: 60)
        app.application.scheduleLocalNotification(note)

        let request = try #require(await app.center.pendingNotificationRequests().first)
        #expect(request.identifier.hasPrefix("UILocalNotification."))
        #expect(request.content.title == "Title" && request.content.body == "in a minute")
        #expect(request.content.sound == .default && request.content.badge == 5 && request.content.categoryIdentifier == "message")
        #expect(request.content.userInfo["id"] as? Int == 7)
        let trigger = try #require(request.trigger as? UNCalendarNotificationTrigger)
        #expect(!trigger.repeats && trigger.dateComponents.timeZone == TimeZone(identifier: "GMT"))
        // Read back as UIKit's synchronous property, with the same fire date.
        let scheduled = try #require(app.application.scheduledLocalNotifications)
        #expect(scheduled.map(\.alertBody) == ["in a minute"])
        #expect(scheduled.first?.fireDate == note.fireDate && scheduled.first?.timeZone == nil && scheduled.first?.applicationIconBadgeNumber == 5)

        // It fires at its date; in the foreground it goes to the app delegate, not on screen.
        await app.system.advance(by: 59)
        #expect(app.delegate.local.isEmpty)
        await app.system.advance(by: 1)
        #expect(await eventually { await MainActor.run { app.delegate.local.map(\.alertBody) == ["in a minute"] } })
        #expect(app.system.presenter.presentedIdentifiers.isEmpty)
        #expect(app.delegate.local.first?.userInfo?["kind"] as? String == "message")
        await app.system.shutdown()
    }

    @Test func cancellingFindsAnEqualNotificationAndAssigningReplacesAll() async throws {
        let app = try await LegacyApp.start()
        await app.register()
        app.application.scheduleLocalNotification(app.note("one", in: 60))
        app.application.scheduleLocalNotification(app.note("two", in: 120))
        // A new object with the same fields, as an app rebuilds it after a relaunch.
        app.application.cancelLocalNotification(app.note("one", in: 60))
        #expect(app.application.scheduledLocalNotifications?.map(\.alertBody) == ["two"])
        // An object read back cancels its request too.
        let two = try #require(app.application.scheduledLocalNotifications?.first)
        app.application.cancelLocalNotification(two)
        #expect(app.application.scheduledLocalNotifications?.isEmpty == true)

        app.application.scheduledLocalNotifications = [app.note("three", in: 60), app.note("four", in: 60)]
        #expect(Set(app.application.scheduledLocalNotifications?.compactMap(\.alertBody) ?? []) == ["three", "four"])
        app.application.cancelAllLocalNotifications()
        #expect(await app.center.pendingNotificationRequests().isEmpty)
        await app.system.shutdown()
    }

    @Test func repeatIntervalsAndTimeZonesMapToCalendarComponents() async throws {
        let app = try await LegacyApp.start()
        let note = app.note("daily")
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "Asia/Tokyo")!
        note.fireDate = calendar.date(from: DateComponents(year: 2026, month: 12, day: 1, hour: 8, minute: 30))
        note.timeZone = TimeZone(identifier: "Asia/Tokyo")
        note.repeatInterval = .day
        let request = UNNotificationRequest(localNotification: note)
        let trigger = try #require(request.trigger as? UNCalendarNotificationTrigger)
        // Every day at 08:30:00 wall-clock time, floating with the device's zone.
        #expect(trigger.repeats)
        #expect(trigger.dateComponents.hour == 8 && trigger.dateComponents.minute == 30 && trigger.dateComponents.second == 0)
        #expect(trigger.dateComponents.day == nil && trigger.dateComponents.timeZone == nil)
        let back = UILocalNotification(request: request, date: nil)
        #expect(back.repeatInterval == .day && back.timeZone != nil && back.alertBody == "daily")

        let weekly = app.note("weekly")
        weekly.fireDate = note.fireDate
        weekly.repeatInterval = .weekOfYear
        let weeklyComponents = try #require(UNNotificationRequest(localNotification: weekly).trigger as? UNCalendarNotificationTrigger).dateComponents
        #expect(weeklyComponents.weekday != nil && weeklyComponents.day == nil && weeklyComponents.timeZone == TimeZone(identifier: "GMT"))

        let place = app.note("place")
        place.region = CLCircularRegion(center: CLLocationCoordinate2D(latitude: 35.68, longitude: 139.76), radius: 100, identifier: "tokyo")
        place.regionTriggersOnce = false
        let location = try #require(UNNotificationRequest(localNotification: place).trigger as? UNLocationNotificationTrigger)
        #expect(location.repeats && location.region.identifier == "tokyo")
        #expect(UNNotificationRequest(localNotification: app.note("now")).trigger == nil)
        await app.system.shutdown()
    }

    @Test func aDateInThePastFiresAtOnce() async throws {
        let app = try await LegacyApp.start()
        await app.register()
        app.application.scheduleLocalNotification(app.note("late", in: -3600))
        #expect(await eventually { await MainActor.run { app.delegate.local.map(\.alertBody) == ["late"] } })
        await app.system.shutdown()
    }

    @Test func tapsAndActionsReachTheOldCallbacks() async throws {
        // In the background the notifications are shown, and the person acts on them.
        let app = try await LegacyApp.start(state: .background)
        await app.register()
        app.application.presentLocalNotificationNow(app.note("ask"))
        app.application.presentLocalNotificationNow(app.note("tap"))
        #expect(await eventually { await app.center.deliveredNotifications().count == 2 })
        #expect(app.delegate.local.isEmpty)
        let delivered = await app.center.deliveredNotifications()
        let ask = try #require(delivered.first { $0.request.content.body == "ask" })
        let tap = try #require(delivered.first { $0.request.content.body == "tap" })

        try await app.system.engine.respond(bundle: LegacyApp.bundle, identifier: ask.request.identifier, actionIdentifier: "reply", userText: "你好")
        #expect(await eventually { await MainActor.run { app.delegate.actions.count == 1 } })
        let action = try #require(app.delegate.actions.first)
        #expect(action.identifier == "reply" && action.notification.alertBody == "ask")
        #expect(action.responseInfo[UIUserNotificationActionResponseTypedTextKey] as? String == "你好")

        try await app.system.engine.respond(bundle: LegacyApp.bundle, identifier: tap.request.identifier, actionIdentifier: UNNotificationDefaultActionIdentifier)
        #expect(await eventually { await MainActor.run { app.delegate.local.map(\.alertBody) == ["tap"] } })
        // Both responses were handled (the completions reached the engine).
        #expect(await eventually { (try? await app.system.engine.heldResponses(LegacyApp.bundle).isEmpty) == true })
        #expect(app.delegate.actions.count == 1)
        await app.system.shutdown()
    }

    @Test func remoteNotificationsInTheForegroundReachThePreIOS7Method() async throws {
        let app = try await LegacyApp.start()
        await app.register()
        var content = NotificationContentValue()
        content.body = "pushed"
        content.userInfo = ["aps": .dictionary(["alert": .string("pushed")]), "id": .integer(9)]
        await app.system.engine.deliverNow(NotificationRequestValue(identifier: "push", content: content, trigger: .push), bundle: LegacyApp.bundle)
        #expect(await eventually { await MainActor.run { app.delegate.remote.count == 1 } })
        #expect(app.delegate.remote.first?["id"] as? Int64 == 9 || app.delegate.remote.first?["id"] as? Int == 9)
        #expect(app.delegate.local.isEmpty)
        await app.system.shutdown()
    }

    @Test func theNotificationThatLaunchedTheAppIsInTheLaunchOptions() async throws {
        let system = try await NotificationTestSystem.start()
        let identifier = try await Self.deliverAndTapWhileNotRunning(system, body: "launch me")
        let app = try await LegacyApp.start(system: system, launchedForResponse: true)
        #expect(await app.application.launch(with: app.delegate))
        let options = try #require(app.delegate.launches.first ?? nil)
        let launching = try #require(options[.localNotification] as? UILocalNotification)
        #expect(launching.alertBody == "launch me" && options[.remoteNotification] == nil)
        // A tap that launched the app is not also a didReceive callback (UIKit's rule), and it is handled.
        #expect(app.delegate.local.isEmpty)
        #expect(await eventually { (try? await system.engine.heldResponses(LegacyApp.bundle).isEmpty) == true })
        _ = identifier
        await system.shutdown()
    }

    @Test func aRemoteNotificationThatLaunchedTheAppGivesItsPayload() async throws {
        let system = try await NotificationTestSystem.start()
        _ = try await Self.deliverAndTapWhileNotRunning(system, body: "breaking", remote: true)
        let app = try await LegacyApp.start(system: system, launchedForResponse: true)
        #expect(await app.application.launch(with: app.delegate))
        let options = try #require(app.delegate.launches.first ?? nil)
        let payload = try #require(options[.remoteNotification] as? [AnyHashable: Any])
        #expect((payload["article"] as? Int64 == 42) || (payload["article"] as? Int == 42))
        #expect(options[.localNotification] == nil)
        #expect(app.delegate.remote.isEmpty)
        #expect(await eventually { (try? await system.engine.heldResponses(LegacyApp.bundle).isEmpty) == true })
        await system.shutdown()
    }

    @Test func aUserNotificationsDelegateSetWhileLaunchingGetsTheLaunchResponse() async throws {
        let system = try await NotificationTestSystem.start()
        _ = try await Self.deliverAndTapWhileNotRunning(system, body: "ported")
        let app = try await LegacyApp.start(system: system, launchedForResponse: true)
        let recorder = ResponseRecorder()
        app.delegate.notificationDelegate = recorder
        #expect(await app.application.launch(with: app.delegate))
        #expect(recorder.responses == ["ported \(UNNotificationDefaultActionIdentifier)"])
        #expect(app.center.delegate === recorder)
        #expect(await eventually { (try? await system.engine.heldResponses(LegacyApp.bundle).isEmpty) == true })
        await system.shutdown()
    }

    @Test func aLaunchWithoutAResponseHasNoOptions() async throws {
        let app = try await LegacyApp.start()
        #expect(await app.application.launch(with: app.delegate))
        #expect(app.delegate.launches.count == 1)
        #expect(app.delegate.launches.first! == nil)
        await app.system.shutdown()
    }

    @Test func aLaunchForAResponseThatNeverComesFinishesAfterTheTimeout() async throws {
        // Launched "for a response" that another process already handled: none arrives.
        let app = try await LegacyApp.start(launchedForResponse: true)
        app.application.launchTimeout = 0.05
        #expect(UIApplication.launchResponseTimeout == 10)
        #expect(await app.application.launch(with: app.delegate))
        #expect(app.delegate.launches.count == 1)
        #expect(app.delegate.launches.first! == nil)
        await app.system.shutdown()
    }

    @Test func onlyALaunchForAResponseWaitsForOne() async throws {
        // The daemon marks why it launched the app: a response, or a silent push.
        let system = try await NotificationTestSystem.start()
        _ = try await system.install(LegacyApp.bundle)
        #expect(await system.engine.receiveRemote(Self.silentPush(system, n: 1)) == .delivered(presented: false, wake: .waiting))
        let launch = try #require(system.launcher.launches.first)
        #expect(launch.state == .background && launch.reason == .remoteNotification)
        // The environment ProcessLauncher gives that process: not a launch for a response.
        let environment = ["TIDINGS_LAUNCH_STATE": launch.state.rawValue, "TIDINGS_LAUNCH_REASON": launch.reason.rawValue]
        #expect(!UIApplication.isResponseLaunch(environment))
        #expect(!UIApplication.isResponseLaunch(["TIDINGS_LAUNCH_STATE": "background"]))
        #expect(!UIApplication.isResponseLaunch([:]))
        #expect(UIApplication.isResponseLaunch(["TIDINGS_LAUNCH_STATE": "active", "TIDINGS_LAUNCH_REASON": LaunchReason.response.rawValue]))
        await system.shutdown()
    }

    @Test func aSilentPushWaitingAtLaunchComesAfterDidFinishLaunching() async throws {
        // The app was launched for a response; a silent push came meanwhile and waits for it.
        let system = try await NotificationTestSystem.start()
        _ = try await Self.deliverAndTapWhileNotRunning(system, body: "launch me")
        #expect(await system.engine.receiveRemote(Self.silentPush(system, n: 7)) == .delivered(presented: false, wake: .waiting))
        let app = try await LegacyApp.start(system: system, launchedForResponse: true)
        #expect(await app.application.launch(with: app.delegate))
        #expect(await eventually { await MainActor.run { app.delegate.remote.count == 1 } })
        #expect(app.delegate.order == ["willFinishLaunching", "didFinishLaunching", "didReceiveRemoteNotification"])
        #expect(app.delegate.launches.first??[.localNotification] != nil)
        await system.shutdown()
    }

    @Test func anAppThatDoesNotUseTheLegacyAPIKeepsNoBridgeAfterItsLaunch() async throws {
        let system = try await NotificationTestSystem.start()
        _ = try await Self.deliverAndTapWhileNotRunning(system, body: "modern")
        let app = try await LegacyApp.start(system: system, launchedForResponse: true)
        #expect(await app.application.launch(with: app.delegate))
        // The response still reached the launch options and was handled.
        #expect((app.delegate.launches.first??[.localNotification] as? UILocalNotification)?.alertBody == "modern")
        #expect(await eventually { (try? await system.engine.heldResponses(LegacyApp.bundle).isEmpty) == true })
        // No delegate of the legacy API on its center: a notification in the foreground is
        // presented as the person's settings say, not swallowed for the old callbacks.
        #expect(app.center.delegate == nil)
        let shown = UNMutableNotificationContent()
        shown.body = "shown"
        try await app.center.add(UNNotificationRequest(identifier: "foreground", content: shown, trigger: nil))
        #expect(await eventually { system.presenter.presentedIdentifiers.contains("foreground") })
        #expect(app.delegate.local.isEmpty)
        await system.shutdown()
    }

    @Test func anAppThatUsesTheLegacyAPIWhileLaunchingKeepsTheBridge() async throws {
        let system = try await NotificationTestSystem.start()
        _ = try await Self.deliverAndTapWhileNotRunning(system, body: "legacy", action: "reply")
        let app = try await LegacyApp.start(system: system, launchedForResponse: true)
        app.delegate.scheduleWhileLaunching = app.note("later", in: 3600)
        #expect(await app.application.launch(with: app.delegate))
        // The action that launched it goes to handleActionWithIdentifier, as before iOS 10.
        #expect(app.delegate.actions.map(\.identifier) == ["reply"])
        #expect(app.center.delegate != nil)
        #expect(await eventually { (try? await system.engine.heldResponses(LegacyApp.bundle).isEmpty) == true })
        await system.shutdown()
    }

    @Test func presentingNowKeepsAScheduledCopyAndCancellingRemovesBoth() async throws {
        let app = try await LegacyApp.start(state: .background)
        await app.register()
        let note = app.note("both", in: 60)
        app.application.scheduleLocalNotification(note)
        #expect(await eventually { await app.center.pendingNotificationRequests().count == 1 })
        app.application.presentLocalNotificationNow(note)
        #expect(await eventually { await app.center.deliveredNotifications().count == 1 })
        // On iOS both stay: the one shown now and the one scheduled for later.
        #expect(await app.center.pendingNotificationRequests().map(\.content.body) == ["both"])
        // An equal notification cancels both.
        app.application.cancelLocalNotification(app.note("both", in: 60))
        #expect(await eventually {
            let pending = await app.center.pendingNotificationRequests()
            let delivered = await app.center.deliveredNotifications()
            return pending.isEmpty && delivered.isEmpty
        })
        // So does the copy read back from the notification shown now.
        app.application.scheduleLocalNotification(note)
        app.application.presentLocalNotificationNow(note)
        #expect(await eventually { await app.center.deliveredNotifications().count == 1 })
        #expect(await eventually { await app.center.pendingNotificationRequests().count == 1 })
        let shown = try #require(await app.center.deliveredNotifications().first)
        app.application.cancelLocalNotification(UILocalNotification(request: shown.request, date: shown.date))
        #expect(await eventually {
            let pending = await app.center.pendingNotificationRequests()
            let delivered = await app.center.deliveredNotifications()
            return pending.isEmpty && delivered.isEmpty
        })
        await app.system.shutdown()
    }

    @Test func synchronousQueriesAnswerEmptyWhenTheDaemonDoesNotAnswerInTime() async throws {
        let daemon = UnansweringTransport()
        let center = UNUserNotificationCenter(transport: daemon)
        let application = UIApplication(transport: daemon, notificationCenter: center)
        application.queryTimeout = 0.05
        #expect(UIApplication.legacyQueryTimeout == 10)
        #expect(application.scheduledLocalNotifications?.isEmpty == true)
        #expect(application.currentUserNotificationSettings == nil)
        daemon.answerEverything()
    }

    /// A silent push for the app, as the device hands it to the engine.
    static func silentPush(_ system: NotificationTestSystem, n: Int) -> RemotePush {
        let now = Int64(system.clock.now.timeIntervalSince1970 * 1000)
        return RemotePush(apnsID: "s\(n)", sequence: Int64(n), bundleIdentifier: LegacyApp.bundle, pushType: .background, priority: .considerPower,
                          expiresAt: now + 86_400_000, acceptedAt: now, payload: Array(#"{"aps":{"content-available":1},"n":\#(n)}"#.utf8))!
    }

    /// A notification delivered and tapped while the app does not run: the engine holds
    /// the response and launches the app.
    static func deliverAndTapWhileNotRunning(_ system: NotificationTestSystem, body: String, remote: Bool = false,
                                             action: String = UNNotificationDefaultActionIdentifier) async throws -> String {
        let setup = try await system.connect(LegacyApp.bundle)
        _ = try await setup.call(.requestAuthorization(AuthorizationOptionsValue(rawValue: 0b111)))
        _ = try await setup.call(.setCategories([CategoryValue(identifier: "message", actions: [ActionValue(identifier: "reply", title: "Reply")])]))
        var content = NotificationContentValue()
        content.body = body
        content.categoryIdentifier = "message"
        content.userInfo = ["aps": .dictionary(["alert": .string(body)]), "article": .integer(42)]
        let identifier = LegacyNotificationIdentityForTests.identifier(body)
        await setup.disconnect()
        if remote {
            await system.engine.deliverNow(NotificationRequestValue(identifier: identifier, content: content, trigger: .push), bundle: LegacyApp.bundle)
        } else {
            let again = try await system.connect(LegacyApp.bundle)
            _ = try await again.call(.add(NotificationRequestValue(identifier: identifier, content: content, trigger: nil)))
            await again.disconnect()
            // `add` answers once the request is stored; it is delivered when the scheduler fires
            // it, just after (a respond before that found no delivered notification under load).
            #expect(await eventually { system.presenter.presentedIdentifiers.contains(identifier) })
        }
        try await system.engine.respond(bundle: LegacyApp.bundle, identifier: identifier, actionIdentifier: action)
        #expect(system.launcher.launches.map(\.bundleIdentifier) == [LegacyApp.bundle])
        #expect(system.launcher.launches.map(\.reason) == [.response])
        return identifier
    }
}

/// A daemon that answers only when told to.
final class UnansweringTransport: NotificationServiceTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var waiting: [CheckedContinuation<AppReply, Never>] = []
    private var answering = false

    func call(_ request: AppRequest) async throws(NotificationError) -> AppReply {
        await withCheckedContinuation { continuation in
            let answerNow = lock.withLock { () -> Bool in
                if !answering { waiting.append(continuation) }
                return answering
            }
            if answerNow { continuation.resume(returning: .failure(NotificationError(.daemonUnavailable, "test over"))) }
        }
    }

    func send(_ request: AppRequest) {}
    func events() -> AsyncStream<DaemonEvent> { AsyncStream { _ in } }

    /// Fails every waiting and later call (the test is over).
    func answerEverything() {
        let continuations = lock.withLock { () -> [CheckedContinuation<AppReply, Never>] in
            answering = true
            defer { waiting = [] }
            return waiting
        }
        for continuation in continuations { continuation.resume(returning: .failure(NotificationError(.daemonUnavailable, "test over"))) }
    }
}

enum LegacyNotificationIdentityForTests {
    static func identifier(_ body: String) -> String { "UILocalNotification.test-\(body.hashValue)" }
}
