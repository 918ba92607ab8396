import Foundation
import Testing
import TidingsCore
import TidingsEngine
import TidingsTesting

@Suite("Foreground presentation and responses")
struct DelegateTests {
    static let category = CategoryValue(
        identifier: "chat",
        actions: [
            ActionValue(identifier: "reply", title: "Reply", options: ActionValue.foreground,
                        textInput: .init(buttonTitle: "Send", placeholder: "Message")),
            ActionValue(identifier: "like", title: "Like"),
        ],
        options: CategoryValue.customDismissAction)

    @Test("a foreground app's delegate decides; [] shows nothing")
    func willPresentDecides() async throws {
        let system = try await NotificationTestSystem.start()
        let transport = try await system.connect("com.example.fg")
        let app = ScriptedApp(transport, presentationOptions: [])
        _ = await transport.request(.requestAuthorization([.alert, .sound]))
        _ = await transport.request(.setDelegate(true))
        _ = await transport.add("hidden", trigger: nil)
        await system.settle()
        #expect(app.willPresentCount == 1)
        #expect(system.presenter.presented.isEmpty)
        #expect(await transport.deliveredIdentifiers().isEmpty)
        await system.shutdown()
    }

    @Test("banner and list options show it and keep it in the list")
    func willPresentBannerList() async throws {
        let system = try await NotificationTestSystem.start()
        let transport = try await system.connect("com.example.fg2")
        _ = ScriptedApp(transport, presentationOptions: [.banner, .list, .sound])
        _ = await transport.request(.requestAuthorization([.alert, .sound]))
        _ = await transport.request(.setDelegate(true))
        var content = NotificationContentValue()
        content.title = "Hi"
        content.sound = .default
        _ = await transport.request(.add(NotificationRequestValue(identifier: "shown", content: content, trigger: nil)))
        await system.settle()
        #expect(system.presenter.presented.first?.presentation == Presentation(banner: true, list: true, sound: true, badge: false))
        #expect(await transport.deliveredIdentifiers() == ["shown"])
        await system.shutdown()
    }

    @Test("a delegate that never answers: not presented once the timeout passes on the clock")
    func willPresentTimeout() async throws {
        let system = try await NotificationTestSystem.start()
        let transport = try await system.connect("com.example.slow")
        let app = ScriptedApp(transport, presentationOptions: nil)
        _ = await transport.request(.requestAuthorization([.alert]))
        _ = await transport.request(.setDelegate(true))
        _ = await transport.add("late", trigger: .timeInterval(seconds: 10, repeats: false))
        system.clock.advance(by: 10)
        #expect(await eventually { app.willPresentCount == 1 })
        #expect(system.presenter.presented.isEmpty)
        await system.advance(by: 5)
        #expect(system.presenter.presented.isEmpty)
        #expect(await transport.deliveredIdentifiers().isEmpty)
        await system.shutdown()
    }

    @Test("one app's notifications arrive in the order they fired; its slow delegate holds up no other app")
    func perAppOrder() async throws {
        let system = try await NotificationTestSystem.start()
        let slowTransport = try await system.connect("com.example.ordered")
        let slow = ScriptedApp(slowTransport, presentationOptions: nil)
        _ = await slowTransport.request(.requestAuthorization([.alert]))
        _ = await slowTransport.request(.setDelegate(true))
        let other = try await system.connect("com.example.other", state: .background)
        _ = await other.request(.requestAuthorization([.alert]))
        for id in ["s1", "s2", "s3"] { _ = await slowTransport.add(id, trigger: .timeInterval(seconds: 10, repeats: false)) }
        _ = await other.add("o1", trigger: .timeInterval(seconds: 10, repeats: false))
        system.clock.advance(by: 10)
        // s1 waits for its delegate; the other app is not held up, and s2 waits behind s1.
        #expect(await eventually { system.presenter.presentedIdentifiers == ["o1"] && slow.willPresentCount == 1 })
        for expected in ["s1", "s2", "s3"] {
            #expect(await eventually { slow.asked.last?.notification.request.identifier == expected })
            #expect(slow.willPresentCount == ["s1", "s2", "s3"].firstIndex(of: expected)! + 1)
            slowTransport.send(.presentationDecision(eventID: slow.asked.last!.eventID, options: [.banner, .list]))
            #expect(await eventually { system.presenter.presentedIdentifiers.last == expected })
        }
        await system.settle()
        #expect(system.presenter.presentedIdentifiers == ["o1", "s1", "s2", "s3"])
        #expect(await slowTransport.deliveredIdentifiers() == ["s1", "s2", "s3"])
        await system.shutdown()
    }

    @Test("background or delegate-less apps get no willPresent; settings decide")
    func backgroundUsesSettings() async throws {
        let system = try await NotificationTestSystem.start()
        let transport = try await system.connect("com.example.bg", state: .background)
        let app = ScriptedApp(transport, presentationOptions: [])
        _ = await transport.request(.requestAuthorization([.alert]))
        _ = await transport.request(.setDelegate(true))
        _ = await transport.add("bg", trigger: nil)
        await system.settle()
        #expect(app.willPresentCount == 0)
        #expect(system.presenter.presentedIdentifiers == ["bg"])
        await system.shutdown()
    }

