import Foundation
import Synchronization
import TidingsCore
import TidingsIPC

/// The transport to the notification daemon over its Unix socket (docs/app-ipc.md).
///
/// It connects on first use and identifies the process with a hello; requests made while
/// it connects wait in order. When the daemon goes away, the next request reconnects and
/// the delegate and application state are sent again. An identity the daemon refuses is
/// final: every call then fails with the daemon's explanation.
final class SocketTransport: NotificationServiceTransport {
    private enum Job: Sendable {
        case call(AppRequest, @Sendable (Result<AppReply, any Error>) -> Void)
        case send(AppRequest)
    }

    private enum Phase {
        case idle
        case connecting([Job])
        case connected(AppSocketClient)
        case refused(NotificationError)
    }

    private struct State {
        var phase: Phase = .idle
        /// Requests that describe the process's state, replayed after a reconnect.
        var delegate: AppRequest?
        var appState: AppRequest?
        /// `UIApplication`'s delegate (TidingsApplication), for silent pushes.
        var remoteDelegate: AppRequest?
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

    func events() -> AsyncStream<DaemonEvent> { eventStream }

    func call(_ request: AppRequest) async throws(NotificationError) -> AppReply {
        do {
            return try await withCheckedThrowingContinuation { continuation in
                submit(.call(request) { continuation.resume(with: $0) })
            }
        } catch let error as NotificationError {
            throw error
        } catch {
            throw NotificationError(.daemonUnavailable, "lost the connection to the notification daemon at \(path): \(error)")
        }
    }

    func send(_ request: AppRequest) {
        submit(.send(request))
    }

    func start(_ request: AppRequest, completion: @escaping @Sendable (Result<AppReply, NotificationError>) -> Void) {
        let path = path
        submit(.call(request) { result in
            switch result {
            case .success(let reply): completion(.success(reply))
            case .failure(let error as NotificationError): completion(.failure(error))
            case .failure(let error):
                completion(.failure(NotificationError(.daemonUnavailable, "lost the connection to the notification daemon at \(path): \(error)")))
            }
        })
    }

    private func submit(_ job: Job) {
        enum Action { case connect, fail(NotificationError), none }
        let action: Action = state.withLock { state in
            if case .send(let request) = job { remember(request, in: &state) }
            switch state.phase {
            case .idle:
                state.phase = .connecting([job])
                return .connect
            case .connecting(var jobs):
                jobs.append(job)
                state.phase = .connecting(jobs)
                return .none
            case .connected(let client):
                Self.perform(job, on: client)
                return .none
            case .refused(let error):
                return .fail(error)
            }
        }
        switch action {
        case .connect:
            Task { await self.connect() }
        case .fail(let error):
            if case .call(_, let completion) = job { completion(.failure(error)) }
        case .none:
            break
        }
    }

    private func remember(_ request: AppRequest, in state: inout State) {
        switch request {
        case .setDelegate: state.delegate = request
        case .setState: state.appState = request
        case .setRemoteNotificationDelegate: state.remoteDelegate = request
        default: break
        }
    }

    private func connect() async {
        let outcome: Result<AppSocketClient, NotificationError>
        do {
            let client = try await AppSocketClient.connect(path: path)
            switch try await client.call(.hello(hello)) {
            case .hello:
                outcome = .success(client)
            case .failure(let error):
                client.close()
                outcome = .failure(error)
            default:
                client.close()
                outcome = .failure(NotificationError(.daemonUnavailable, "the daemon at \(path) answered hello with something else"))
            }
        } catch {
            outcome = .failure(NotificationError(.daemonUnavailable,
                "cannot reach the notification daemon at \(path) (\(error)). Start it with `tidings serve` (or `tidings daemon`), or point TIDINGS_SOCKET at its socket."))
        }
        switch outcome {
        case .success(let client):
            client.onClose { [weak self] in self?.lost(client) }
            let events = client.events
            Task { [eventSink] in
                for await event in events { eventSink.yield(event) }
            }
            state.withLock { state in
                guard case .connecting(let jobs) = state.phase else { return }
                // Replay what the process said about itself before the queued jobs (which may repeat it).
                for request in [state.delegate, state.appState, state.remoteDelegate].compactMap({ $0 }) { client.send(request) }
                for job in jobs { Self.perform(job, on: client) }
                state.phase = .connected(client)
            }
        case .failure(let error):
            let jobs: [Job] = state.withLock { state in
                guard case .connecting(let jobs) = state.phase else { return [] }
                // A refused identity is final; an unreachable daemon is tried again next time.
                state.phase = error.code == .daemonUnavailable ? .idle : .refused(error)
                return jobs
            }
            if error.code != .daemonUnavailable {
                FileHandle.standardError.write(Data("UserNotifications: \(error.message)\n".utf8))
            }
            for job in jobs {
                if case .call(_, let completion) = job { completion(.failure(error)) }
            }
        }
    }

    private static func perform(_ job: Job, on client: AppSocketClient) {
        switch job {
        case .call(let request, let completion): client.start(request, completion: completion)
        case .send(let request): client.send(request)
        }
    }

    private func lost(_ client: AppSocketClient) {
        state.withLock { state in
            if case .connected(let current) = state.phase, current === client { state.phase = .idle }
        }
    }
}
