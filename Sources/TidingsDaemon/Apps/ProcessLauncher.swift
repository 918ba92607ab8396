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

    public func launch(_ app: AppRecord, state: AppState) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: app.executable)
        process.arguments = app.arguments
        process.currentDirectoryURL = URL(fileURLWithPath: app.directory)
        var environment = ProcessInfo.processInfo.environment
        environment["TIDINGS_SOCKET"] = socketPath
        environment["TIDINGS_BUNDLE_ID"] = app.bundleIdentifier
        environment["TIDINGS_LAUNCH_STATE"] = state.rawValue
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        let bundle = app.bundleIdentifier
        let logger = logger
        process.terminationHandler = { process in
            logger.info("app exited", metadata: ["app": "\(bundle)", "status": "\(process.terminationStatus)"])
        }
        try process.run()
        logger.info("launched app", metadata: ["app": "\(bundle)", "pid": "\(process.processIdentifier)", "state": "\(state.rawValue)"])
    }
}
