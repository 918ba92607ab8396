import Foundation
import Testing
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsTesting

/// The content extension host with real extension processes (the `TestContentExtension`
/// fixture) on an engine: open → HTML, actions → outcomes, the extension context, media,
/// every way an extension can fail, the limits, and one app's data kept from another's
/// extension. Deadlines on a test clock.
@Suite("Content extension host", .timeLimit(.minutes(2)))
struct ContentExtensionHostTests {
    @Test("open runs the extension in its own process and renders its HTML: escaped text, attachment URLs for this view, its environment, the main thread")
    func opensAndRenders() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1", attachments: 2)
        let session = try await h.open("n1")
        let view = try #require(session.view, "\(session.failure ?? "")")
        #expect(session.failure == nil)
        #expect(view.html.contains("<h1>Hello &lt;b&gt;</h1><p>Body &amp; more</p>"))
        #expect(view.html.contains("<li>http://127.0.0.1:1/ext/\(session.id)/n1/0 readable=true</li><li>http://127.0.0.1:1/ext/\(session.id)/n1/1 readable=true</li>"))
        #expect(view.html.contains("main=true extension=com.example.content.content app=com.example.content"))
        #expect(view.title == "Custom: Hello <b>")
        #expect(view.actions.map(\.identifier).first == "keep")
        #expect(view.media == nil)
        #expect(session.declaration.initialContentSizeRatio == 0.5)
        #expect(session.declaration.categories == [ContentHarness.category])
        let pid = try #require(await h.pid())
        #expect(processExists(pid))
        await h.close()
        #expect(await eventually { !processExists(pid) }, "shutdown ends the process")
    }

    @Test("a notification of a category without an extension, or an unknown one, has nothing to open")
    func nothingToOpen() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("plain", category: "other")
        await #expect(throws: ContentExtensionError.self) { try await h.open("plain") }
        await #expect(throws: ContentExtensionError.self) { try await h.open("missing") }
        await #expect(throws: ContentExtensionError.self) { try await h.open("plain", bundle: "com.example.nope") }
        #expect(await h.pid() == nil)
        await h.close()
    }

    @Test(".doNotDismiss re-renders in the same process; the process stays warm after close and serves the next open")
    func doNotDismissKeepsTheView() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1")
        try await h.deliver("n2")
        let session = try await h.open("n1")
        let pid = try #require(await h.pid())
        guard case .rendered(let after) = try await h.host.perform(session: session.id, actionIdentifier: "keep") else {
            Issue.record("keep did not re-render")
            return
        }
        #expect(after.view?.html.contains("count=1") == true)
        guard case .rendered(let later) = try await h.host.perform(session: session.id, actionIdentifier: "later") else {
            Issue.record("a completion on a later turn did not re-render")
            return
        }
        #expect(later.view?.html.contains("count=11") == true)
        #expect(try await h.delivered().contains("n1"), "the notification stays")
        await h.host.close(session: session.id)
        #expect(await h.host.openSessions.isEmpty)
        let second = try await h.open("n2")
        #expect(second.view?.html.contains("seen=n1,n2") == true, "the warm process served the second view")
        #expect(await h.pid() == pid)
        await h.close()
    }

    @Test(".dismiss closes the view and keeps the notification; nothing reaches the app")
    func dismissCloses() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1")
        let session = try await h.open("n1")
        #expect(try await h.host.perform(session: session.id, actionIdentifier: "close") == .dismissed)
        #expect(await h.host.openSessions.isEmpty)
        #expect(try await h.delivered() == ["n1"])
        #expect(try await h.held().isEmpty)
        await #expect(throws: ContentExtensionError.self) { try await h.host.perform(session: session.id, actionIdentifier: "keep") }
        await h.close()
    }

    @Test(".dismissAndForwardAction closes the view and forwards the action by the respond path (held for the app, which is launched)")
    func forwardReachesTheApp() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1")
        let session = try await h.open("n1")
        #expect(try await h.host.perform(session: session.id, actionIdentifier: "forward") == .forwarded)
        #expect(try await h.held() == ["n1:forward"])
        #expect(try await h.delivered().isEmpty)
        #expect(h.system.launcher.launches.map(\.reason) == [.response])
        await h.close()
    }

    @Test("a text reply reaches the extension as UNTextInputNotificationResponse; text for a button, an unknown action are refused")
    func textReply() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1")
        let session = try await h.open("n1")
        guard case .rendered(let after) = try await h.host.perform(session: session.id, actionIdentifier: "reply", text: "<hi>") else {
            Issue.record("reply did not re-render")
            return
        }
        #expect(after.view?.html.contains("reply=&lt;hi&gt;") == true)
        await #expect(throws: ContentExtensionError.self) { try await h.host.perform(session: session.id, actionIdentifier: "keep", text: "x") }
        await #expect(throws: ContentExtensionError.self) { try await h.host.perform(session: session.id, actionIdentifier: "nope") }
        await h.close()
    }

    @Test("a tap on the view goes to the app directly (default action), not to the extension")
    func tapGoesToTheApp() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1")
        let session = try await h.open("n1")
        #expect(try await h.host.perform(session: session.id, actionIdentifier: ActionIdentifier.default) == .forwarded)
        #expect(try await h.held() == ["n1:\(ActionIdentifier.default)"])
        await h.close()
    }

    @Test("extensionContext: notificationActions changed at run time (and forwardable), performNotificationDefaultAction, dismissNotificationContentExtension")
    func extensionContext() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1")
        try await h.deliver("n2")
        try await h.deliver("n3")
        let first = try await h.open("n1")
        guard case .rendered(let changed) = try await h.host.perform(session: first.id, actionIdentifier: "set-actions") else {
            Issue.record("set-actions did not re-render")
            return
        }
        #expect(changed.view?.actions.map(\.identifier) == ["added"])
        await #expect(throws: ContentExtensionError.self) { try await h.host.perform(session: first.id, actionIdentifier: "keep") }
        #expect(try await h.host.perform(session: first.id, actionIdentifier: "added") == .forwarded)
        #expect(try await h.held() == ["n1:added"], "the engine takes the extension's own action")

        let second = try await h.open("n2")
        let secondEvents = await h.host.events(session: second.id)
        _ = try await h.host.perform(session: second.id, actionIdentifier: "default")
        #expect(await collect(secondEvents).last == .forwarded)
        #expect(try await h.held().contains("n2:\(ActionIdentifier.default)"))

        let third = try await h.open("n3")
        let thirdEvents = await h.host.events(session: third.id)
        _ = try await h.host.perform(session: third.id, actionIdentifier: "dismiss-context")
        #expect(await collect(thirdEvents).last == .dismissed)
        #expect(try await h.delivered() == ["n3"])
        await h.close()
    }

    @Test("an interactive view's script events reach the view's eventHandler and re-render; limits on size and rate, at and past them; only interactive views")
    func userEvents() async throws {
        let h = try await ContentHarness.start { $0.maximumUserEventsPerSecond = 3 }
        try await h.install("com.example.touch", attributes: [ContentExtensionDeclaration.Key.userInteractionEnabled: .bool(true)])
        try await h.deliver("t1", bundle: "com.example.touch", fixture: "interactive")
        try await h.deliver("plain", fixture: "interactive")
        let session = try await h.open("t1", bundle: "com.example.touch")
        #expect(session.declaration.userInteractionEnabled)
        guard case .rendered(let after) = try await h.host.userEvent(session: session.id, element: "add", value: "5") else {
            Issue.record("the event did not re-render")
            return
        }
        #expect(after.view?.html.contains("count=5") == true && after.view?.html.contains("event=add:5") == true, "\(after.view?.html ?? "")")

        let limits = ContentExtensionConfiguration.self
        let element = String(repeating: "e", count: limits.defaultMaximumUserEventElementBytes)
        let value = String(repeating: "1", count: limits.defaultMaximumUserEventValueBytes)
        guard case .rendered(let atLimit) = try await h.host.userEvent(session: session.id, element: element, value: value) else {
            Issue.record("an event at the size limits did not reach the extension")
            return
        }
        #expect(atLimit.view?.html.contains("event=\(element):") == true)
        for (element, value) in [(element + "e", "1"), ("", "1"), ("add", value + "1")] {
            await #expect { try await h.host.userEvent(session: session.id, element: element, value: value) } throws: {
                ($0 as? ContentExtensionError)?.code == .invalidUserEvent
            }
        }
        // Two went through this second: one more reaches the extension, the next is refused;
        // a second later the view may send again.
        _ = try await h.host.userEvent(session: session.id, element: "add", value: "1")
        await #expect { try await h.host.userEvent(session: session.id, element: "add", value: "1") } throws: {
            ($0 as? ContentExtensionError)?.code == .tooManyUserEvents
        }
        await h.system.advance(by: 1)
        guard case .rendered(let later) = try await h.host.userEvent(session: session.id, element: "add", value: "2") else {
            Issue.record("the next second's event did not re-render")
            return
        }
        #expect(later.view?.html.contains("event=add:2") == true)

        let plain = try await h.open("plain")
        #expect(!plain.declaration.userInteractionEnabled)
        await #expect { try await h.host.userEvent(session: plain.id, element: "add", value: "5") } throws: {
            ($0 as? ContentExtensionError)?.code == .notInteractive
        }
        await #expect { try await h.host.userEvent(session: 999_999, element: "add", value: "5") } throws: {
            ($0 as? ContentExtensionError)?.code == .noSuchSession
        }
        await h.close()
    }

    @Test("media: the play/pause button's type, frame and checked tint; mediaPlay re-renders; mediaPlayingStarted updates the button")
    func media() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1", fixture: "media", userInfo: ["tint": .string("#ff8800")])
        try await h.deliver("n2", fixture: "media", userInfo: ["tint": .string("red;background:url(//evil)")])
        let session = try await h.open("n1")
        #expect(session.view?.media == MediaButtonValue(type: 2, frame: [10, 20, 44, 44], tintColor: "#ff8800", playing: false))
        guard case .rendered(let playing) = try await h.host.media(session: session.id, play: true) else {
            Issue.record("media did not re-render")
            return
        }
        #expect(playing.view?.html.contains("playing") == true)
        #expect(playing.view?.media?.playing == true)
        guard case .rendered(let paused) = try await h.host.media(session: session.id, play: false) else { return }
        #expect(paused.view?.media?.playing == false)
        let events = await h.host.events(session: session.id)
        _ = try await h.host.perform(session: session.id, actionIdentifier: "play-self")
        let event = await collect(events, count: 1).first
        guard case .rendered(let view)? = event else {
            Issue.record("mediaPlayingStarted sent no view: \(String(describing: event))")
            return
        }
        #expect(view.media?.playing == true)
        let hostile = try await h.open("n2")
        #expect(hostile.view?.media?.tintColor == nil, "a tint that is no plain CSS color is dropped")
        await h.close()
    }

    @Test("another notification of the view's thread reaches didReceive again; a withdrawn notification closes the view")
    func presenter() async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("n1", thread: "t")
        let session = try await h.open("n1")
        let events = await h.host.events(session: session.id)
        var second = NotificationContentValue()
        second.title = "Second"
        second.threadIdentifier = "t"
        second.categoryIdentifier = ContentHarness.category
        let notification = DeliveredNotificationValue(request: NotificationRequestValue(identifier: "n2", content: second, trigger: nil), date: h.clock.now)
        await h.host.present(PresentedNotification(bundleIdentifier: ContentHarness.bundle, appName: "x", notification: notification, category: nil,
                                                   presentation: Presentation(banner: true, list: true, sound: false, badge: false), badge: nil))
        guard case .rendered(let view)? = await collect(events, count: 1).first else {
            Issue.record("no re-render")
            return
        }
        #expect(view.html.contains("<h1>Second</h1>"))
        #expect(await h.host.openSessions.first?.notificationIdentifier == "n2")
        let after = await h.host.events(session: session.id)
        await h.host.withdraw(bundleIdentifier: ContentHarness.bundle, identifiers: ["n2"])
        #expect(await collect(after) == [.dismissed])
        await h.close()
    }

    // MARK: - Failures

    @Test("a crash in didReceive shows the default content, is logged, and the next open starts a new process",
          arguments: ["crash", "garbage", "foreign"])
    func failureOnOpen(fixture: String) async throws {
        let h = try await ContentHarness.start()
        try await h.deliver("bad", fixture: fixture)
        try await h.deliver("good")
        let session = try await h.open("bad")
        #expect(session.view == nil)
        let failure = try #require(session.failure)
        switch fixture {
        case "crash": #expect(failure.contains("process ended"))
        case "garbage": #expect(failure.contains("garbage"))
        default: #expect(failure.contains("not one of this process's"))
        }
        #expect(h.log.contains("content extension failed", reason: String(failure.prefix(20))))
        #expect(await h.host.openSessions.isEmpty)
        let next = try await h.open("good")
        #expect(next.view?.html.contains("seen=good") == true, "a fresh process")
        await h.close()
    }

    @Test("an extension that hangs in didReceive is killed after the configured deadline (test clock) and shows the default content")
    func hangOnOpen() async throws {
        let h = try await ContentHarness.start { $0.deadline = 3 }
        try await h.deliver("n1", fixture: "hang")
        let task = await h.startOpen("n1")
        h.clock.advance(by: 2.9)
        #expect(h.clock.sleeperCount == 1, "nothing happens before the deadline")
        let pid = try #require(await h.pid())
        h.clock.advance(by: 0.1)
        let session = try #require(await task.value)
        #expect(session.view == nil)
        #expect(session.failure?.contains("did not answer within 3 s") == true)
        #expect(await eventually { !processExists(pid) })
        await h.close()
    }

    @Test("a crash or a hang while handling an action closes the view (default content) and the action goes to the app")
    func failureOnAction() async throws {
        let h = try await ContentHarness.start { $0.deadline = 1 }
        try await h.deliver("n1")
        try await h.deliver("n2")
        let session = try await h.open("n1")
        let events = await h.host.events(session: session.id)
        guard case .failed(let reason) = try await h.host.perform(session: session.id, actionIdentifier: "crash") else {
            Issue.record("a crash was not a failure")
            return
        }
        #expect(reason.contains("process ended"))
        #expect(await collect(events).last == .failed(reason))
        #expect(try await h.held() == ["n1:crash"])

        let hanging = try await h.open("n2")
        let task = Task { try? await h.host.perform(session: hanging.id, actionIdentifier: "hang") }
        _ = await eventually { h.clock.sleeperCount == 1 }
        h.clock.advance(by: 1)
        guard case .failed(let hung)? = await task.value else {
            Issue.record("a hang was not a failure")
            return
        }
        #expect(hung.contains("did not answer within 1 s"))
        #expect(try await h.held() == ["n1:crash", "n2:hang"])
        await h.close()
    }

    // MARK: - Limits

    @Test("HTML at the limit is shown; one byte past it kills the extension (default content)")
    func htmlLimit() async throws {
        let h = try await ContentHarness.start { $0.maximumHTMLBytes = 4096 }
        try await h.deliver("at", fixture: "html", userInfo: ["bytes": .integer(4096)])
        try await h.deliver("past", fixture: "html", userInfo: ["bytes": .integer(4097)])
        #expect(try await h.open("at").view?.html.utf8.count == 4096)
        let past = try await h.open("past")
        #expect(past.view == nil)
        #expect(past.failure?.contains("4097 bytes of HTML, over the limit of 4096") == true)
        await h.close()
    }

    @Test("a message over the frame limit is garbage: killed, default content")
    func messageLimit() async throws {
        let h = try await ContentHarness.start {
            $0.maximumMessageBytes = 8192
            $0.maximumHTMLBytes = 1 << 20
        }
        try await h.deliver("at", fixture: "html", userInfo: ["bytes": .integer(7000)])
        try await h.deliver("past", fixture: "html", userInfo: ["bytes": .integer(8192)])
        #expect(try await h.open("at").view != nil)
        let past = try await h.open("past")
        #expect(past.view == nil)
        #expect(past.failure?.contains("over the limit of 8192") == true)
        await h.close()
    }

    @Test("a title at the limit is shown; past it, default content")
    func titleLimit() async throws {
        let h = try await ContentHarness.start { $0.maximumTitleBytes = 100 }
        try await h.deliver("at", fixture: "title", userInfo: ["bytes": .integer(100)])
        try await h.deliver("past", fixture: "title", userInfo: ["bytes": .integer(101)])
        #expect(try await h.open("at").view?.title?.utf8.count == 100)
        #expect(try await h.open("past").failure?.contains("a title of 101 bytes") == true)
        await h.close()
    }

    @Test("actions at the limit are shown; past it, default content")
    func actionLimit() async throws {
        let h = try await ContentHarness.start { $0.maximumActions = 4 }
        try await h.deliver("at", fixture: "actions", userInfo: ["count": .integer(4)])
        try await h.deliver("past", fixture: "actions", userInfo: ["count": .integer(5)])
        #expect(try await h.open("at").view?.actions.count == 4)
        #expect(try await h.open("past").failure?.contains("5 actions, over the limit of 4") == true)
        await h.close()
    }

    @Test("open views at the limit; one more is refused with a typed error")
    func sessionLimit() async throws {
        let h = try await ContentHarness.start { $0.maximumSessions = 2 }
        for id in ["n1", "n2", "n3"] { try await h.deliver(id) }
        _ = try await h.open("n1")
        let second = try await h.open("n2")
        #expect(second.view != nil)
        await #expect {
            _ = try await h.open("n3")
        } throws: { error in
            (error as? ContentExtensionError)?.code == .tooManySessions
        }
        await h.host.close(session: second.id)
        #expect(try await h.open("n3").view != nil)
        await h.close()
    }

    @Test("unsolicited re-renders beyond the pending limit keep only the newest", arguments: [8, 30])
    func pendingEventLimit(count: Int) async throws {
        let h = try await ContentHarness.start { $0.maximumPendingEvents = 8 }
        try await h.deliver("n1", fixture: "spam", userInfo: ["count": .integer(Int64(count))])
        let session = try await h.open("n1")
        let events = await h.host.events(session: session.id)
        // The reply to "keep" comes after every setNeedsDisplay of didReceive.
        _ = try await h.host.perform(session: session.id, actionIdentifier: "keep")
        await h.host.close(session: session.id)
        let kept = await collect(events)
        #expect(kept.count == 8)
        #expect(kept.allSatisfy { if case .rendered = $0 { true } else { false } })
        await h.close()
    }

    // MARK: - Isolation

    @Test("one app's notification never reaches another app's extension, which runs in a process of its own")
    func appsAreIsolated() async throws {
        let h = try await ContentHarness.start()
        try await h.install("com.example.other")
        try await h.deliver("secret", body: "secret of the first app")
        try await h.deliver("mine", bundle: "com.example.other", body: "the other app's own")
        let first = try await h.open("secret")
        #expect(first.view?.html.contains("secret of the first app") == true)
        await #expect(throws: ContentExtensionError.self) { try await h.open("secret", bundle: "com.example.other") }
        let other = try await h.open("mine", bundle: "com.example.other")
        let html = try #require(other.view?.html)
        #expect(!html.contains("secret"))
        #expect(html.contains("seen=mine<"))
        #expect(html.contains("extension=com.example.other.content app=com.example.other"))
        #expect(await h.pid() != h.pid("com.example.other"))
        await h.close()
    }
}

