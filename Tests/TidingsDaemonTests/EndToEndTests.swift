import Foundation
import Testing
import TidingsTesting
import TidingsTestSupport

/// Real processes: the `tidings` daemon, the sample app, the CLI as a person uses it.
@Suite("Daemon end to end", .serialized)
struct EndToEndTests {
    @Test("install, schedule, present, answer with an action and a text reply; a response launches a stopped app")
    func quickStart() async throws {
        let fixture = try DaemonFixture()
        defer { fixture.remove() }
        let daemon = try fixture.startDaemon()
        defer { daemon.stopAtEnd() }
        #expect(await daemon.waitForOutput("daemon socket"))

        let install = try await fixture.cli(["apps", "install", fixture.manifest])
        #expect(install.status == 0, "\(install.output)")

        let app = try fixture.runApp()
        defer { app.stopAtEnd() }
        #expect(await app.waitForOutput("waiting for responses"), "\(app.output)")
        #expect(app.output.contains("authorization granted=true"))
        #expect(await app.waitForOutput("willPresent saySomething"), "the foreground app's delegate decides")
        #expect(await daemon.waitForOutput("Say something"), "the terminal presenter shows it")

        let list = try await fixture.cli(["notifications", "list"])
        #expect(list.output.contains("saySomething"))
        #expect(list.output.contains("action.input (text)"))

        let reply = try await fixture.cli(["notifications", "respond", "saySomething", "--action", "action.input", "--text", "hello there"])
        #expect(reply.status == 0, "\(reply.output)")
        #expect(await app.waitForOutput("response saySomething action=action.input text=hello there"), "\(app.output)")

        let wrong = try await fixture.cli(["notifications", "respond", "saySomething", "--action", "action.input"])
        #expect(wrong.status != 0, "answered notifications leave the list")
        #expect(wrong.output.contains("no delivered notification"))

        // The app stops; its next response launches it from the manifest.
        await app.stop()
        let again = try fixture.runApp()
        // Delivered (its delegate said how) before the app goes away.
        #expect(await again.waitForOutput("willPresent saySomething"))
        #expect(await eventually { (try? await fixture.cli(["notifications", "list"]))?.output.contains("saySomething") == true })
        await again.stop()
        let goodbye = try await fixture.cli(["notifications", "respond", "saySomething", "--action", "action.goodbye"])
        #expect(goodbye.status == 0, "\(goodbye.output)")
        #expect(await daemon.waitForOutput("response saySomething action=action.goodbye"), "\(daemon.output)")
        killLaunchedApps(in: daemon.output)
    }

