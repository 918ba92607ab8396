import ArgumentParser
import Foundation
import Logging
import TidingsCore
import TidingsDaemon

/// `--data-dir` where it means this machine's data directory (the daemon's commands,
/// `gateway`, `serve`): declared once, so every command's help says the same.
struct DataDirectoryOption: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "The data directory (default: $TIDINGS_DATA_DIR, $XDG_DATA_HOME/tidings or ~/.local/share/tidings).")
    var path: String?

    var resolved: String { path ?? TidingsPaths.defaultDataDirectory() }
}

/// `--log-level` of the long-running commands (`gateway`, `serve`, `daemon`): declared once, so
/// their help and their answer to a bad value are the same; each command keeps its default.
struct LogLevelOption: ParsableArguments {
    @Option(name: .customLong("log-level"), help: "How much to log: trace, debug, info, notice, warning, error or critical (default: notice for gateway, info for serve and daemon).")
    var level: Logger.Level?

    func level(default fallback: Logger.Level) -> Logger.Level { level ?? fallback }
}

/// Where the daemon's files and socket are.
struct LocationOptions: ParsableArguments {
    @OptionGroup var data: DataDirectoryOption

    var dataDirectory: String? { data.path }

    @Option(name: .customLong("socket"), help: "The daemon's app socket (default: $TIDINGS_SOCKET or daemon.sock in the data directory).")
    var socket: String?

    var resolvedDataDirectory: String { data.resolved }

    var resolvedSocket: String {
        if let socket { return socket }
        if let dataDirectory { return TidingsPaths.socketPath(dataDirectory: dataDirectory) }
        return TidingsPaths.defaultSocketPath()
    }

    func admin() async throws -> AdminClient {
        do {
            return try await AdminClient.connect(socketPath: resolvedSocket)
        } catch {
            throw CLIError(error.message)
        }
    }
}

/// A failure the CLI reports as one sentence, exiting non-zero.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension AdminClient {
    func run(_ request: AdminRequest) async throws -> AdminReply {
        do {
            return try await send(request)
        } catch {
            throw CLIError(error.message)
        }
    }
}

extension DaemonConfiguration.Consent: ExpressibleByArgument {}