@Suite("Content extension frame and declaration")
struct ContentExtensionFrameTests {
    let plain = ContentExtensionDeclaration(extensionIdentifier: "a.b.c", categories: ["x"])
    var interactive: ContentExtensionDeclaration {
        var d = plain
        d.userInteractionEnabled = true
        return d
    }

    @Test("scripts only with UNNotificationExtensionUserInteractionEnabled; never allow-same-origin; only the attachment origin loads")
    func policy() {
        #expect(ContentExtensionFrame.sandbox(declaration: plain) == "")
        #expect(ContentExtensionFrame.sandbox(declaration: interactive) == "allow-scripts")
        let policy = ContentExtensionFrame.contentSecurityPolicy(declaration: plain, attachmentOrigin: "http://127.0.0.1:8080")
        #expect(policy.contains("default-src 'none'"))
        #expect(policy.contains("script-src 'none'"))
        #expect(policy.contains("img-src http://127.0.0.1:8080 data:"))
        #expect(ContentExtensionFrame.contentSecurityPolicy(declaration: interactive, attachmentOrigin: nil).contains("script-src 'unsafe-inline'"))
        let injected = ContentExtensionFrame.contentSecurityPolicy(declaration: plain, attachmentOrigin: "http://x; script-src *")
        #expect(!injected.contains("script-src *"))
        let document = ContentExtensionFrame.document(view: ContentExtensionViewValue(html: "<p>hi</p>"), declaration: plain, attachmentOrigin: nil)
        #expect(document.contains(#"<meta http-equiv="Content-Security-Policy" content="default-src 'none';"#))
        #expect(document.hasSuffix("<body><p>hi</p></body></html>"))
        #expect(!document.contains("<script"), "a view without UserInteractionEnabled gets no script")
        let scripted = ContentExtensionFrame.document(view: ContentExtensionViewValue(html: "<p>hi</p>"), declaration: interactive, attachmentOrigin: nil)
        #expect(scripted.contains("<script>\(ContentExtensionFrame.eventScript)</script></head>"), "an interactive view gets the event script")
    }

