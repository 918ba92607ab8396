import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import TidingsCore
import TidingsDaemon
import TidingsGateway

/// Options shared by `serve` and `daemon`.
struct DaemonOptions: ParsableArguments {
    @OptionGroup var location: LocationOptions

    @Option(help: "How the person answers authorization requests: prompt (on this terminal), grant or deny. Default: prompt when this is a terminal, else deny.")
    var consent: DaemonConfiguration.Consent?

    @Flag(help: "Development mode: an app may name itself with TIDINGS_BUNDLE_ID without being installed from a manifest.")
    var development = false

    @Flag(name: .customLong("ios-pending-limit"), help: "Keep at most 64 pending requests per app, as iOS does (default: no limit).")
    var iOSPendingLimit = false

    @Flag(name: .customLong("quiet"), help: "Do not print notifications on this terminal.")
    var quiet = false

    @Option(help: "Follow a gpsd server (HOST:PORT) for location triggers, e.g. 127.0.0.1:2947.")
    var gpsd: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    func configuration(logger: Logger) -> DaemonConfiguration {
        let consent = consent ?? (isatty(STDIN_FILENO) == 1 ? .prompt : .deny)
        var configuration = DaemonConfiguration(
            dataDirectory: location.resolvedDataDirectory,
            socketPath: location.socket,
            consent: consent,
            developmentMode: development,
            iOSPendingLimit: iOSPendingLimit,
            terminalPresenter: !quiet,
            logger: logger)
        configuration.gpsd = gpsd
        return configuration
    }

    func makeLogger(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = logLevel
        return logger
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the notification daemon and the push gateway in one process, with SQLite in the data directory.")

    @OptionGroup var options: DaemonOptions

    func run() async throws {
        let logger = options.makeLogger("tidings")
        let daemonConfiguration = options.configuration(logger: logger)
        let daemon = try await buildDaemon(daemonConfiguration)
        var gatewayConfiguration = GatewayConfiguration(dataDirectory: URL(fileURLWithPath: daemonConfiguration.dataDirectory))
        gatewayConfiguration.logger = logger
        let gateway = try buildGateway(gatewayConfiguration)
        say("tidings: daemon socket \(daemon.socketPath) (consent: \(daemonConfiguration.consent.rawValue)); gateway on \(gatewayConfiguration.providerHost):\(gatewayConfiguration.providerPort)")
        let group = ServiceGroup(services: [daemon, gateway], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        try await group.run()
    }
}

struct Daemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the notification daemon alone: apps connect to its socket.")

    @OptionGroup var options: DaemonOptions

    func run() async throws {
        let logger = options.makeLogger("tidings.daemon")
        let configuration = options.configuration(logger: logger)
        let daemon = try await buildDaemon(configuration)
        say("tidings: daemon socket \(daemon.socketPath) (consent: \(configuration.consent.rawValue))")
        let group = ServiceGroup(services: [daemon], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        try await group.run()
    }
}

/// Writes a line to standard output at once (unbuffered), so a supervisor or a test sees it.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
