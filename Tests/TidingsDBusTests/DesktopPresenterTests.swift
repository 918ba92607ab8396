import Foundation
import Logging
import Synchronization
import Testing
import TidingsCore
import TidingsDaemon
import TidingsDBus
import TidingsEngine
import TidingsTesting
import TidingsTestSupport
import UserNotifications

/// Records the responses an app's delegate gets.
final class DesktopDelegate: NSObject, UNUserNotificationCenterDelegate, Sendable {
    let responses = Mutex<[String]>([])

    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse) async {
        let text = (response as? UNTextInputNotificationResponse).map { " text=\($0.userText)" } ?? ""
        responses.withLock { $0.append("\(response.notification.request.identifier) \(response.actionIdentifier)\(text)") }
    }

    func has(_ entry: String) async -> Bool { await eventually { self.responses.withLock { $0.contains(entry) } } }
}

/// The desktop presenter in an engine, against python-dbusmock's notification server on a
/// private bus: the exact Notify arguments, and the signals the person's actions send back.
@Suite("Desktop presenter (dbusmock)", .serialized)
struct DesktopPresenterTests {
    struct Setup {
        let bus: PrivateBus
        let mock: NotificationMock
        let system: NotificationTestSystem
        let presenter: DesktopPresenter
        let runner: Task<Void, Never>
        let center: UNUserNotificationCenter
        let delegate: DesktopDelegate

        func stop() async {
            runner.cancel()
            await runner.value
            await system.shutdown()
            await mock.stop()
            bus.stop()
        }
    }

    static let bundle = "com.example.desktop"

    static func start(stateFile: String? = nil, capabilities: String? = nil,
                      configure: (inout DesktopPresenterConfiguration, URL) throws -> Void = { _, _ in }) async throws -> Setup? {
        guard let bus = try await PrivateBus.start() else { return nil }
        let started = if let capabilities { try await NotificationMock.start(on: bus, capabilities: capabilities) } else { try await NotificationMock.start(on: bus) }
        guard let mock = started else {
            bus.stop()
            return nil
        }
        var logger = Logger(label: "test.desktop")
        logger.logLevel = .warning
        var configuration = DesktopPresenterConfiguration(environment: bus.environment, stateFile: stateFile)
        try configure(&configuration, bus.directory)
        let presenter = DesktopPresenter(configuration: configuration, logger: logger)
        let system = try await NotificationTestSystem.start(presenters: [presenter])
        presenter.attach(system.engine)
        let runner = Task { await presenter.run() }
        #expect(await eventually { presenter.isOn })
        let center = try await system.center(for: bundle, state: .background)
        let delegate = DesktopDelegate()
        center.delegate = delegate
        _ = try await center.requestAuthorization(options: [.alert, .sound, .badge])
        let reply = UNTextInputNotificationAction(identifier: "reply", title: "Reply", options: [], textInputButtonTitle: "Send", textInputPlaceholder: "Message…")
        let ok = UNNotificationAction(identifier: "ok", title: "OK", options: [])
        center.setNotificationCategories([UNNotificationCategory(identifier: "chat", actions: [reply, ok], intentIdentifiers: [], options: [.customDismissAction])])
        _ = await center.notificationCategories()
        return Setup(bus: bus, mock: mock, system: system, presenter: presenter, runner: runner, center: center, delegate: delegate)
    }

    /// The server's id for a notification once the presenter has read its `Notify` reply (the
    /// server has the call, and the test sees it, before the presenter has the reply).
    static func serverID(_ presenter: DesktopPresenter, _ bundle: String, _ identifier: String) async throws -> UInt32 {
        _ = await eventually { presenter.serverID(bundle: bundle, identifier: identifier) != nil }
        return try #require(presenter.serverID(bundle: bundle, identifier: identifier))
    }