    @Test("tap, action, text reply and dismiss reach didReceive; dismiss only with customDismissAction")
    func responses() async throws {
        let system = try await NotificationTestSystem.start()
        let transport = try await system.connect("com.example.chat", state: .background)
        let app = ScriptedApp(transport, presentationOptions: nil)
        _ = await transport.request(.requestAuthorization([.alert]))
        _ = await transport.request(.setCategories([Self.category, CategoryValue(identifier: "plain", actions: [])]))
        _ = await transport.request(.setDelegate(true))
        for id in ["t", "a", "r", "d"] { _ = await transport.add(id, trigger: nil, category: "chat") }
        _ = await transport.add("p", trigger: nil, category: "plain")
        await system.settle()

        try await system.engine.respond(bundle: "com.example.chat", identifier: "t", actionIdentifier: ActionIdentifier.default)
        try await system.engine.respond(bundle: "com.example.chat", identifier: "a", actionIdentifier: "like")
        try await system.engine.respond(bundle: "com.example.chat", identifier: "r", actionIdentifier: "reply", userText: "on my way")
        try await system.engine.respond(bundle: "com.example.chat", identifier: "d", actionIdentifier: ActionIdentifier.dismiss)
        try await system.engine.respond(bundle: "com.example.chat", identifier: "p", actionIdentifier: ActionIdentifier.dismiss)

        #expect(await eventually { app.responses.count == 4 })
        let responses = app.responses
        #expect(responses.map(\.notification.request.identifier) == ["t", "a", "r", "d"])
        #expect(responses.map(\.actionIdentifier) == [ActionIdentifier.default, "like", "reply", ActionIdentifier.dismiss])
        #expect(responses[2].userText == "on my way")
        #expect(responses[0].userText == nil)
        #expect(await transport.deliveredIdentifiers().isEmpty, "answered notifications leave the list")
        #expect(await eventually { (try? await system.engine.heldResponses("com.example.chat"))?.isEmpty == true })
        await system.shutdown()
    }

    @Test("bad responses are clear errors and change nothing")
    func badResponses() async throws {
        let system = try await NotificationTestSystem.start()
        let transport = try await system.connect("com.example.badresp")
        _ = await transport.request(.requestAuthorization([.alert]))
        _ = await transport.request(.setCategories([Self.category]))
        _ = await transport.add("n", trigger: nil, category: "chat")
        await system.settle()
        await #expect(throws: NotificationError.self) {
            try await system.engine.respond(bundle: "com.example.badresp", identifier: "n", actionIdentifier: "nope")
        }
        await #expect(throws: NotificationError.self) {
            try await system.engine.respond(bundle: "com.example.badresp", identifier: "n", actionIdentifier: "like", userText: "text for a button")
        }
        await #expect(throws: NotificationError.self) {
            try await system.engine.respond(bundle: "com.example.badresp", identifier: "missing", actionIdentifier: ActionIdentifier.default)
        }
        #expect(await transport.deliveredIdentifiers() == ["n"])
        await system.shutdown()
    }

    @Test("a response for an app that is not running launches it and waits for its delegate")
    func launchForResponse() async throws {
        let system = try await NotificationTestSystem.start(storage: .sqlite)
        let first = try await system.connect("com.example.launch")
        _ = await first.request(.requestAuthorization([.alert]))
        _ = await first.request(.setCategories([Self.category]))
        _ = await first.add("m", trigger: nil, category: "chat")
        await system.settle()
        await first.disconnect()

        try await system.engine.respond(bundle: "com.example.launch", identifier: "m", actionIdentifier: "reply", userText: "hi")
        #expect(system.launcher.launches.map(\.bundleIdentifier) == ["com.example.launch"])
        #expect(system.launcher.launches.first?.state == .active, "a foreground action launches the app active")

        // The launched process connects; responses wait until its delegate is set.
        let second = try await system.connect("com.example.launch")
        let app = ScriptedApp(second, presentationOptions: nil)
        _ = await second.request(.getSettings)
        #expect(app.responses.isEmpty)
        _ = await second.request(.setDelegate(true))
        #expect(await eventually { app.responses.count == 1 })
        #expect(app.responses.first?.userText == "hi")
        await system.shutdown()
    }

    @Test("setNotificationCategories replaces the whole set")
    func categoriesReplace() async throws {
        let system = try await NotificationTestSystem.start()
        let app = try await system.connect("com.example.cats")
        _ = await app.request(.setCategories([Self.category, CategoryValue(identifier: "other", actions: [])]))
        _ = await app.request(.setCategories([CategoryValue(identifier: "only", actions: [])]))
        #expect(await app.request(.getCategories) == .categories([CategoryValue(identifier: "only", actions: [])]))
        await system.shutdown()
    }
}
