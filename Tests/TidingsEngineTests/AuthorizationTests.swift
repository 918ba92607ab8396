import Foundation
import Synchronization
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting

/// A consent provider that counts prompts and answers as told.
final class CountingConsent: ConsentProvider {
    let answer: Bool
    private let count = Mutex(0)
    init(answer: Bool) { self.answer = answer }
    var prompts: Int { count.withLock { $0 } }
    func requestConsent(appName: String, bundleIdentifier: String, options: AuthorizationOptionsValue) async -> Bool {
        count.withLock { $0 += 1 }
        return answer
    }
}

@Suite("Authorization and settings")
struct AuthorizationTests {
    @Test("the first request asks the person; the answer is remembered across restarts")
    func askOnceAndRemember() async throws {
        let consent = CountingConsent(answer: true)
        let directory = TemporaryDirectories.make(prefix: "tidings-auth-")
        let system = try await NotificationTestSystem.start(storage: .sqlite, consent: consent, directory: directory)
        let app = try await system.connect("com.example.auth")
        guard case .settings(let before) = await app.request(.getSettings) else { Issue.record("no settings"); return }
        #expect(before.authorizationStatus == .notDetermined)
        #expect(await app.request(.requestAuthorization([.alert, .sound])) == .authorization(granted: true))
        #expect(await app.request(.requestAuthorization([.alert, .sound])) == .authorization(granted: true))
        #expect(consent.prompts == 1)
        guard case .settings(let after) = await app.request(.getSettings) else { Issue.record("no settings"); return }
        #expect(after.authorizationStatus == .authorized)
        #expect(after.alertSetting == .enabled)
        #expect(after.soundSetting == .enabled)
        #expect(after.badgeSetting == .disabled)
        #expect(after.alertStyle == .banner)
        await system.shutdown(removeFiles: false)

        // A new engine on the same store: still authorized, no prompt.
        let consent2 = CountingConsent(answer: false)
        let again = try await NotificationTestSystem.start(storage: .sqlite, consent: consent2, directory: directory)
        let app2 = try await again.connect("com.example.auth")
        #expect(await app2.request(.requestAuthorization([.alert])) == .authorization(granted: true))
        #expect(consent2.prompts == 0)
        await again.shutdown()
    }

    @Test("after a denial requestAuthorization reports false without asking, and add is refused")
    func denial() async throws {
        let consent = CountingConsent(answer: false)
        let system = try await NotificationTestSystem.start(consent: consent)
        let app = try await system.connect("com.example.denied")
        #expect(await app.request(.requestAuthorization([.alert])) == .authorization(granted: false))
        #expect(await app.request(.requestAuthorization([.alert])) == .authorization(granted: false))
        #expect(consent.prompts == 1)
        #expect(await app.add("x", trigger: nil).failureCode == .notificationsNotAllowed)
        #expect(await app.pendingIdentifiers().isEmpty)
        await system.shutdown()
    }

    @Test("provisional authorization is granted without a prompt and delivers quietly to the list")
    func provisional() async throws {
        let consent = CountingConsent(answer: false)
        let system = try await NotificationTestSystem.start(consent: consent)
        let app = try await system.connect("com.example.quiet", state: .background)
        #expect(await app.request(.requestAuthorization([.alert, .sound, .provisional])) == .authorization(granted: true))
        #expect(consent.prompts == 0)
        guard case .settings(let settings) = await app.request(.getSettings) else { Issue.record("no settings"); return }
        #expect(settings.authorizationStatus == .provisional)
        var content = NotificationContentValue()
        content.title = "Quiet"
        content.sound = .default
        _ = await app.request(.add(NotificationRequestValue(identifier: "q", content: content, trigger: nil)))
        await system.settle()
        let presented = try #require(system.presenter.presented.first)
        #expect(presented.presentation == Presentation(banner: false, list: true, sound: false, badge: false))
        #expect(await app.deliveredIdentifiers() == ["q"])
        await system.shutdown()
    }

    @Test("the person changes settings later and the running app is told")
    func personChangesSettings() async throws {
        let system = try await NotificationTestSystem.start()
        let transport = try await system.connect("com.example.changes")
        let app = ScriptedApp(transport, presentationOptions: nil)
        _ = await transport.request(.requestAuthorization([.alert, .sound]))
        let reply = await system.engine.handleAdmin(.changeSettings("com.example.changes", SettingsChange(sound: .disabled, alertStyle: .alert)))
        guard case .settings(let changed) = reply else { Issue.record("no settings: \(reply)"); return }
        #expect(changed.soundSetting == .disabled)
        #expect(changed.alertStyle == .alert)
        #expect(await eventually { app.received.items.contains(.settingsChanged(changed)) })
        guard case .settings(let seen) = await transport.request(.getSettings) else { Issue.record("no settings"); return }
        #expect(seen == changed)

        _ = await system.engine.handleAdmin(.changeSettings("com.example.changes", SettingsChange(authorizationStatus: .denied)))
        #expect(await transport.add("after", trigger: nil).failureCode == .notificationsNotAllowed)
        #expect(await system.engine.handleAdmin(.settings("com.example.unknown")) == .failure(NotificationError(.invalidRequest, "no app \"com.example.unknown\" is installed (see `tidings apps list`)")))
        await system.shutdown()
    }

    @Test("a notification for an app whose alerts are off goes to the list without a banner")
    func alertsOff() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.list", state: .background)
        _ = await app.request(.requestAuthorization([.alert, .sound]))
        _ = await system.engine.handleAdmin(.changeSettings("com.example.list", SettingsChange(alert: .disabled)))
        _ = await app.add("l", trigger: nil)
        await system.settle()
        #expect(system.presenter.presented.first?.presentation.banner == false)
        #expect(system.presenter.presented.first?.presentation.list == true)
        await system.shutdown()
    }

    @Test("a presented notification carries the app's settings and folder, so no presenter asks the engine for them")
    func presentedCarriesSettingsAndFolder() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.carried", state: .background)
        _ = await app.request(.requestAuthorization([.alert, .sound]))
        let reply = await system.engine.handleAdmin(.changeSettings("com.example.carried", SettingsChange(alertStyle: .alert, showPreviews: .never)))
        guard case .settings(let settings) = reply else { Issue.record("no settings: \(reply)"); return }
        _ = await app.add("c", trigger: nil)
        await system.settle()
        let presented = try #require(system.presenter.presented.first)
        #expect(presented.settings == settings)
        #expect(presented.settings?.alertStyle == .alert && presented.settings?.showPreviewsSetting == .never)
        #expect(presented.appDirectory == (try await system.engine.app("com.example.carried"))?.directory)
        #expect(presented.appDirectory != nil)
        await system.shutdown()
    }
}