    static func add(_ center: UNUserNotificationCenter, _ identifier: String, title: String, body: String = "", attachment: URL? = nil) async throws {
        let content = UNMutableNotificationContent()
        content.title = title
        content.body = body
        content.categoryIdentifier = "chat"
        content.sound = .default
        if let attachment { content.attachments = [try UNNotificationAttachment(identifier: "img", url: attachment, options: nil)] }
        try await center.add(UNNotificationRequest(identifier: identifier, content: content, trigger: nil))
    }

    @Test("Notify: app name, escaped title, body with only the allowed tags, image path, actions with the inline reply, hints; a button reaches the delegate")
    func notifyAndAction() async throws {
        guard let setup = try await Self.start() else { return }
        let png = setup.bus.directory.appendingPathComponent("picture.png")
        try Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 0, count: 32)).write(to: png)
        try await Self.add(setup.center, "m1", title: "<b>Ann</b> & co", body: "see <i>this</i> <script>x</script>", attachment: png)
        guard let args = try await setup.mock.notify(1) else { Issue.record("no Notify"); await setup.stop(); return }
        #expect(args[0] == .string(Self.bundle), "the app's display name")
        #expect(args[1] == .uint32(0))
        #expect(args[3] == .string("&lt;b&gt;Ann&lt;/b&gt; &amp; co"), "markup in a title is escaped")
        #expect(args[4] == .string("see <i>this</i> &lt;script&gt;x&lt;/script&gt;"), "only the allowed tags pass in the body")
        #expect(args[5] == .strings(["default", "Open", "inline-reply", "Reply", "ok", "OK"]))
        #expect(args[7] == .int32(-1), "a banner: the server's own timeout")
        let hints = args.notifyHints
        #expect(hints["urgency"] == .byte(1))
        #expect(hints["category"] == .string("x-tidings.chat"))
        #expect(hints["desktop-entry"] == .string(Self.bundle))
        #expect(hints["sound-name"] == .string("message-new-instant"))
        #expect(hints["x-kde-reply-placeholder-text"] == .string("Message…"))
        let imagePath = hints["image-path"]?.stringValue ?? ""
        #expect(imagePath.hasPrefix("file:///") && imagePath.hasSuffix(".png"), "\(imagePath)")
        #expect(!imagePath.contains(setup.bus.directory.path), "the image from the app's store, not the app's own file")
        let id = try await Self.serverID(setup.presenter, Self.bundle, "m1")

        try await setup.mock.emit("ActionInvoked", "us", [.uint32(id), .string("ok")])
        #expect(await setup.delegate.has("m1 ok"), "\(setup.delegate.responses.withLock { $0 })")
        #expect(await eventually { (await setup.center.deliveredNotifications()).isEmpty }, "answered: it leaves the delivered list")
        await setup.stop()
    }

    @Test("NotificationReplied brings the text; NotificationClosed reason 2 is the dismiss action and leaves the list; reason 1 keeps it")
    func replyAndClose() async throws {
        guard let setup = try await Self.start() else { return }
        try await Self.add(setup.center, "r", title: "reply to me")
        try await Self.add(setup.center, "d", title: "dismiss me")
        try await Self.add(setup.center, "e", title: "expire me")
        _ = try await setup.mock.notify(3)
        var ids: [UInt32] = []
        for identifier in ["r", "d", "e"] { ids.append(try await Self.serverID(setup.presenter, Self.bundle, identifier)) }
        try await setup.mock.emit("NotificationReplied", "us", [.uint32(ids[0]), .string("hello there")])
        #expect(await setup.delegate.has("r reply text=hello there"))
        try await setup.mock.emit("NotificationClosed", "uu", [.uint32(ids[1]), .uint32(2)])
        #expect(await setup.delegate.has("d com.apple.UNNotificationDismissActionIdentifier"))
        try await setup.mock.emit("NotificationClosed", "uu", [.uint32(ids[2]), .uint32(1)])
        #expect(await eventually { setup.presenter.serverID(bundle: Self.bundle, identifier: "e") == nil })
        let delivered = await setup.center.deliveredNotifications().map(\.request.identifier)
        #expect(delivered == ["e"], "an expired bubble stays in the list; the dismissed and the answered leave it")
        #expect(setup.delegate.responses.withLock { $0.count } == 2)
        await setup.stop()
    }

    @Test("a signal from another client on the bus is not the server's: ignored")
    func forgedSignal() async throws {
        guard let setup = try await Self.start() else { return }
        try await Self.add(setup.center, "f", title: "forge")
        _ = try await setup.mock.notify(1)
        let id = try await Self.serverID(setup.presenter, Self.bundle, "f")
        let intruder = try await setup.bus.connect()
        try await intruder.send(.signal(path: "/org/freedesktop/Notifications", interface: "org.freedesktop.Notifications", member: "ActionInvoked",
                                        body: [.uint32(id), .string("ok")]))
        // The real one after it: when it has arrived, the forged one was seen first.
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(id), .string("default")])
        #expect(await setup.delegate.has("f com.apple.UNNotificationDefaultActionIdentifier"))
        #expect(setup.delegate.responses.withLock { $0 } == ["f com.apple.UNNotificationDefaultActionIdentifier"])
        await intruder.close()
        await setup.stop()
    }

    @Test("an update by identifier replaces in place (same id), also after a restart; removing closes the bubble")
    func replaceAndRemove() async throws {
        let stateFile = "/tmp/tdb-state-\(UUID().uuidString.prefix(8)).json"
        defer { try? FileManager.default.removeItem(atPath: stateFile) }
        guard let setup = try await Self.start(stateFile: stateFile) else { return }
        try await Self.add(setup.center, "u", title: "first")
        let first = try #require(try await setup.mock.notify(1))
        let id = try await Self.serverID(setup.presenter, Self.bundle, "u")
        #expect(first[1] == .uint32(0))
        try await Self.add(setup.center, "u", title: "second")
        let second = try #require(try await setup.mock.notify(2))
        #expect(second[1] == .uint32(id), "replaces_id is the first bubble's id")
        #expect(second[3] == .string("second"))

        // A new presenter on the same file (a daemon restart) knows the id.
        // (Saved off the path to the server, so it may take a moment.)
        let environment = setup.bus.environment
        #expect(await eventually {
            DesktopPresenter(configuration: DesktopPresenterConfiguration(environment: environment, stateFile: stateFile), logger: Logger(label: "t"))
                .serverID(bundle: Self.bundle, identifier: "u") == id
        })

        setup.center.removeDeliveredNotifications(withIdentifiers: ["u"])
        #expect(await eventually { ((try? await setup.mock.calls("CloseNotification")) ?? []).count == 1 })
        let closed = try await setup.mock.calls("CloseNotification").first?.first
        // The template declares CloseNotification(i), so it records the id as a number of its own kind.
        #expect(closed == .uint32(id) || closed == .int32(Int32(id)) || closed == .int64(Int64(id)), "\(String(describing: closed))")
        #expect(setup.presenter.serverID(bundle: Self.bundle, identifier: "u") == nil)
        await setup.stop()
    }

    @Test("the server goes away and comes back: off meanwhile, capabilities read again, shown again")
    func serverAwayAndBack() async throws {
        guard let setup = try await Self.start(capabilities: "body actions") else { return }
        #expect(setup.presenter.capabilities == ["body", "actions"])
        await setup.mock.stop()
        #expect(await eventually { !setup.presenter.isOn })
        try await Self.add(setup.center, "while-away", title: "nobody shows this")
        #expect(await eventually { (await setup.center.deliveredNotifications()).count == 1 }, "the engine goes on")
        guard let second = try await NotificationMock.start(on: setup.bus, capabilities: "body body-markup actions") else { await setup.stop(); return }
        #expect(await eventually { setup.presenter.isOn && setup.presenter.capabilities.contains("body-markup") })
        try await Self.add(setup.center, "back", title: "<again>")
        let args = try #require(try await second.notify(1))
        #expect(args[3] == .string("&lt;again&gt;"), "the new server's capabilities count")
        await second.stop()
        await setup.stop()
    }

    @Test("ActivationToken before ActionInvoked: the app launched for the response gets it (XDG_ACTIVATION_TOKEN); a token for another id is not used")
    func activationToken() async throws {
        guard let setup = try await Self.start() else { return }
        // An app that is not running when the person acts: its response launches it.
        let bundle = "com.example.launched"
        let transport = try await setup.system.connect(bundle, state: .background)
        _ = try await transport.call(.requestAuthorization([.alert]))
        _ = try await transport.call(.setCategories([CategoryValue(identifier: "chat", actions: [ActionValue(identifier: "ok", title: "OK")])]))
        for identifier in ["t", "u"] {
            var content = NotificationContentValue()
            content.title = identifier
            content.categoryIdentifier = "chat"
            _ = try await transport.call(.add(NotificationRequestValue(identifier: identifier, content: content, trigger: nil)))
        }
        #expect(await eventually { setup.presenter.serverID(bundle: bundle, identifier: "u") != nil })
        await transport.disconnect()
        let t = try await Self.serverID(setup.presenter, bundle, "t")
        let u = try await Self.serverID(setup.presenter, bundle, "u")

        // A token for u, then an action on t: not t's token.
        try await setup.mock.emit("ActivationToken", "us", [.uint32(u), .string("token-of-u")])
        try await setup.mock.emit("ActivationToken", "us", [.uint32(t), .string("token-of-t")])
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(t), .string("ok")])
        #expect(await eventually { !setup.system.launcher.activationTokens.isEmpty })
        #expect(setup.system.launcher.launches.map(\.bundleIdentifier) == [bundle])
        #expect(setup.system.launcher.activationTokens == ["token-of-t"])
        await setup.stop()
    }

    /// An opener that records its argument and `XDG_ACTIVATION_TOKEN` (one line each) and its
    /// process id, then runs on for `hold` seconds (0: exits).
    static func recordingOpener(in directory: URL, hold: Int = 0) throws -> (path: String, log: String) {
        let path = directory.appendingPathComponent("opener").path
        let log = directory.appendingPathComponent("opener.log").path
        try """
            #!/bin/sh
            printf '%s\\n%s\\n' "$1" "${XDG_ACTIVATION_TOKEN-none}" >> '\(log)'
            \(hold > 0 ? "exec /bin/sleep \(hold)" : "")
            """.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return (path, log)
    }

    @Test("no inline-reply, a web center: the text-input action is an action of its own title; invoking it opens the center's reply field (no key, parts percent-encoded) with the activation token; without a center the old label, nothing opened")
    func webCenterReply() async throws {
        var opener = ("", "")
        guard let setup = try await Self.start(capabilities: "body actions", configure: { configuration, directory in
            opener = try Self.recordingOpener(in: directory)
            configuration.opener = opener.0
            configuration.environment["XDG_ACTIVATION_TOKEN"] = "the-daemon's-own"
        }) else { return }
        let log = opener.1
        @Sendable func logged() -> [String] { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }
        // The address as the web center gives it, key and all: the presenter keeps none of it but the page's place.
        setup.presenter.setWebCenter(URL(string: "http://127.0.0.1:8731/?key=0123abcd#x")!)
        let identifier = "a/b \"<c>\" ü&#reply=x"
        try await Self.add(setup.center, identifier, title: "answer on the web")
        let args = try #require(try await setup.mock.notify(1))
        #expect(args[5] == .strings(["default", "Open", "reply", "Reply", "ok", "OK"]), "the action with its own title, no inline reply")
        #expect(args.notifyHints["x-kde-reply-placeholder-text"] == nil)
        let id = try await Self.serverID(setup.presenter, Self.bundle, identifier)
        try await setup.mock.emit("ActivationToken", "us", [.uint32(id), .string("token-1")])
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(id), .string("reply")])
        #expect(await eventually { logged().count == 2 }, "\(logged())")
        #expect(logged() == ["http://127.0.0.1:8731/#reply=com.example.desktop/a%2Fb%20%22%3Cc%3E%22%20%C3%BC%26%23reply%3Dx/reply", "token-1"])
        #expect(!logged().joined().contains("0123abcd"), "the key is never in what the presenter opens")
        #expect(await eventually { setup.presenter.openersRunning == 0 })
        // No token from the server: the daemon's own is not passed on.
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(id), .string("reply")])
        #expect(await eventually { logged().count == 4 }, "\(logged())")
        #expect(logged().last == "none")
        #expect(setup.delegate.responses.withLock { $0 }.isEmpty, "opening the field is no response yet")
        #expect(await setup.center.deliveredNotifications().count == 1)

        // No web center: the action says where to answer and opens nothing.
        setup.presenter.setWebCenter(nil)
        try await Self.add(setup.center, "plain", title: "no center")
        let plain = try #require(try await setup.mock.notify(2))
        #expect(plain[5] == .strings(["default", "Open", "reply", "Reply (reply with tidings notifications respond)", "ok", "OK"]))
        let plainID = try await Self.serverID(setup.presenter, Self.bundle, "plain")
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(plainID), .string("reply")])
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(plainID), .string("ok")])
        #expect(await setup.delegate.has("plain ok"))
        #expect(logged().count == 4, "nothing opened without a web center")
        await setup.stop()
    }

    @Test("openers: at most maximumOpeners at once (one more is dropped); one still running after openerTimeout is stopped and frees its place")
    func openerLimits() async throws {
        var opener = ("", "")
        guard let setup = try await Self.start(capabilities: "body actions", configure: { configuration, directory in
            opener = try Self.recordingOpener(in: directory, hold: 30)
            configuration.opener = opener.0
            configuration.maximumOpeners = 1
            // Long enough that the second signal surely comes while the first opener runs (at
            // 300 ms a loaded machine let the timeout free the place first, and both opened).
            configuration.openerTimeout = .seconds(2)
        }) else { return }
        let log = opener.1
        @Sendable func opened() -> Int { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").count / 2 }
        setup.presenter.setWebCenter(URL(string: "http://127.0.0.1:8731/")!)
        try await Self.add(setup.center, "o", title: "open me")
        _ = try #require(try await setup.mock.notify(1))
        let id = try await Self.serverID(setup.presenter, Self.bundle, "o")
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(id), .string("reply")])
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(id), .string("reply")])
        #expect(await eventually { opened() == 1 })
        #expect(setup.presenter.openersRunning == 1, "at the limit: one opener runs")
        // The second was past the limit: after a later signal is handled, still one opened.
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(id), .string("default")])
        #expect(await setup.delegate.has("o com.apple.UNNotificationDefaultActionIdentifier"))
        #expect(opened() == 1, "one past the limit: not opened")
        // The hanging opener is stopped after its timeout; the place is free again.
        #expect(await eventually(within: 10) { setup.presenter.openersRunning == 0 })
        try await Self.add(setup.center, "o2", title: "open me too")
        _ = try #require(try await setup.mock.notify(2))
        let id2 = try await Self.serverID(setup.presenter, Self.bundle, "o2")
        try await setup.mock.emit("ActionInvoked", "us", [.uint32(id2), .string("reply")])
        #expect(await eventually { opened() == 2 })
        #expect(await eventually(within: 10) { setup.presenter.openersRunning == 0 })
        await setup.stop()
    }

    @Test("ProcessLauncher: XDG_ACTIVATION_TOKEN is the launch's token; the daemon's own is never passed on")
    func activationTokenEnvironment() throws {
        let launcher = ProcessLauncher(socketPath: "/tmp/s", logger: Logger(label: "t"))
        let app = AppRecord(bundleIdentifier: "com.example.x", displayName: "X", executable: "/usr/bin/true", directory: "/tmp", installedAt: Date(timeIntervalSince1970: 0))
        let inherited = ["XDG_ACTIVATION_TOKEN": "stale", "HOME": "/h"]
        #expect(launcher.environment(for: app, state: .active, reason: .response, activationToken: "fresh", inheriting: inherited)["XDG_ACTIVATION_TOKEN"] == "fresh")
        let without = launcher.environment(for: app, state: .active, reason: .response, inheriting: inherited)
        #expect(without["XDG_ACTIVATION_TOKEN"] == nil)
        #expect(without["HOME"] == "/h")
    }

    @Test("the alert style and the app's folder (a named sound's file) come with the notification: no engine attached, none asked")
    func carriedSettingsAndFolder() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        guard let mock = try await NotificationMock.start(on: bus) else { return }
        let folder = bus.directory.appendingPathComponent("app")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("Sounds"), withIntermediateDirectories: true)
        try Data([0]).write(to: folder.appendingPathComponent("Sounds/chime.oga"))
        let presenter = DesktopPresenter(configuration: DesktopPresenterConfiguration(environment: bus.environment), logger: Logger(label: "t"))
        let runner = Task { await presenter.run() }
        #expect(await eventually { presenter.isOn })
        var presented = DesktopLimitsTests.presented("carried")
        presented.notification.request.content.sound = SoundValue(kind: .named, name: "chime.oga")
        presented.presentation.sound = true
        presented.settings = NotificationSettingsValue()
        presented.settings?.alertStyle = .alert
        presented.appDirectory = folder.path
        await presenter.present(presented)
        guard let args = try await mock.notify(1) else { Issue.record("no Notify"); runner.cancel(); await runner.value; await mock.stop(); return }
        #expect(args[7] == .int32(0), "alert style alerts: stays until the person acts")
        #expect(args.notifyHints["sound-file"] == .string(folder.appendingPathComponent("Sounds/chime.oga").path))
        runner.cancel()
        await runner.value
        await mock.stop()
    }

    @Test("no session bus: the presenter is off, says so, and the engine presents on")
    func noBus() async throws {
        let presenter = DesktopPresenter(configuration: DesktopPresenterConfiguration(environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"]), logger: Logger(label: "t"))
        let system = try await NotificationTestSystem.start(presenters: [presenter])
        presenter.attach(system.engine)
        let runner = Task { await presenter.run() }
        let center = try await system.center(for: Self.bundle, state: .background)
        _ = try await center.requestAuthorization(options: [.alert])
        let content = UNMutableNotificationContent()
        content.title = "still shown elsewhere"
        try await center.add(UNNotificationRequest(identifier: "n", content: content, trigger: nil))
        #expect(await eventually { system.presenter.events.contains { if case .presented = $0 { true } else { false } } })
        #expect(!presenter.isOn)
        runner.cancel()
        await runner.value
        await system.shutdown()
    }
}

@Suite("Desktop markup")
struct DesktopMarkupTests {
    @Test("escape everything; keep only b, i, u and, with hyperlinks, http(s) links")
    func sanitize() {
        #expect(DesktopMarkup.sanitize("<b>x</b> <img src=\"a\"/> <a href=\"https://e.org/a\">l</a>", hyperlinks: false)
                == "<b>x</b> &lt;img src=&quot;a&quot;/&gt; &lt;a href=&quot;https://e.org/a&quot;&gt;l&lt;/a&gt;")
        #expect(DesktopMarkup.sanitize("<a href=\"https://e.org/a\">l</a> <a href=\"javascript:x\">j</a>", hyperlinks: true)
                == "<a href=\"https://e.org/a\">l</a> &lt;a href=&quot;javascript:x&quot;&gt;j</a>")
        #expect(DesktopMarkup.sanitize("a < b > c <", hyperlinks: true) == "a &lt; b &gt; c &lt;")
    }
}
