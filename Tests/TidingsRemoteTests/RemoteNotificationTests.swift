import Foundation
import Synchronization
import Testing
@_spi(Tidings) import TidingsApplication
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsStorage
import TidingsTesting
@_spi(Tidings) import UserNotifications

/// Remote notifications end to end in one process: provider API → gateway → device channel
/// → the daemon's gateway link (inbox, ack) → engine → presenter → the person's tap → the
/// app's delegate; and back to the gateway as presented/answered.
@Suite("Remote notifications", .serialized)
struct RemoteNotificationTests {
    @Test @MainActor func pushIsPresentedAndTheTapReachesTheDelegate() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let notifications = RecordingNotificationDelegate()
        let appDelegate = RecordingAppDelegate()
        let application = try await h.launchApp(notificationDelegate: notifications, appDelegate: appDelegate)

        application.application.registerForRemoteNotifications()
        #expect(await eventually { await MainActor.run { appDelegate.tokens.count == 1 } })
        let token = try #require(appDelegate.tokens.first)
        #expect(token.count == 32)
        #expect(application.application.isRegisteredForRemoteNotifications)

        let apnsID = "6e1b2c3d-0000-4000-8000-00000000a001"
        let response = try await h.push(token: token, body: #"{"aps":{"alert":{"title":"Game Request","body":"Bob wants to play poker"},"category":"GAME"},"gameID":"12345678"}"#, apnsID: apnsID)
        #expect(response.status == 200)
        #expect(await eventually { h.system.presenter.presentedIdentifiers.contains(apnsID) })
        let delivered = try await h.system.engine.deliveredNotifications(RemoteHarness.bundleID)
        let notification = try #require(delivered.first { $0.request.identifier == apnsID })
        #expect(notification.request.trigger == .push)
        #expect(notification.request.content.title == "Game Request")
        #expect(notification.request.content.userInfo["gameID"] == .string("12345678"))

        // The person taps it: the app's delegate gets the response, with the payload.
        try await h.system.engine.respond(bundle: RemoteHarness.bundleID, identifier: apnsID, actionIdentifier: ActionIdentifier.default)
        #expect(await eventually { await MainActor.run { notifications.responses.count == 1 } })
        let tapped = try #require(notifications.responses.first)
        #expect(tapped.notification.request.trigger is UNPushNotificationTrigger)
        #expect(tapped.notification.request.content.userInfo["gameID"] as? String == "12345678")

        // Delivery inspection: presented and answered reached the gateway.
        #expect(await eventually {
            guard let s = try? await h.status(apnsID).first else { return false }
            return s.presentedAt != nil && s.answeredAt != nil
        })
    }

    @Test @MainActor func tokenIsStableAcrossRestartsAndChangesAfterReinstall() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let application = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let first: Data = try await application.application.deviceTokenForRemoteNotifications()
        let again: Data = try await application.application.deviceTokenForRemoteNotifications()
        #expect(first == again)

        // The daemon restarts (a new link on the same data directory: the same device key).
        await h.stopLink()
        try await h.startLink()
        let afterRestart: Data = try await application.application.deviceTokenForRemoteNotifications()
        #expect(afterRestart == first)

        // Remove and install the app again: a new token; the old one is dead for providers.
        try await h.system.engine.uninstall(RemoteHarness.bundleID)
        _ = try await h.install()
        let reinstalled = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let second: Data = try await reinstalled.application.deviceTokenForRemoteNotifications()
        #expect(second != first)
        let old = try await h.push(token: first, body: #"{"aps":{"alert":"old"}}"#)
        #expect(old.status == 410)
        #expect(old.reason == "Unregistered")
        let new = try await h.push(token: second, body: #"{"aps":{"alert":"new"}}"#)
        #expect(new.status == 200)
    }

    @Test @MainActor func registrationFailsWithoutAGateway() async throws {
        let h = try await RemoteHarness.start(connect: false)
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let appDelegate = RecordingAppDelegate()
        let application = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: appDelegate)
        application.application.registerForRemoteNotifications()
        #expect(await eventually { await MainActor.run { appDelegate.failures.count == 1 } })
        #expect(appDelegate.failures.first?.contains("gateway") == true)
        #expect(appDelegate.tokens.isEmpty)
        #expect(!application.application.isRegisteredForRemoteNotifications)
    }

    @Test @MainActor func offlineDeviceGetsItsStoredPushesOnReconnect() async throws {
        for policy in [StoragePolicy.all, .apns] {
            let h = try await RemoteHarness.start(storagePolicy: policy)
            let (application, token) = try await h.offlineApp()
            let ids = (1...3).map { "00000000-0000-4000-8000-00000000000\($0)" }
            for (n, id) in ids.enumerated() {
                #expect(try await h.push(token: token, body: #"{"aps":{"alert":"offline \#(n)"}}"#, apnsID: id).status == 200)
            }
            try await h.startLink()
            let expected = policy == .all ? ids : [ids[2]]
            #expect(await eventually { h.system.presenter.presentedIdentifiers.filter { ids.contains($0) } == expected }, "policy \(policy)")
            await h.stop()
        }
    }

    @Test @MainActor func collapseIDReplacesTheDeliveredNotification() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let application = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let token: Data = try await application.application.deviceTokenForRemoteNotifications()
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"1 : 0"}}"#, headers: [("apns-collapse-id", "score")]).status == 200)
        #expect(await eventually { h.system.presenter.presentedIdentifiers == ["score"] })
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"2 : 0"}}"#, headers: [("apns-collapse-id", "score")]).status == 200)
        #expect(await eventually { h.system.presenter.presentedIdentifiers == ["score", "score"] })
        let delivered = try await h.system.engine.deliveredNotifications(RemoteHarness.bundleID)
        #expect(delivered.map(\.request.identifier) == ["score"])
        #expect(delivered.first?.request.content.body == "2 : 0")
    }

    @Test func expiredPushesAreNeverShown() async throws {
        let h = try await RemoteHarness.start(connect: false)
        defer { Task { await h.stop() } }
        _ = try await h.install()
        try await h.authorize()
        let now = Int64(h.clock.now.timeIntervalSince1970 * 1000)
        let expired = RemotePush(apnsID: "e1", sequence: 1, bundleIdentifier: RemoteHarness.bundleID, pushType: .alert, priority: .immediate,
                                 expiresAt: now - 1, acceptedAt: now - 60_000, payload: Array(#"{"aps":{"alert":"late"}}"#.utf8))!
        #expect(await h.system.engine.receiveRemote(expired) == .expired)
        let fresh = RemotePush(apnsID: "e2", sequence: 2, bundleIdentifier: RemoteHarness.bundleID, pushType: .alert, priority: .immediate,
                               expiresAt: now + 60_000, acceptedAt: now, payload: Array(#"{"aps":{"alert":"on time"}}"#.utf8))!
        #expect(await h.system.engine.receiveRemote(fresh) == .delivered(presented: true, wake: nil))
        #expect(h.system.presenter.presentedIdentifiers == ["e2"])
    }

    /// An answer names the push its notification came from, as the delivered list recorded it
    /// (apns-id and sequence): after a collapse-id replacement, the replacing push — the one
    /// the person saw. Read from the delivered list, not looked up in the daemon's inbox.
    @Test func anAnswerNamesThePushTheNotificationCameFrom() async throws {
        let h = try await RemoteHarness.start(connect: false)
        defer { Task { await h.stop() } }
        _ = try await h.install()
        try await h.authorize()
        let link = AnswerRecordingLink()
        await h.system.engine.setRemote(link: link, configuration: h.remoteConfiguration)
        let now = Int64(h.clock.now.timeIntervalSince1970 * 1000)
        func push(_ sequence: Int64, collapse: String?) -> RemotePush {
            RemotePush(apnsID: "00000000-0000-4000-8000-0000000a\(sequence)", sequence: sequence, bundleIdentifier: RemoteHarness.bundleID,
                       collapseID: collapse.flatMap(CollapseID.init(rawValue:)), expiresAt: now + 60_000, acceptedAt: now,
                       payload: Array(#"{"aps":{"alert":"n\#(sequence)"}}"#.utf8))!
        }
        for p in [push(4101, collapse: "score"), push(4102, collapse: "score"), push(4103, collapse: nil)] {
            #expect(await h.system.engine.receiveRemote(p) == .delivered(presented: true, wake: nil))
        }
        try await h.system.engine.respond(bundle: RemoteHarness.bundleID, identifier: "score", actionIdentifier: ActionIdentifier.dismiss)
        try await h.system.engine.respond(bundle: RemoteHarness.bundleID, identifier: push(4103, collapse: nil).apnsID, actionIdentifier: ActionIdentifier.dismiss)
        #expect(link.answered == [push(4102, collapse: nil).deliveryKey, push(4103, collapse: nil).deliveryKey])
    }

    @Test @MainActor func expiredWhileTheDeviceWasAwayIsNeverShown() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        let (application, token) = try await h.offlineApp()
        let expiry = Int64(h.clock.now.timeIntervalSince1970) + 60
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"soon stale"}}"#, apnsID: "00000000-0000-4000-8000-0000000000e1",
                                 headers: [("apns-expiration", String(expiry))]).status == 200)
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"keeps"}}"#, apnsID: "00000000-0000-4000-8000-0000000000e2").status == 200)
        h.clock.advance(by: 120)
        try await h.startLink()
        #expect(await eventually { h.system.presenter.presentedIdentifiers.contains("00000000-0000-4000-8000-0000000000e2") })
        #expect(!h.system.presenter.presentedIdentifiers.contains("00000000-0000-4000-8000-0000000000e1"))
    }

    @Test @MainActor func silentPushWakesTheRunningAppAndIsNeverPresented() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let appDelegate = RecordingAppDelegate()
        let application = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: appDelegate)
        let token: Data = try await application.application.deviceTokenForRemoteNotifications()
        #expect(try await h.push(token: token, body: #"{"aps":{"content-available":1},"acme1":"bar","acme2":42}"#,
                                 pushType: "background", priority: 5).status == 200)
        #expect(await eventually { await MainActor.run { appDelegate.silentPushes.count == 1 } })
        let info = try #require(appDelegate.silentPushes.first)
        #expect(info["acme1"] as? String == "bar")
        #expect(info["acme2"] as? Int == 42)
        #expect(await eventually { await h.system.engine.completedBackgroundWakes().map(\.result) == [Int(UIBackgroundFetchResult.newData.rawValue)] })
        #expect(h.system.presenter.presentedIdentifiers.isEmpty)

        // An alert that carries content-available is presented and wakes the app too.
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"new mail","content-available":1}}"#, apnsID: "00000000-0000-4000-8000-0000000000a2").status == 200)
        #expect(await eventually { await MainActor.run { appDelegate.silentPushes.count == 2 } })
        #expect(h.system.presenter.presentedIdentifiers == ["00000000-0000-4000-8000-0000000000a2"])
    }

    @Test @MainActor func silentPushLaunchesAStoppedAppInTheBackground() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let running = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let token: Data = try await running.application.deviceTokenForRemoteNotifications()
        // The app's process exits.
        await running.exit()
        #expect(try await h.push(token: token, body: #"{"aps":{"content-available":1},"refresh":"feed"}"#, pushType: "background", priority: 5).status == 200)
        #expect(await eventually { h.system.launcher.launches.contains { $0.bundleIdentifier == RemoteHarness.bundleID && $0.state == .background } })
        // The launched process sets its application delegate: the wake reaches it.
        let appDelegate = RecordingAppDelegate()
        let transport = try await h.system.connect(RemoteHarness.bundleID, state: .background)
        let launched = UIApplication(transport: transport)
        launched.delegate = appDelegate
        #expect(await eventually { await MainActor.run { appDelegate.silentPushes.count == 1 } })
        #expect(appDelegate.silentPushes.first?["refresh"] as? String == "feed")
        #expect(h.system.presenter.presentedIdentifiers.isEmpty)
    }

    @Test @MainActor func silentPushesAreThrottledPerAppPerHour() async throws {
        let h = try await RemoteHarness.start(backgroundBudget: 2, connect: false)
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let appDelegate = RecordingAppDelegate()
        let running = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: appDelegate)
        await h.system.engine.setRemote(link: nil, configuration: h.remoteConfiguration)
        let now = Int64(h.clock.now.timeIntervalSince1970 * 1000)
        func silent(_ n: Int) -> RemotePush {
            RemotePush(apnsID: "s\(n)", sequence: Int64(n), bundleIdentifier: RemoteHarness.bundleID, pushType: .background, priority: .considerPower,
                       expiresAt: now + 86_400_000, acceptedAt: now, payload: Array(#"{"aps":{"content-available":1},"n":\#(n)}"#.utf8))!
        }
        #expect(await h.system.engine.receiveRemote(silent(1)) == .delivered(presented: false, wake: .sent))
        #expect(await h.system.engine.receiveRemote(silent(2)) == .delivered(presented: false, wake: .sent))
        #expect(await h.system.engine.receiveRemote(silent(3)) == .delivered(presented: false, wake: .throttled))
        #expect(await h.system.engine.receiveRemote(silent(4)) == .delivered(presented: false, wake: .throttled))
        #expect(await eventually { await MainActor.run { appDelegate.silentPushes.count == 2 } })
        // An hour later the budget allows one more: the newest held push, only.
        h.clock.advance(by: 3600)
        #expect(await eventually { await MainActor.run { appDelegate.silentPushes.count == 3 } })
        #expect(appDelegate.silentPushes.map { $0["n"] as? Int } == [1, 2, 4])
        #expect(h.system.presenter.presentedIdentifiers.isEmpty)
        withExtendedLifetime(running) {}
    }

    @Test func serviceExtensionChangesTheContent() async throws {
        let h = try await RemoteHarness.start(connect: false)
        defer { Task { await h.stop() } }
        let service = AppExtensionRecord(bundleIdentifier: RemoteHarness.bundleID + ".service", point: .service, executable: "/usr/bin/true")
        _ = try await h.install(extensions: [service])
        try await h.authorize()
        let runner = DecryptingRunner()
        let base = await h.system.engine.configuration
        let engine = NotificationEngine(configuration: EngineConfiguration(
            clock: h.clock, store: base.store, attachments: base.attachments,
            presenters: [h.system.presenter], serviceExtensions: runner))
        let now = Int64(h.clock.now.timeIntervalSince1970 * 1000)
        func push(_ id: String, _ body: String) -> RemotePush {
            RemotePush(apnsID: id, sequence: 1, bundleIdentifier: RemoteHarness.bundleID, pushType: .alert, priority: .immediate,
                       expiresAt: now + 60_000, acceptedAt: now, payload: Array(body.utf8))!
        }
        #expect(await engine.receiveRemote(push("m1", #"{"aps":{"alert":{"title":"(encrypted)","body":"x"},"mutable-content":"1"},"cipher":"olleh"}"#))
                == .delivered(presented: true, wake: nil))
        let delivered = try await engine.deliveredNotifications(RemoteHarness.bundleID)
        #expect(delivered.first?.request.content.body == "hello")
        #expect(delivered.first?.request.identifier == "m1")
        // No mutable-content: the extension is not asked.
        _ = await engine.receiveRemote(push("m2", #"{"aps":{"alert":"plain"}}"#))
        #expect(runner.calls == ["m1"])
    }

    /// After a crash between showing a push and marking it processed, the daemon must know it
    /// was shown — also when its service extension changed `userInfo` (as SecureMessages does).
    @Test func aPushChangedByItsExtensionIsKnownAsShown() async throws {
        let h = try await RemoteHarness.start(connect: false)
        defer { Task { await h.stop() } }
        let service = AppExtensionRecord(bundleIdentifier: RemoteHarness.bundleID + ".service", point: .service, executable: "/usr/bin/true")
        _ = try await h.install(extensions: [service])
        try await h.authorize()
        let base = await h.system.engine.configuration
        let engine = NotificationEngine(configuration: EngineConfiguration(
            clock: h.clock, store: base.store, attachments: base.attachments,
            presenters: [h.system.presenter], serviceExtensions: DecryptingRunner(removing: "cipher")))
        let now = Int64(h.clock.now.timeIntervalSince1970 * 1000)
        func push(_ id: String, sequence: Int64) -> RemotePush {
            RemotePush(apnsID: id, sequence: sequence, bundleIdentifier: RemoteHarness.bundleID, pushType: .alert, priority: .immediate,
                       collapseID: CollapseID(rawValue: "chat"), expiresAt: now + 60_000, acceptedAt: now,
                       payload: Array(#"{"aps":{"alert":{"title":"(encrypted)","body":"x"},"mutable-content":1},"cipher":"olleh"}"#.utf8))!
        }
        let shown = push("00000000-0000-4000-8000-00000000f001", sequence: 4)
        #expect(await engine.receiveRemote(shown) == .delivered(presented: true, wake: nil))
        let delivered = try await engine.deliveredNotifications(RemoteHarness.bundleID)
        #expect(delivered.first?.request.content.userInfo["cipher"] == nil, "the extension changed userInfo")
        #expect(await engine.hasDeliveredRemote(shown))
        // Another push with the same collapse id (so the same identifier) was not shown yet.
        #expect(await engine.hasDeliveredRemote(push("00000000-0000-4000-8000-00000000f002", sequence: 5)) == false)
    }

    @Test @MainActor func oneAppsSlowServiceExtensionHoldsUpOnlyThatApp() async throws {
        let runner = GatedRunner()
        let h = try await RemoteHarness.start(serviceExtensions: runner)
        defer { Task { await h.stop() } }
        let other = "com.example.remote.other"
        try await h.gateway.register(app: GatewayAppRecord(bundleID: other, teamID: RemoteHarness.teamID, storagePolicy: .all,
                                                           createdAt: EpochMilliseconds(h.clock.now.timeIntervalSince1970 * 1000)))
        _ = try await h.install(extensions: [AppExtensionRecord(bundleIdentifier: RemoteHarness.bundleID + ".service", point: .service, executable: "/usr/bin/true")])
        _ = try await h.install(other)
        let slowApp = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let otherApp = try await h.launchApp(other, notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let slowToken: Data = try await slowApp.application.deviceTokenForRemoteNotifications()
        let otherToken: Data = try await otherApp.application.deviceTokenForRemoteNotifications()

        let mutable = #"{"aps":{"alert":"slow","mutable-content":1}}"#
        #expect(try await h.push(token: slowToken, body: mutable, apnsID: "00000000-0000-4000-8000-000000000001").status == 200)
        #expect(await eventually { runner.waiting == 1 }, "the slow app's extension holds its first push")
        #expect(try await h.push(token: slowToken, body: #"{"aps":{"alert":"after"}}"#, apnsID: "00000000-0000-4000-8000-000000000002").status == 200)
        #expect(try await h.push(token: otherToken, body: #"{"aps":{"alert":"other"}}"#, apnsID: "00000000-0000-4000-8000-000000000003", topic: other).status == 200)
        #expect(await eventually { h.system.presenter.presentedIdentifiers == ["00000000-0000-4000-8000-000000000003"] },
                "the other app's push is shown while the first app's extension runs; that app's later push waits behind it")
        runner.release()
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == 3 })
        #expect(h.system.presenter.presentedIdentifiers == ["00000000-0000-4000-8000-000000000003",
                                                            "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"])
        withExtendedLifetime((slowApp, otherApp)) {}
    }
}

