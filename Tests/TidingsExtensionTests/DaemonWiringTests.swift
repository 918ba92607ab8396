import Foundation
import Logging
import Testing
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsTesting

@Suite("Service extensions in the daemon")
struct DaemonWiringTests {
    @Test("buildDaemon hands the engine a runner with containers in the data directory and the configured limits")
    func daemonRunsExtensions() async throws {
        let h = try ExtensionHarness()
        let data = h.directory.appendingPathComponent("daemon").path
        var configuration = DaemonConfiguration(dataDirectory: data, consent: .grant, terminalPresenter: false, clock: h.clock)
        configuration.logger.logLevel = .warning
        let daemon = try await buildDaemon(configuration)
        let running = Task { try await daemon.run() }

        let runner = try #require(await daemon.engine.configuration.serviceExtensions as? ServiceExtensionRunner)
        #expect(runner === daemon.serviceExtensionRunner)
        #expect(runner.configuration.deadline == 30)
        #expect(runner.configuration.memoryLimit == ServiceExtensionConfiguration.defaultMemoryLimit)
        let outcome = await runner.modify(h.request("attach"), app: h.app, extension: h.record)
        #expect(outcome.failure == nil)
        let stored = try #require(outcome.content.attachments.first)
        #expect(stored.path.hasPrefix(data + "/attachments/\(h.app.bundleIdentifier)/"))
        // The one definition the web center's hub is given (`WebHub(attachmentsRoot:)`).
        #expect(await daemon.engine.configuration.attachments.root.path == configuration.attachmentsDirectory)
        #expect(FileManager.default.fileExists(atPath: data + "/extensions/\(h.record.bundleIdentifier)/Caches"))

        // Content extensions: a host attached to the engine and among its presenters, with
        // containers next to the service extensions'.
        let host = try #require(daemon.contentExtensionHost)
        #expect(host.configuration.containerRoot == data + "/extensions")
        #expect(host.configuration.deadline == ContentExtensionConfiguration.defaultDeadline)
        #expect(await daemon.engine.configuration.presenters.contains { ($0 as? ContentExtensionHost) === host })
        await #expect {
            _ = try await host.open(bundleIdentifier: "com.example.none", notificationIdentifier: "x", attachmentURLs: { _, _ in [] })
        } throws: { error in
            (error as? ContentExtensionError)?.code == .noSuchApp   // not .notRunning: attached to the engine
        }

        let pid = try #require(outcome.processIdentifier)
        running.cancel()
        _ = await running.result
        // Shutting the daemon down ends its warm extension processes.
        #expect(await eventually { !processExists(pid) })
        await h.close()
    }
}
