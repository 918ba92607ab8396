import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsGateway

/// Options shared by `serve` and `daemon`.
struct DaemonOptions: ParsableArguments {
    @OptionGroup var location: LocationOptions

    @OptionGroup var web: WebOptions

    @Option(help: "How the person answers authorization requests: web (in the web center's page), prompt (on this terminal), grant or deny. Default: web (prompt with --no-web) when this is a terminal, else deny.")
    var consent: DaemonConfiguration.Consent?

    @Flag(help: "Development mode: an app may name itself with TIDINGS_BUNDLE_ID without being installed from a manifest.")
    var development = false

    @Flag(name: .customLong("ios-pending-limit"), help: "Keep at most 64 pending requests per app, as iOS does (default: no limit).")
    var iOSPendingLimit = false

    @Option(name: .customLong("delivered-limit"), help: "Delivered notifications kept per app; past it the oldest leave the list and the desktop (default: 1000).")
    var deliveredLimit: Int = EngineConfiguration.defaultDeliveredLimit

    @Flag(name: .customLong("quiet"), help: "Do not print notifications on this terminal.")
    var quiet = false

    @Option(help: "Where notifications are shown, comma-separated: terminal, desktop (org.freedesktop.Notifications on the session bus; off by itself when there is none).")
    var presenter: String = "terminal,desktop"

    @Option(help: "Follow a gpsd server (HOST:PORT) for location triggers, e.g. 127.0.0.1:2947.")
    var gpsd: String?

    @OptionGroup var logging: LogLevelOption

    @Option(name: .customLong("background-push-budget"), help: "Silent pushes that may wake one app per hour (Apple: two or three); 0: no limit.")
    var backgroundPushBudget: Int = 3

    func configuration(logger: Logger) throws -> DaemonConfiguration {
        let presenters = presenter.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if let unknown = presenters.first(where: { !["terminal", "desktop"].contains($0) }) {
            throw ValidationError("--presenter takes terminal and desktop, not \(unknown)")
        }
        guard deliveredLimit >= 1 else { throw ValidationError("--delivered-limit takes a number of notifications from 1, not \(deliveredLimit)") }
        let consent = consent ?? (isatty(STDIN_FILENO) == 1 ? (web.enabled ? .web : .prompt) : .deny)
        var configuration = DaemonConfiguration(
            dataDirectory: location.resolvedDataDirectory,
            socketPath: location.socket,
            consent: consent,
            developmentMode: development,
            iOSPendingLimit: iOSPendingLimit,
            terminalPresenter: !quiet && presenters.contains("terminal"),
            logger: logger)
        if presenters.contains("desktop") { configuration.desktop = DesktopPresenterConfiguration() }
        configuration.gpsd = gpsd
        configuration.deliveredLimit = deliveredLimit
        configuration.remote.backgroundBudget = max(0, backgroundPushBudget)
        return configuration
    }

    func makeLogger(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = logging.level(default: .info)
        return logger
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the notification daemon and the push gateway in one process, with SQLite in the data directory; the daemon receives the gateway's pushes.")

    @OptionGroup var options: DaemonOptions

    @OptionGroup var gatewayAddresses: GatewayListenOptions

    func run() async throws {
        let logger = options.makeLogger("tidings")
        var gatewayConfiguration = GatewayConfiguration(dataDirectory: URL(fileURLWithPath: options.location.resolvedDataDirectory))
        try gatewayAddresses.apply(to: &gatewayConfiguration)
        gatewayConfiguration.logger = logger
        let gateway = try buildGateway(gatewayConfiguration)
        let daemon = DaemonOnGateway(gateway: gateway, web: options.web, gatewayConfiguration: gatewayConfiguration, configuration: try options.configuration(logger: logger))
        // One group, one signal handler: on SIGTERM or SIGINT the daemon stops first (it is
        // last in the list), then the gateway sends GOAWAY and drains.
        try await ServiceGroup(services: [gateway, daemon], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger).run()
    }
}

/// The daemon of `serve`: once the gateway listens, it connects to the gateway's device
/// channel like any device, trusting the gateway's certificate from the data directory.
struct DaemonOnGateway: Service {
    let gateway: Gateway
    let web: WebOptions
    let gatewayConfiguration: GatewayConfiguration
    var configuration: DaemonConfiguration

    func run() async throws {
        let addresses = try await gateway.waitUntilReady()
        var host = addresses.device.ipAddress ?? "127.0.0.1"
        if host == "0.0.0.0" { host = "127.0.0.1" } else if host == "::" { host = "::1" }
        var link = GatewayLinkConfiguration(host: host, port: addresses.device.port ?? gatewayConfiguration.devicePort,
                                            trustRootPaths: addresses.certificatePath.map { [$0] } ?? [])
        link.environment = gatewayConfiguration.environment
        var configuration = configuration
        configuration.gateway = link
        let hub = web.prepare(&configuration)
        let daemon = try await buildDaemon(configuration)
        say("tidings: daemon socket \(daemon.socketPath) (consent: \(configuration.consent.rawValue))")
        GatewayCommand.announce(addresses, gatewayConfiguration)
        try await runDaemon(daemon, web: hub.map { try web.center(hub: $0, daemon: daemon, logger: configuration.logger) })
    }
}

struct Daemon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the notification daemon alone: apps connect to its socket; with --gateway it receives pushes from a Tidings gateway.")

    @OptionGroup var options: DaemonOptions

    @Option(help: "The push gateway's device channel (HOST:PORT) to receive remote notifications from; several gateway nodes: HOST:PORT,HOST:PORT,… (tried in turn when one fails).")
    var gateway: String?

    @Option(name: .customLong("gateway-cert"), help: "A certificate (PEM) to trust for the gateway, e.g. <gateway data dir>/tls/gateway-cert.pem; repeatable (one per node with self-signed certificates). Default: the system's roots.")
    var gatewayCert: [String] = []

    @Option(name: .customLong("aps-environment"), help: "The environment apps get device tokens for: development or production.")
    var apsEnvironment: String = "development"

    func run() async throws {
        let logger = options.makeLogger("tidings.daemon")
        var configuration = try options.configuration(logger: logger)
        if let gateway {
            guard var link = GatewayLinkConfiguration(address: gateway, trustRootPaths: gatewayCert) else {
                throw ValidationError("--gateway takes HOST:PORT, like 127.0.0.1:2196, or several separated by commas")
            }
            guard let environment = APNsEnvironment(name: apsEnvironment) else { throw ValidationError("--aps-environment is development or production") }
            link.environment = environment
            configuration.gateway = link
        }
        let hub = options.web.prepare(&configuration)
        let daemon = try await buildDaemon(configuration)
        say("tidings: daemon socket \(daemon.socketPath) (consent: \(configuration.consent.rawValue))" + (gateway.map { "; gateway \($0)" } ?? ""))
        let center = try hub.map { try options.web.center(hub: $0, daemon: daemon, logger: logger) }
        let group = ServiceGroup(services: [daemon] + (center.map { [$0] } ?? []), gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        if let center { Task { await WebOptions.announce(center, desktop: daemon.desktopPresenter) } }
        try await group.run()
    }
}

/// Writes a line to standard output at once (unbuffered), so a supervisor or a test sees it.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
