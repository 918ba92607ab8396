import Foundation
import Testing
import TidingsDBus
import TidingsTesting
import TidingsTestSupport

/// The whole path with real processes: `tidings daemon --presenter desktop`, the sample app,
/// and dunst under Xvfb on a private session bus.
@Suite("Desktop notifications with dunst", .serialized)
struct DunstTests {
    @Test("the sample app's notification is a dunst bubble; dunst's default action reaches the app's delegate; a screenshot of the bubble")
    func sampleAppOnDunst() async throws {
        let tools = ["/usr/bin/Xvfb", "/usr/bin/dunst", "/usr/bin/dunstctl", "/usr/bin/import"]
        guard requireTool(tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }, "Xvfb, dunst, imagemagick (Debian xvfb dunst imagemagick)") else { return }
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        // Xvfb picks a free display itself and writes its number to standard output once it
        // takes connections (`-displayfd 1`). A display chosen here could be one a killed
        // X server left its socket and lock for: the socket file is there, nobody listens.
        let xvfb = try ChildProcess("/usr/bin/Xvfb", ["-displayfd", "1", "-screen", "0", "640x360x24", "-nolisten", "tcp"], directory: bus.directory, name: "xvfb")
        // SIGKILL: it inherits this process's blocked SIGTERM. The lock it leaves names a dead
        // process, which the next Xvfb takes over.
        defer { xvfb.stopAtEnd(signal: SIGKILL) }
        #expect(await eventually { xvfbDisplay(xvfb.output) != nil }, "\(xvfb.state)\n\(xvfb.output)")
        guard let display = xvfbDisplay(xvfb.output) else { return }
        let environment = bus.environment.merging(["DISPLAY": display]) { $1 }
        let dunst = try ChildProcess("/usr/bin/dunst", [], environment: environment, directory: bus.directory, name: "dunst")
        defer { dunst.stopAtEnd(signal: SIGKILL) }
        let watcher = try await bus.connect()
        #expect(await eventually { (try? await watcher.nameOwner("org.freedesktop.Notifications")) != nil }, "\(dunst.output)")

        let data = bus.directory.appendingPathComponent("data").path
        let manifest = bus.directory.appendingPathComponent("manifest.json").path
        try writeSampleAppManifest(to: manifest)
        let daemon = try ChildProcess(BuiltProducts.tidings, ["daemon", "--data-dir", data, "--consent", "grant", "--presenter", "desktop"],
                                      environment: environment, directory: bus.directory, name: "daemon")
        defer { daemon.stopAtEnd() }
        #expect(await daemon.waitForOutput("desktop notifications on"), "\(daemon.output)")
        // Its socket is bound after the presenter is attached, which may say this first.
        #expect(await daemon.waitForOutput("daemon socket"), "\(daemon.output)")
        #expect(daemon.output.contains("body-markup"), "dunst's capabilities were read")
        #expect(try await runTidings(["apps", "install", manifest, "--data-dir", data]).status == 0)
        let app = try ChildProcess(BuiltProducts.sampleApp, [], environment: ["TIDINGS_SOCKET": data + "/daemon.sock"], directory: bus.directory, name: "app")
        defer { app.stopAtEnd() }
        #expect(await app.waitForOutput("scheduled saySomething"), "\(app.output)")
        #expect(await eventually { (try? await runTool("/usr/bin/dunstctl", ["count", "displayed"], environment: environment))?.output.trimmingCharacters(in: .whitespacesAndNewlines) ?? "0" != "0" })

        // A click on the bubble: dunst's default action, the delegate's tap.
        let action = try await runTool("/usr/bin/dunstctl", ["action", "0"], environment: environment)
        #expect(action.status == 0, "\(action.output)")
        #expect(await app.waitForOutput("response saySomething action=tap"), "\(app.output)\n\(daemon.output)")
        let history = try await runTool("/usr/bin/dunstctl", ["history"], environment: environment)
        #expect(history.output.contains("Say something"), "\(history.output)")
        #expect(history.output.contains("Tidings Sample"))

