import Foundation
import Logging
import Testing
import TidingsCore
import TidingsDaemon

@Suite("ProcessLauncher's environment")
struct ProcessLauncherTests {
    /// The launched app learns why it was launched: `UIApplication.launch(with:)` waits
    /// for a response only when the reason is `response`, never for a silent push.
    @Test func theEnvironmentCarriesTheLaunchStateAndReason() {
        let launcher = ProcessLauncher(socketPath: "/run/tidings.sock", logger: Logger(label: "test"))
        let app = AppRecord(bundleIdentifier: "com.example.app", displayName: "App", executable: "/usr/bin/true",
                            directory: "/tmp", installedAt: Date(timeIntervalSince1970: 0))
        // A reason left in the daemon's own environment does not leak through.
        let inherited = ["PATH": "/usr/bin", "TIDINGS_LAUNCH_REASON": "response"]
        let silent = launcher.environment(for: app, state: .background, reason: .remoteNotification, inheriting: inherited)
        #expect(silent["TIDINGS_LAUNCH_STATE"] == "background" && silent["TIDINGS_LAUNCH_REASON"] == "remote-notification")
        #expect(silent["TIDINGS_SOCKET"] == "/run/tidings.sock" && silent["TIDINGS_BUNDLE_ID"] == "com.example.app" && silent["PATH"] == "/usr/bin")
        let response = launcher.environment(for: app, state: .active, reason: .response, inheriting: [:])
        #expect(response["TIDINGS_LAUNCH_STATE"] == "active" && response["TIDINGS_LAUNCH_REASON"] == "response")
    }
}
