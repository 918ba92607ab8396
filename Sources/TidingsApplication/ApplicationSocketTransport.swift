import Foundation
import Synchronization
import TidingsCore
import TidingsIPC
import UserNotifications

/// `UIApplication`'s own connection to the notification daemon (docs/app-ipc.md): it says
/// hello as the same app as the process's `UNUserNotificationCenter` does (same
/// `TIDINGS_BUNDLE_ID`, `TIDINGS_LAUNCH_STATE`, `TIDINGS_SOCKET`), connects on first use,
/// and after a lost connection reconnects on the next request and says again that it has
/// a delegate.
final class ApplicationSocketTransport: NotificationServiceTransport {
    private struct State {
        var client: AppSocketClient?
        var connecting: Task<AppSocketClient, any Error>?
        var delegate: AppRequest?
    }

    let path: String
    let hello: AppHello
    private let state = Mutex(State())
    private let eventStream: AsyncStream<DaemonEvent>
    private let eventSink: AsyncStream<DaemonEvent>.Continuation

    init(path: String, hello: AppHello) {
        self.path = path
        self.hello = hello
        (eventStream, eventSink) = AsyncStream.makeStream()
    }

    static func makeDefault() -> ApplicationSocketTransport {
        let environment = ProcessInfo.processInfo.environment
        let state = environment["TIDINGS_LAUNCH_STATE"].flatMap(AppState.init(rawValue:)) ?? .active
        return ApplicationSocketTransport(
            path: TidingsPaths.defaultSocketPath(environment: environment),
            hello: AppHello(bundleIdentifier: environment["TIDINGS_BUNDLE_ID"].flatMap { $0.isEmpty ? nil : $0 }, state: state))
    }

    func events() -> AsyncStream<DaemonEvent> { eventStream }

    func call(_ request: AppRequest) async throws(NotificationError) -> AppReply {
        remember(request)
        do {
            let client = try await client()
            return try await client.call(request)
        } catch let error as NotificationError {
            throw error
        } catch {
            throw NotificationError(.daemonUnavailable, "lost the connection to the notification daemon at \(path): \(error)")
        }
    }

    func send(_ request: AppRequest) {
        remember(request)
        Task {
            do { try await client().send(request) } catch {}
        }
    }

    private func remember(_ request: AppRequest) {
        if case .setRemoteNotificationDelegate = request { state.withLock { $0.delegate = request } }
    }

    private func client() async throws -> AppSocketClient {
        enum Next { case ready(AppSocketClient), wait(Task<AppSocketClient, any Error>) }
        let next: Next = state.withLock { state in
            if let client = state.client { return .ready(client) }
            if let connecting = state.connecting { return .wait(connecting) }
            let task = Task { try await self.connect() }
            state.connecting = task
            return .wait(task)
        }
        switch next {
        case .ready(let client): return client
        case .wait(let task): return try await task.value
        }
    }

    private func connect() async throws -> AppSocketClient {
        defer { state.withLock { $0.connecting = nil } }
        let client: AppSocketClient
        do {
            client = try await AppSocketClient.connect(path: path)
        } catch {
            throw NotificationError(.daemonUnavailable,
                "cannot reach the notification daemon at \(path) (\(error)). Start it with `tidings serve`, or point TIDINGS_SOCKET at its socket.")
        }
        switch try await client.call(.hello(hello)) {
        case .hello: break
        case .failure(let error):
            client.close()
            throw error
        default:
            client.close()
            throw NotificationError(.daemonUnavailable, "the daemon at \(path) answered hello with something else")
        }
        client.onClose { [weak self] in self?.state.withLock { if $0.client === client { $0.client = nil } } }
        let events = client.events
        Task { [eventSink] in
            for await event in events { eventSink.yield(event) }
        }
        let delegate = state.withLock { state in
            state.client = client
            return state.delegate
        }
        if let delegate { client.send(delegate) }
        return client
    }
}