        // The sample app's second notification (seed 000's items) carries an image attachment:
        // its bubble shows the image (the `image-path` hint into the app's store) and its buttons.
        #expect(await app.waitForOutput("scheduled items now"), "\(app.output)")
        #expect(await eventually { (try? await runTool("/usr/bin/dunstctl", ["count", "displayed"], environment: environment))?.output.trimmingCharacters(in: .whitespacesAndNewlines) ?? "0" != "0" })
        // The screenshot in docs/ (docs/images/dunst-bubble.png): TIDINGS_SCREENSHOT names where to write it.
        let shot = ProcessInfo.processInfo.environment["TIDINGS_SCREENSHOT"] ?? bus.directory.appendingPathComponent("dunst.png").path
        try? await Task.sleep(for: .milliseconds(300)) // dunst draws after it answers Notify; a picture, not a condition
        let screenshot = try await runTool("/usr/bin/import", ["-display", display, "-window", "root", shot], environment: environment)
        #expect(screenshot.status == 0, "\(screenshot.output)")
        await watcher.close()
    }

    @Test("processes: the sample app's text-input action is the server's inline reply; NotificationReplied brings the text to the app's delegate")
    func sampleAppInlineReply() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        guard let mock = try await NotificationMock.start(on: bus) else { return }
        let data = bus.directory.appendingPathComponent("data").path
        let manifest = bus.directory.appendingPathComponent("manifest.json").path
        try writeSampleAppManifest(to: manifest)
        let daemon = try ChildProcess(BuiltProducts.tidings, ["daemon", "--data-dir", data, "--consent", "grant", "--presenter", "desktop"],
                                      environment: bus.environment, directory: bus.directory, name: "daemon")
        defer { daemon.stopAtEnd() }
        #expect(await daemon.waitForOutput("desktop notifications on"), "\(daemon.output)")
        // Its socket is bound after the presenter is attached, which may say this first.
        #expect(await daemon.waitForOutput("daemon socket"), "\(daemon.output)")
        #expect(try await runTidings(["apps", "install", manifest, "--data-dir", data]).status == 0)
        let app = try ChildProcess(BuiltProducts.sampleApp, [], environment: ["TIDINGS_SOCKET": data + "/daemon.sock"], directory: bus.directory, name: "app")
        defer { app.stopAtEnd() }
        #expect(await eventually { ((try? await mock.calls("Notify")) ?? []).contains { $0.count == 8 && $0[3] == .string("Say something") } }, "\(daemon.output)")
        let calls = try await mock.calls("Notify")
        let index = try #require(calls.firstIndex { $0[3] == .string("Say something") })
        let args = calls[index]
        #expect(args[0] == .string("Tidings Sample"))
        #expect(args[4] == .string("Reply with text, or pick Goodbye"))
        #expect(args[5] == .strings(["default", "Open", "inline-reply", "Input", "action.goodbye", "Goodbye", "action.cancel", "Cancel"]))
        // The template numbers bubbles 1, 2, … in the order of its Notify calls (none replaced here).
        let id = UInt32(index + 1)
        try await mock.emit("NotificationReplied", "us", [.uint32(id), .string("hello from the desktop")])
        #expect(await app.waitForOutput("response saySomething action=action.input text=hello from the desktop"), "\(app.output)\n\(daemon.output)")
        await mock.stop()
    }

    @Test("processes: a server without inline-reply and the daemon's web center: the sample app's text-input action opens the center's reply field with xdg-open (from PATH), the URL without the key, the activation token passed")
    func sampleAppWebCenterReply() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        guard let mock = try await NotificationMock.start(on: bus, capabilities: "body actions") else { return }
        let data = bus.directory.appendingPathComponent("data").path
        let manifest = bus.directory.appendingPathComponent("manifest.json").path
        try writeSampleAppManifest(to: manifest)
        // The person's xdg-open, first in the daemon's PATH: it records what it was asked to open.
        let bin = bus.directory.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let opened = bus.directory.appendingPathComponent("opened").path
        try "#!/bin/sh\nprintf '%s %s\\n' \"$1\" \"${XDG_ACTIVATION_TOKEN-none}\" >> '\(opened)'\n".write(toFile: bin.path + "/xdg-open", atomically: true, encoding: .utf8)
        chmod(bin.path + "/xdg-open", 0o755)
        let path = bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let daemon = try ChildProcess(BuiltProducts.tidings, ["daemon", "--data-dir", data, "--consent", "grant", "--presenter", "desktop", "--web-port", "0"],
                                      environment: bus.environment.merging(["PATH": path, "XDG_ACTIVATION_TOKEN": "the-daemon's-own"]) { $1 },
                                      directory: bus.directory, name: "daemon")
        defer { daemon.stopAtEnd() }
        #expect(await daemon.waitForOutput("desktop notifications on"), "\(daemon.output)")
        // Its socket is bound after the presenter is attached, which may say this first.
        #expect(await daemon.waitForOutput("daemon socket"), "\(daemon.output)")
        #expect(await daemon.waitForOutput("web center http"), "\(daemon.output)")
        let center = try String(contentsOfFile: data + "/web-address", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let key = try String(contentsOfFile: data + "/web-secret", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await runTidings(["apps", "install", manifest, "--data-dir", data]).status == 0)
        let app = try ChildProcess(BuiltProducts.sampleApp, [], environment: ["TIDINGS_SOCKET": data + "/daemon.sock"], directory: bus.directory, name: "app")
        defer { app.stopAtEnd() }
        #expect(await eventually { ((try? await mock.calls("Notify")) ?? []).contains { $0.count == 8 && $0[3] == .string("Say something") } }, "\(daemon.output)")
        let calls = try await mock.calls("Notify")
        let index = try #require(calls.firstIndex { $0[3] == .string("Say something") })
        #expect(calls[index][5] == .strings(["default", "Open", "action.input", "Input", "action.goodbye", "Goodbye", "action.cancel", "Cancel"]))
        let id = UInt32(index + 1)
        try await mock.emit("ActivationToken", "us", [.uint32(id), .string("desktop-token")])
        try await mock.emit("ActionInvoked", "us", [.uint32(id), .string("action.input")])
        // A whole line: the script's `>>` creates the file before printf writes to it.
        #expect(await eventually { ((try? String(contentsOfFile: opened, encoding: .utf8)) ?? "").hasSuffix("\n") }, "\(daemon.output)")
        let line = (try? String(contentsOfFile: opened, encoding: .utf8)) ?? ""
        #expect(line == "\(center)#reply=com.example.tidings.sample/saySomething/action.input desktop-token\n")
        #expect(!key.isEmpty && !line.contains(key), "the key is not in the opened address")
        await mock.stop()
    }
}

/// The display Xvfb announced with `-displayfd`: its first line that is only a number, as `:N`.
private func xvfbDisplay(_ output: String) -> String? {
    output.split(separator: "\n").first { !$0.isEmpty && $0.allSatisfy(\.isNumber) }.map { ":\($0)" }
}
