import Foundation
import Logging
import ServiceLifecycle
import TidingsCore
import TidingsEngine
import TidingsIPC
import TidingsSQLite
import TidingsStorage

public struct DaemonConfiguration: Sendable {
    public enum Consent: String, Sendable, CaseIterable {
        /// Ask on the daemon's terminal.
        case prompt
        /// Allow every app that asks (headless use, tests).
        case grant
        /// Deny every app that asks.
        case deny
        /// Ask in the web center's page (`consentProvider`; docs/web-center.md).
        case web
    }

    public var dataDirectory: String
    /// The app socket; defaults to `daemon.sock` in the data directory.
    public var socketPath: String?
    public var consent: Consent
    /// Who answers for `.web` (the web center); nil there denies, as no one could answer.
    public var consentProvider: (any ConsentProvider)?
    /// Let `TIDINGS_BUNDLE_ID` name the app without checking the process's executable.
    public var developmentMode: Bool
    /// iOS's 64 pending requests per app, instead of no limit.
    public var iOSPendingLimit: Bool
    /// Delivered notifications kept per app (`EngineConfiguration.deliveredLimit`).
    public var deliveredLimit = EngineConfiguration.defaultDeliveredLimit
    public var terminalPresenter: Bool
    /// A gpsd server to follow for location triggers (`host:port`); nil: positions come
    /// only from `tidings location`.
    public var gpsd: String?
    public var clock: any WallClock
    public var presenters: [any Presenter]
    public var logger: Logger
    /// The push gateway to connect to (device channel); nil: no remote notifications.
    public var gateway: GatewayLinkConfiguration?
    /// Silent-push budget and languages for remote notifications.
    public var remote = RemoteConfiguration()
    /// How apps' notification service extensions run (deadline, grace, memory limit,
    /// reuse); nil: the defaults, with containers in `<data dir>/extensions`.
    public var serviceExtensions: ServiceExtensionConfiguration?
    /// How content extensions run (deadline, limits); nil: the defaults, with containers in
    /// `<data dir>/extensions`.
    public var contentExtensions: ContentExtensionConfiguration?
    /// Frame size, hello timeout and connection cap of the app socket (docs/security.md).
    public var appSocket = AppSocketLimits()
    /// Desktop notifications over D-Bus (docs/desktop.md); nil: none.
    public var desktop: DesktopPresenterConfiguration?

    public init(dataDirectory: String, socketPath: String? = nil, consent: Consent = .prompt, developmentMode: Bool = false, iOSPendingLimit: Bool = false, terminalPresenter: Bool = true, clock: any WallClock = SystemWallClock(), presenters: [any Presenter] = [], logger: Logger = Logger(label: "tidings.daemon")) {
        self.dataDirectory = dataDirectory
        self.socketPath = socketPath
        self.consent = consent
        self.developmentMode = developmentMode
        self.iOSPendingLimit = iOSPendingLimit
        self.terminalPresenter = terminalPresenter
        self.clock = clock
        self.presenters = presenters
        self.logger = logger
    }

    public var resolvedSocketPath: String { socketPath ?? TidingsPaths.socketPath(dataDirectory: dataDirectory) }
    /// The attachment store (`AttachmentStore.root`) of the engine and the service extensions;
    /// the web center serves attachments from here.
    public var attachmentsDirectory: String { dataDirectory + "/attachments" }
}

/// The device's notification daemon: the engine on SQLite in the data directory, its
/// scheduler, and the app socket. Runs as a `Service` until graceful shutdown.
public final class NotificationDaemon: Service {
    public let engine: NotificationEngine
    public let configuration: DaemonConfiguration
    private let server: AppSocketServer
    /// The connection to the push gateway, when one is configured.
    public let gatewayLink: GatewayLink?
    /// Runs service extensions for the engine's remote pipeline.
    public let serviceExtensionRunner: ServiceExtensionRunner?
    /// Runs content extensions for a notification center (docs/content-extensions.md).
    public let contentExtensionHost: ContentExtensionHost?
    /// Shows notifications on the desktop, when configured.
    public let desktopPresenter: DesktopPresenter?

    init(engine: NotificationEngine, server: AppSocketServer, configuration: DaemonConfiguration, gatewayLink: GatewayLink? = nil, serviceExtensionRunner: ServiceExtensionRunner? = nil, contentExtensionHost: ContentExtensionHost? = nil, desktopPresenter: DesktopPresenter? = nil) {
        self.engine = engine
        self.desktopPresenter = desktopPresenter
        self.server = server
        self.configuration = configuration
        self.gatewayLink = gatewayLink
        self.serviceExtensionRunner = serviceExtensionRunner
        self.contentExtensionHost = contentExtensionHost
    }

    public var socketPath: String { server.path }
    /// Connections open on the app socket now.
    public var appConnectionCount: Int { server.connectionCount }

    public func run() async throws {
        let handler = AppConnectionHandler(engine: engine, developmentMode: configuration.developmentMode, logger: configuration.logger)
        let gpsd = configuration.gpsd.map { address in
            let parts = address.split(separator: ":", maxSplits: 1)
            return GPSDLocationProvider(host: String(parts[0]), port: parts.count > 1 ? Int(parts[1]) ?? 2947 : 2947,
                                        engine: engine, clock: configuration.clock, logger: configuration.logger)
        }
        try await cancelWhenGracefulShutdown {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { try await self.engine.run() }
                group.addTask { await self.server.run { await handler.serve($0) } }
                if let gpsd { group.addTask { try await gpsd.run() } }
                if let link = self.gatewayLink { group.addTask { await link.run() } }
                if let desktop = self.desktopPresenter { group.addTask { await desktop.run() } }
            }
        }
        await server.close()
        await serviceExtensionRunner?.shutdown()
        await contentExtensionHost?.shutdown()
    }
}

