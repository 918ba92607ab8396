import ArgumentParser
import Foundation
import TidingsCore
import TidingsDaemon

/// Where the daemon's files and socket are.
struct LocationOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "The data directory (default: $TIDINGS_DATA_DIR, $XDG_DATA_HOME/tidings or ~/.local/share/tidings).")
    var dataDirectory: String?

    @Option(name: .customLong("socket"), help: "The daemon's app socket (default: $TIDINGS_SOCKET or daemon.sock in the data directory).")
    var socket: String?

    var resolvedDataDirectory: String {
        dataDirectory ?? TidingsPaths.defaultDataDirectory()
    }

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