    @Test("the frame's height: the extension's preferred size, else the manifest's ratio, at most 10 × width")
    func height() {
        #expect(ContentExtensionFrame.height(forWidth: 300, view: nil, declaration: plain) == 300)
        #expect(ContentExtensionFrame.height(forWidth: 300, view: ContentExtensionViewValue(html: "", preferredContentSize: [100, 50]), declaration: plain) == 150)
        #expect(ContentExtensionFrame.height(forWidth: 300, view: ContentExtensionViewValue(html: "", preferredContentSize: [1, 1000]), declaration: plain) == 3000)
    }

    @Test("the Info.plist keys: a string or an array of categories, the ratio's range, flags; errors name the key", arguments: [
        ([String: PropertyListValue](), "needs UNNotificationExtensionCategory"),
        (["UNNotificationExtensionCategory": .integer(1)], "must be a string or an array"),
        (["UNNotificationExtensionCategory": .array([.string("a"), .integer(2)])], "only strings"),
        (["UNNotificationExtensionCategory": .array([])], "at least one"),
        (["UNNotificationExtensionCategory": .string("a"), "UNNotificationExtensionInitialContentSizeRatio": .double(0)], "above 0"),
        (["UNNotificationExtensionCategory": .string("a"), "UNNotificationExtensionInitialContentSizeRatio": .double(10.5)], "at most 10"),
        (["UNNotificationExtensionCategory": .string("a"), "UNNotificationExtensionInitialContentSizeRatio": .string("1")], "must be a number"),
        (["UNNotificationExtensionCategory": .string("a"), "UNNotificationExtensionUserInteractionEnabled": .string("YES")], "true or false"),
    ])
    func badDeclarations(attributes: [String: PropertyListValue], message: String) {
        let record = AppExtensionRecord(bundleIdentifier: "a.b.c", point: .content, executable: "/bin/true", attributes: attributes)
        #expect {
            _ = try ContentExtensionDeclaration(extension: record)
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    @Test("good declarations, and the first extension of an app that declares a category draws it")
    func goodDeclarations() throws {
        let one = AppExtensionRecord(bundleIdentifier: "a.b.one", point: .content, executable: "/bin/true", attributes: [
            "UNNotificationExtensionCategory": .string("x"), "UNNotificationExtensionInitialContentSizeRatio": .integer(10),
            "UNNotificationExtensionDefaultContentHidden": .bool(true), "UNNotificationExtensionOverridesDefaultTitle": .bool(true),
            "UNNotificationExtensionUserInteractionEnabled": .bool(true)])
        let two = AppExtensionRecord(bundleIdentifier: "a.b.two", point: .content, executable: "/bin/true", attributes: [
            "UNNotificationExtensionCategory": .array([.string("x"), .string("y")])])
        let declaration = try ContentExtensionDeclaration(extension: one)
        #expect(declaration == ContentExtensionDeclaration(extensionIdentifier: "a.b.one", categories: ["x"], initialContentSizeRatio: 10,
                                                           defaultContentHidden: true, overridesDefaultTitle: true, userInteractionEnabled: true))
        let app = AppRecord(bundleIdentifier: "a.b", displayName: "a", executable: "/bin/true", directory: "/tmp", extensions: [one, two], installedAt: Date())
        #expect(ContentExtensionDeclaration.find(categoryIdentifier: "x", in: app)?.record.bundleIdentifier == "a.b.one")
        #expect(ContentExtensionDeclaration.find(categoryIdentifier: "y", in: app)?.record.bundleIdentifier == "a.b.two")
        #expect(ContentExtensionDeclaration.find(categoryIdentifier: "", in: app) == nil)
        #expect(ContentExtensionHost.contentExtension(for: NotificationContentValue(), app: app) == nil)
    }
}