/// Raises this process's soft limit on open descriptors (`RLIMIT_NOFILE`) to its hard
/// limit, and returns the limits then in force (nil if they cannot be read). The daemon's
/// descriptors grow with its connections: each of the 128 app connections may be in an
/// `add` holding up to 102 (the store's folder, one file, and one directory per distinct
/// folder its up to 100 attachments lie in), about 13,000 in all, past the usual soft
/// limit of 1,024 (docs/security.md, "Attachments (daemon)").
@discardableResult
public func raiseOpenFileLimit() -> (soft: UInt64, hard: UInt64)? {
    #if os(Linux)
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    let resource = RLIMIT_NOFILE
    #endif
    var limit = rlimit()
    guard getrlimit(resource, &limit) == 0 else { return nil }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(resource, &raised) == 0 { limit = raised }
    }
    return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
}

/// Opens the data directory (creating it), the SQLite store and the socket.
public func buildDaemon(_ configuration: DaemonConfiguration) async throws -> NotificationDaemon {
    if let limit = raiseOpenFileLimit(), limit.soft < 16_384 {
        configuration.logger.warning("the limit on open files is low for the daemon's connections and attachments (docs/security.md)", metadata: ["RLIMIT_NOFILE": "\(limit.soft)"])
    }
    let fm = FileManager.default
    try fm.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    let store = try SQLiteDeviceStore(path: configuration.dataDirectory + "/device.sqlite")
    let socketPath = configuration.resolvedSocketPath
    let consent: any ConsentProvider = switch configuration.consent {
    case .prompt: TerminalConsent()
    case .grant: FixedConsent.autoGrant
    case .deny: FixedConsent.autoDeny
    case .web: configuration.consentProvider ?? FixedConsent.autoDeny
    }
    var presenters = configuration.presenters
    if configuration.terminalPresenter { presenters.append(TerminalPresenter()) }
    var contentConfiguration = configuration.contentExtensions ?? ContentExtensionConfiguration(containerRoot: configuration.dataDirectory + "/extensions")
    if contentConfiguration.environment["TIDINGS_SOCKET"] == nil { contentConfiguration.environment["TIDINGS_SOCKET"] = socketPath }
    let contentExtensionHost = ContentExtensionHost(configuration: contentConfiguration, clock: configuration.clock, logger: configuration.logger)
    presenters.append(contentExtensionHost)
    let desktop = configuration.desktop.map { desktop in
        var desktop = desktop
        if desktop.stateFile == nil { desktop.stateFile = configuration.dataDirectory + "/desktop-notifications.json" }
        return DesktopPresenter(configuration: desktop, logger: configuration.logger)
    }
    if let desktop { presenters.append(desktop) }
    var extensionConfiguration = configuration.serviceExtensions ?? ServiceExtensionConfiguration(containerRoot: configuration.dataDirectory + "/extensions")
    // No attachment from the data directory (the daemon's files, other apps' stores, the
    // service extensions' containers): the runner allows each extension's own container
    // for the files of its own call only (`AttachmentStore.allowing`).
    let attachments = AttachmentStore(root: URL(fileURLWithPath: configuration.attachmentsDirectory),
                                      protectedDirectories: [configuration.dataDirectory])
    // Extensions may use UNUserNotificationCenter, as on iOS: point them at this daemon.
    if extensionConfiguration.environment["TIDINGS_SOCKET"] == nil { extensionConfiguration.environment["TIDINGS_SOCKET"] = socketPath }
    let serviceExtensionRunner = ServiceExtensionRunner(
        configuration: extensionConfiguration,
        clock: configuration.clock, attachments: attachments, logger: configuration.logger)
    let engine = NotificationEngine(configuration: EngineConfiguration(
        clock: configuration.clock,
        store: store,
        attachments: attachments,
        consent: consent,
        presenters: presenters,
        launcher: ProcessLauncher(socketPath: socketPath, logger: configuration.logger),
        pendingLimit: configuration.iOSPendingLimit ? EngineConfiguration.iOSPendingLimit : nil,
        deliveredLimit: configuration.deliveredLimit,
        serviceExtensions: serviceExtensionRunner,
        logger: configuration.logger))
    let gatewayLink = try configuration.gateway.map {
        try GatewayLink(configuration: $0, dataDirectory: configuration.dataDirectory, engine: engine,
                        clock: configuration.clock, logger: configuration.logger)
    }
    await engine.setRemote(link: gatewayLink, configuration: configuration.remote)
    await contentExtensionHost.attach(engine: engine)
    desktop?.attach(engine)
    let server = try await AppSocketServer.bind(path: socketPath, limits: configuration.appSocket)
    configuration.logger.info("notification daemon listening", metadata: ["socket": "\(socketPath)", "data": "\(configuration.dataDirectory)"])
    return NotificationDaemon(engine: engine, server: server, configuration: configuration, gatewayLink: gatewayLink, serviceExtensionRunner: serviceExtensionRunner,
                              contentExtensionHost: contentExtensionHost, desktopPresenter: desktop)
}
