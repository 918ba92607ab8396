import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsWeb

/// The web notification center's options, shared by `serve` and `daemon`.
struct WebOptions: ParsableArguments {
    @Flag(name: .customLong("no-web"), help: "Do not serve the web notification center.")
    var noWeb = false

    @Option(name: .customLong("web-port"), help: "The web center's port (default \(WebCenterConfiguration.defaultPort), or any free port when that one is taken; 0: any free port).")
    var webPort: Int?

    @Option(name: .customLong("web-host"), help: "The address the web center listens on (default 127.0.0.1: loopback only).")
    var webHost = "127.0.0.1"

    var enabled: Bool { !noWeb }

    func validate() throws {
        if let webPort, !(0...65535).contains(webPort) { throw ValidationError("--web-port is 0…65535") }
    }

    /// Makes the hub that presents and asks in the page, and hands it to the daemon's engine.
    func prepare(_ configuration: inout DaemonConfiguration) -> WebHub? {
        guard enabled else { return nil }
        let hub = WebHub(attachmentsRoot: configuration.attachmentsDirectory, logger: configuration.logger) { line in say("tidings: \(line)") }
        configuration.presenters.append(hub)
        configuration.consentProvider = hub
        return hub
    }

    /// The center over the daemon's engine.
    func center(hub: WebHub, daemon: NotificationDaemon, logger: Logger) throws -> WebCenter {
        let engine = daemon.engine
        var configuration = WebCenterConfiguration(dataDirectory: daemon.configuration.dataDirectory, host: webHost,
                                                   port: webPort ?? WebCenterConfiguration.defaultPort,
                                                   anyPortIfTaken: webPort == nil, logger: logger)
        configuration.logger[metadataKey: "component"] = "web"
        return try WebCenter(configuration: configuration, hub: hub,
                             admin: { await engine.handleAdmin($0) },
                             contentExtensions: daemon.contentExtensionHost.map { DaemonContentExtensions(host: $0) })
    }

    /// Prints the address (with the key, once) when the center listens, and tells the desktop
    /// presenter where the center's reply field is (its address without the key; docs/desktop.md).
    static func announce(_ center: WebCenter, desktop: DesktopPresenter?) async {
        let url = await center.url()
        desktop?.setWebCenter(await center.baseURL())
        say("tidings: web center \(url.absoluteString)")
    }
}

/// Runs the daemon and, beside it, its web center.
func runDaemon(_ daemon: NotificationDaemon, web center: WebCenter?) async throws {
    try await withThrowingDiscardingTaskGroup { group in
        group.addTask { try await daemon.run() }
        if let center {
            group.addTask { try await center.run() }
            group.addTask { await WebOptions.announce(center, desktop: daemon.desktopPresenter) }
        }
    }
}

struct Open: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the running web notification center's address, with the key that lets a browser in.")

    @OptionGroup var location: LocationOptions

    func run() async throws {
        let directory = location.resolvedDataDirectory
        guard let address = try? String(contentsOfFile: WebCenterConfiguration.addressPath(dataDirectory: directory), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines), !address.isEmpty else {
            throw CLIError("no web center has run with the data directory \(directory); start one with `tidings serve`")
        }
        guard let secret = WebSecret.load(dataDirectory: directory) else {
            throw CLIError("cannot read the web center's key in \(WebSecret.path(dataDirectory: directory)) (it is readable by its owner only)")
        }
        print(address + "?key=" + secret.value)
    }
}

/// The daemon's content extension host as the web center's `WebContentExtensions`: the
/// frame's document, policy, sandbox and size come from `ContentExtensionFrame`, so the
/// rules live in one place (docs/content-extensions.md).
final class DaemonContentExtensions: WebContentExtensions {
    let host: ContentExtensionHost

    init(host: ContentExtensionHost) { self.host = host }
    /// Each open view's declaration and the center's origin, for views the events carry.
    let declarations = Mutex<[UInt64: (ContentExtensionDeclaration, String)]>([:])

    func open(app: String, identifier: String, frameOrigin: String,
              attachmentURLs: @escaping @Sendable (UInt64, DeliveredNotificationValue) -> [String]) async throws -> WebExtensionView {
        let session = try await host.open(bundleIdentifier: app, notificationIdentifier: identifier, attachmentURLs: attachmentURLs)
        declarations.withLock { $0[session.id] = (session.declaration, frameOrigin) }
        return Self.view(session.id, session.view, session.declaration, origin: frameOrigin, failure: session.failure)
    }

    func perform(session: UInt64, action: String, text: String?) async throws -> WebExtensionOutcome {
        let outcome = try await host.perform(session: session, actionIdentifier: action, text: text)
        return map(outcome, session: session)
    }

    func media(session: UInt64, play: Bool) async throws -> WebExtensionOutcome {
        map(try await host.media(session: session, play: play), session: session)
    }

    func userEvent(session: UInt64, element: String, value: String) async throws -> WebExtensionOutcome {
        do {
            return map(try await host.userEvent(session: session, element: element, value: value), session: session)
        } catch {
            switch error.code {
            case .tooManyUserEvents: throw WebExtensionEventError.tooMany(error.description)
            case .invalidUserEvent: throw WebExtensionEventError.tooLarge(error.description)
            default: throw WebExtensionEventError.refused(error.description)
            }
        }
    }

    func close(session: UInt64) async {
        await host.close(session: session)
        declarations.withLock { $0[session] = nil }
    }

    func events(session: UInt64) async -> AsyncStream<WebExtensionOutcome> {
        let events = await host.events(session: session)
        return AsyncStream { continuation in
            let task = Task {
                for await event in events {
                    switch event {
                    case .rendered(let view):
                        if let (declaration, origin) = declarations.withLock({ $0[session] }) {
                            continuation.yield(.rendered(Self.view(session, view, declaration, origin: origin, failure: nil)))
                        }
                    case .dismissed: continuation.yield(.dismissed)
                    case .forwarded: continuation.yield(.forwarded)
                    case .failed(let why): continuation.yield(.failed(why))
                    }
                }
                declarations.withLock { $0[session] = nil }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    func map(_ outcome: ContentExtensionOutcome, session: UInt64) -> WebExtensionOutcome {
        switch outcome {
        case .rendered(let open):
            let origin = declarations.withLock { $0[session]?.1 } ?? ""
            return .rendered(Self.view(open.id, open.view, open.declaration, origin: origin, failure: open.failure))
        case .dismissed: return .dismissed
        case .forwarded: return .forwarded
        case .failed(let why): return .failed(why)
        }
    }

    static func view(_ session: UInt64, _ view: ContentExtensionViewValue?, _ declaration: ContentExtensionDeclaration, origin: String, failure: String?) -> WebExtensionView {
        WebExtensionView(
            session: session,
            document: view.map { ContentExtensionFrame.document(view: $0, declaration: declaration, attachmentOrigin: origin) },
            contentSecurityPolicy: ContentExtensionFrame.contentSecurityPolicy(declaration: declaration, attachmentOrigin: origin),
            sandbox: ContentExtensionFrame.sandbox(declaration: declaration),
            heightRatio: ContentExtensionFrame.height(forWidth: 1, view: view, declaration: declaration),
            defaultContentHidden: declaration.defaultContentHidden,
            title: declaration.overridesDefaultTitle ? view?.title : nil,
            actions: view?.actions ?? [], failure: failure, media: view?.media)
    }
}
