import Foundation
import Logging
import TidingsCore
import TidingsEngine
import TidingsIPC

/// Serves one connection on the daemon's socket: the first request says who it is (an
/// app, or the person's CLI); then requests are handed to the engine in order and each
/// reply is sent when its result is durable.
struct AppConnectionHandler {
    let engine: NotificationEngine
    let developmentMode: Bool
    let logger: Logger

    /// The engine's view of the connection.
    final class Link: AppLink {
        let connection: AppServerConnection
        init(_ connection: AppServerConnection) { self.connection = connection }
        func send(_ event: DaemonEvent) { connection.send(event) }
    }

    func serve(_ connection: AppServerConnection) async {
        var requests = connection.requests.makeAsyncIterator()
        guard let first = await requests.next() else { return }
        switch first.request {
        case .hello(let hello):
            let app: AppRecord
            switch await identify(hello, credentials: connection.credentials) {
            case .success(let found): app = found
            case .failure(let error):
                logger.notice("refused a connection", metadata: ["reason": "\(error.message)", "pid": "\(connection.credentials?.pid ?? -1)"])
                connection.reply(first.id, .failure(error))
                return
            }
            let link = Link(connection)
            await engine.connect(link, app: app, state: hello.state)
            connection.reply(first.id, .hello(bundleIdentifier: app.bundleIdentifier, displayName: app.displayName))
            logger.info("app connected", metadata: ["app": "\(app.bundleIdentifier)", "pid": "\(connection.credentials?.pid ?? -1)"])
            await withDiscardingTaskGroup { group in
                while let envelope = await requests.next() {
                    // A binary add's bytes are stored as received (no re-encoding), and its
                    // plain `ok` goes back as a binary frame.
                    let deferred = await engine.handle(envelope.request, from: link, encoded: envelope.encodedRequest)
                    let compact = envelope.encodedRequest != nil
                    if let subscribe = deferred.subscribe {
                        // An add: the reply is written from the commit's completion, no task.
                        let id = envelope.id
                        subscribe { connection.reply(id, $0, compact: compact) }
                    } else {
                        group.addTask { connection.reply(envelope.id, await deferred.run(), compact: compact) }
                    }
                }
            }
            await engine.disconnect(link)
            logger.info("app disconnected", metadata: ["app": "\(app.bundleIdentifier)"])
        case .adminHello:
            guard let credentials = connection.credentials, credentials.uid == getuid() || credentials.uid == 0 else {
                connection.reply(first.id, .failure(NotificationError(.notificationsNotAllowed, "only the daemon's own user may administer it")))
                return
            }
            connection.reply(first.id, .ok)
            while let envelope = await requests.next() {
                guard case .admin(let request) = envelope.request else {
                    connection.reply(envelope.id, .failure(NotificationError(.invalidRequest, "an admin connection takes admin requests only")))
                    continue
                }
                connection.reply(envelope.id, .admin(await engine.handleAdmin(request)))
            }
        default:
            connection.reply(first.id, .failure(NotificationError(.invalidRequest, "the first request on a connection must be hello")))
        }
    }

    /// Which installed app the peer is. Outside development mode the peer's executable must
    /// be the one an app's manifest names; `TIDINGS_BUNDLE_ID` only chooses among those.
    func identify(_ hello: AppHello, credentials: PeerCredentials?) async -> Result<AppRecord, NotificationError> {
        // A claimed bundle identifier names folders (in development mode, a new app's):
        // reverse DNS only, never `..` or a `/`.
        if let claimed = hello.bundleIdentifier {
            do throws(NotificationError) {
                try BundleIdentifier.check(claimed)
            } catch {
                return .failure(error)
            }
        }
        let apps = (try? await engine.installedApps()) ?? []
        // The executable read when the connection was accepted, and only while the peer is
        // still that process running that program: a process that connects and then execs
        // an app (or forks and lets the app's exec inherit the socket) is not the app.
        let executable = developmentMode ? credentials?.executable : credentials?.verifiedExecutable()
        if developmentMode, let claimed = hello.bundleIdentifier {
            if let app = apps.first(where: { $0.bundleIdentifier == claimed }) { return .success(app) }
            // Development mode: an app run straight from the build folder gets a record of its own.
            let record = AppRecord(bundleIdentifier: claimed, displayName: claimed, executable: executable ?? "",
                                   directory: executable.map { ($0 as NSString).deletingLastPathComponent } ?? "", installedAt: Date())
            do {
                try await engine.install(record)
                return .success(record)
            } catch {
                return .failure(NotificationError(.daemonUnavailable, "could not register \(claimed): \(error)"))
            }
        }
        guard let executable else {
            if let pid = credentials?.pid, credentials?.executable != nil {
                return .failure(NotificationError(.notificationsNotAllowed,
                    "process \(pid) is no longer the program that opened this connection (it ran another program or exited since): connect again from the app itself"))
            }
            return .failure(NotificationError(.notificationsNotAllowed, "the daemon cannot see which program is connecting, so it cannot tell which app it is"))
        }
        let matches = apps.filter { $0.executable == executable }
        if let claimed = hello.bundleIdentifier {
            if let app = matches.first(where: { $0.bundleIdentifier == claimed }) { return .success(app) }
            return .failure(NotificationError(.notificationsNotAllowed,
                "\(executable) is not the executable of the installed app \(claimed). Install the app with `tidings apps install <manifest>`, or run the daemon with --development to let TIDINGS_BUNDLE_ID name the app."))
        }
        switch matches.count {
        case 1: return .success(matches[0])
        case 0:
            return .failure(NotificationError(.notificationsNotAllowed,
                "this process (\(executable)) has no app identity: no installed app's manifest names it as its executable. Install the app with `tidings apps install <manifest.json>`, or run the daemon with --development and set TIDINGS_BUNDLE_ID=<bundle id>."))
        default:
            return .failure(NotificationError(.notificationsNotAllowed,
                "\(executable) is the executable of several apps (\(matches.map(\.bundleIdentifier).joined(separator: ", "))): set TIDINGS_BUNDLE_ID to choose one"))
        }
    }
}
