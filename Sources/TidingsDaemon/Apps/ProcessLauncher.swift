import Foundation
import Logging
import TidingsCore
import TidingsEngine

/// Launches an app's executable from its manifest, pointed at this daemon's socket, so a
/// response can reach an app that is not running.
public struct ProcessLauncher: AppLauncher {
    public let socketPath: String
    public let logger: Logger

    public init(socketPath: String, logger: Logger) {
        self.socketPath = socketPath
        self.logger = logger
    }

    public func launch(_ app: AppRecord, state: AppState, reason: LaunchReason) async throws {
        try await launch(app, state: state, reason: reason, activationToken: nil)
    }

    public func launch(_ app: AppRecord, state: AppState, reason: LaunchReason, activationToken: String?) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: app.executable)
        process.arguments = app.arguments
        process.currentDirectoryURL = URL(fileURLWithPath: app.directory)
        process.environment = environment(for: app, state: state, reason: reason, activationToken: activationToken, inheriting: ProcessInfo.processInfo.environment)
        process.standardInput = FileHandle.nullDevice
        let bundle = app.bundleIdentifier
        let logger = logger
        process.terminationHandler = { process in
            logger.info("app exited", metadata: ["app": "\(bundle)", "status": "\(process.terminationStatus)"])
        }
        try process.run()
        logger.info("launched app", metadata: ["app": "\(bundle)", "pid": "\(process.processIdentifier)", "state": "\(state.rawValue)", "reason": "\(reason.rawValue)"])
    }

    /// The launched process's environment: the daemon's, plus `TIDINGS_SOCKET`,
    /// `TIDINGS_BUNDLE_ID`, `TIDINGS_LAUNCH_STATE` and `TIDINGS_LAUNCH_REASON` (docs/app-ipc.md),
    /// and `XDG_ACTIVATION_TOKEN` when the desktop gave one for this launch (a token is good for
    /// one launch: the daemon's own is never passed on).
    public func environment(for app: AppRecord, state: AppState, reason: LaunchReason, activationToken: String? = nil,
                            inheriting inherited: [String: String]) -> [String: String] {
        var environment = inherited
        environment["XDG_ACTIVATION_TOKEN"] = activationToken
        environment["TIDINGS_SOCKET"] = socketPath
        environment["TIDINGS_BUNDLE_ID"] = app.bundleIdentifier
        environment["TIDINGS_LAUNCH_STATE"] = state.rawValue
        environment["TIDINGS_LAUNCH_REASON"] = reason.rawValue
        return environment
    }
}