/// A service extension test double that holds every request until `release()`.
final class GatedRunner: ServiceExtensionRunning {
    private let state = Mutex<(waiting: [CheckedContinuation<Void, Never>], open: Bool)>(([], false))
    var waiting: Int { state.withLock { $0.waiting.count } }

    func modify(_ request: NotificationRequestValue, app: AppRecord, extension: AppExtensionRecord) async -> ServiceExtensionOutcome {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state -> Bool in
                if !state.open { state.waiting.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
        return ServiceExtensionOutcome(content: request.content)
    }

    func release() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}

/// A service extension test double: "decrypts" `cipher` (reversed text) into the body.
final class DecryptingRunner: ServiceExtensionRunning {
    private let log = Mutex<[String]>([])
    private let removing: String?
    var calls: [String] { log.withLock { $0 } }

    /// `removing`: a `userInfo` key the extension takes out, as SecureMessages removes `e2e`.
    init(removing: String? = nil) { self.removing = removing }

    func modify(_ request: NotificationRequestValue, app: AppRecord, extension: AppExtensionRecord) async -> ServiceExtensionOutcome {
        log.withLock { $0.append(request.identifier) }
        var content = request.content
        guard case .string(let cipher)? = content.userInfo["cipher"] else { return ServiceExtensionOutcome(content: content, failure: "no cipher") }
        content.body = String(cipher.reversed())
        content.title = "Secret"
        if let removing { content.userInfo[removing] = nil }
        return ServiceExtensionOutcome(content: content)
    }
}

/// A gateway link that only records the pushes reported answered (their delivery keys).
final class AnswerRecordingLink: RemoteNotificationLink {
    private let recorded = Mutex<[String]>([])
    var answered: [String] { recorded.withLock { $0 } }

    func deviceToken(for bundleIdentifier: String) async throws(NotificationError) -> [UInt8] {
        throw NotificationError(.daemonUnavailable, "no gateway in this test")
    }
    func unregister(_ bundleIdentifier: String) async throws(NotificationError) {}
    func appRemoved(_ bundleIdentifier: String) async {}
    func presented(_ push: RemotePush) async {}
    func answered(apnsID: String, sequence: Int64) async {
        recorded.withLock { $0.append("\(apnsID)#\(sequence)") }
    }
}