    /// The web center once ran its own SIGTERM handler (Hummingbird's `runService()`), racing
    /// the daemon's service group: about one stop in ten exited 1 ("A service has finished
    /// unexpectedly … WebCenter") — systemd then said the unit failed. Eight stops, each exit 0.
    @Test("SIGTERM stops the daemon with its web center cleanly: exit status 0")
    func sigtermStopsCleanly() async throws {
        for round in 1...8 {
            let fixture = try DaemonFixture()
            defer { fixture.remove() }
            let daemon = try fixture.startDaemon(["--web-port", "0", "--quiet"])
            defer { daemon.stopAtEnd(signal: SIGKILL) }
            #expect(await daemon.waitForOutput("web center http"), "\(daemon.output)")
            await daemon.stop()
            #expect(daemon.process.terminationReason == .exit && daemon.process.terminationStatus == 0,
                    "round \(round): \(daemon.output)")
        }
    }

    @Test("a process that is no installed app gets an error that says how to fix it")
    func unknownProcessRefused() async throws {
        let fixture = try DaemonFixture()
        defer { fixture.remove() }
        let daemon = try fixture.startDaemon()
        defer { daemon.stopAtEnd() }
        #expect(await daemon.waitForOutput("daemon socket"))
        let app = try fixture.runApp()
        defer { app.stopAtEnd() }
        #expect(await eventually { !app.process.isRunning })
        #expect(app.process.terminationStatus == 1)
        #expect(app.output.contains("has no app identity"), "\(app.output)")
        #expect(app.output.contains("tidings apps install"))
    }

    @Test("development mode: TIDINGS_BUNDLE_ID names the app")
    func developmentMode() async throws {
        let fixture = try DaemonFixture()
        defer { fixture.remove() }
        let daemon = try fixture.startDaemon(["--development"])
        defer { daemon.stopAtEnd() }
        #expect(await daemon.waitForOutput("daemon socket"))
        let app = try fixture.runApp(environment: ["TIDINGS_BUNDLE_ID": "com.example.dev"])
        defer { app.stopAtEnd() }
        // On a failure, what became of the daemon (seen once in a full run: its socket gone
        // after it said "daemon socket" — a daemon that stopped, or was stopped, meanwhile).
        func daemonState() -> String { "daemon \(daemon.state): \(daemon.output)" }
        #expect(await app.waitForOutput("waiting for responses"), "\(app.output)\n\(daemonState())")
        let list = try await fixture.cli(["apps", "list"])
        #expect(list.output.contains("com.example.dev"), "\(list.output)\n\(daemonState())")
    }

    @Test("what add acknowledged survives kill -9 of the daemon")
    func killNine() async throws {
        let fixture = try DaemonFixture()
        defer { fixture.remove() }
        let daemon = try fixture.startDaemon()
        #expect(await daemon.waitForOutput("daemon socket"))
        _ = try await fixture.cli(["apps", "install", fixture.manifest])
        let app = try fixture.runApp()
        #expect(await app.waitForOutput("scheduled saySomething now"))
        await daemon.stop(signal: SIGKILL)
        await app.stop()

        let restarted = try fixture.startDaemon()
        defer { restarted.stopAtEnd() }
        #expect(await restarted.waitForOutput("daemon socket"))
        let pending = try await fixture.cli(["notifications", "list", "--pending"]).output
        let delivered = try await fixture.cli(["notifications", "list"]).output
        #expect(delivered.contains("saySomething"), "\(delivered)")
        #expect(pending.contains("myFirstNotification") || delivered.contains("myFirstNotification"), "\(pending)\n\(delivered)")
        let settings = try await fixture.cli(["settings", "com.example.tidings.sample"]).output
        #expect(settings.contains("authorizationStatus        authorized"), "\(settings)")
    }

    @Test("CLI errors are one clear sentence with a non-zero exit")
    func cliErrors() async throws {
        let fixture = try DaemonFixture()
        defer { fixture.remove() }
        let noDaemon = try await fixture.cli(["apps", "list"])
        #expect(noDaemon.status != 0)
        #expect(noDaemon.output.contains("no notification daemon is listening"))

        let daemon = try fixture.startDaemon()
        defer { daemon.stopAtEnd() }
        #expect(await daemon.waitForOutput("daemon socket"))
        let badManifest = fixture.directory.appendingPathComponent("bad.json").path
        try #"{"bundleIdentifier": "nodots", "executable": "/bin/true"}"#.write(toFile: badManifest, atomically: true, encoding: .utf8)
        let bad = try await fixture.cli(["apps", "install", badManifest])
        #expect(bad.status != 0)
        #expect(bad.output.contains("reverse-DNS"))
        let unknown = try await fixture.cli(["settings", "com.example.nothing", "--allow"])
        #expect(unknown.status != 0)
        #expect(unknown.output.contains("no app \"com.example.nothing\" is installed"))
    }

    @Test("tidings settings --grouping: stored with the app's settings and shown; a bad value changes nothing")
    func settingsGrouping() async throws {
        let fixture = try DaemonFixture()
        defer { fixture.remove() }
        let daemon = try fixture.startDaemon()
        defer { daemon.stopAtEnd() }
        #expect(await daemon.waitForOutput("daemon socket"))
        #expect(try await fixture.cli(["apps", "install", fixture.manifest]).status == 0)
        let app = "com.example.tidings.sample"
        let before = try await fixture.cli(["settings", app, "--sounds", "on"])
        #expect(before.status == 0, "\(before.output)")
        #expect(before.output.contains("grouping                   automatic"), "\(before.output)")

        let byApp = try await fixture.cli(["settings", app, "--grouping", "byApp"])
        #expect(byApp.status == 0, "\(byApp.output)")
        #expect(byApp.output.contains("grouping                   byApp"), "\(byApp.output)")

        let bad = try await fixture.cli(["settings", app, "--grouping", "sideways", "--sounds", "off"])
        #expect(bad.status != 0)
        #expect(bad.output.contains("'sideways' is invalid for '--grouping") && bad.output.contains("'automatic', 'byApp' or 'off'"), "\(bad.output)")
        let after = try await fixture.cli(["settings", app]).output
        #expect(after.contains("grouping                   byApp") && after.contains("soundSetting               enabled"), "nothing changed:\n\(after)")

        // The grouping outlives turning notifications off and on; off is a choice of its own.
        _ = try await fixture.cli(["settings", app, "--deny"])
        #expect(try await fixture.cli(["settings", app, "--allow"]).output.contains("grouping                   byApp"))
        #expect(try await fixture.cli(["settings", app, "--grouping", "off"]).output.contains("grouping                   off"))
    }

    /// Stops the app processes the daemon launched (their pids are in its log).
    func killLaunchedApps(in log: String) {
        for line in log.split(separator: "\n") where line.contains("launched app") {
            if let range = line.range(of: "pid=") {
                let digits = line[range.upperBound...].prefix { $0.isNumber }
                if let pid = Int32(digits) { kill(pid, SIGTERM) }
            }
        }
    }
}
