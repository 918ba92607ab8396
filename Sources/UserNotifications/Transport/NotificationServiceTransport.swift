import Foundation
import TidingsCore

/// What a `UNUserNotificationCenter` talks to: the notification daemon over its Unix
/// socket (the default), or an engine in the same process (tests, `TidingsTesting`).
///
/// A transport carries `AppRequest`s and their `AppReply`s, and hands the daemon's
/// `DaemonEvent`s to one consumer, the center.
public protocol NotificationServiceTransport: Sendable {
    /// Sends one request and waits for its reply. Throws `NotificationError` when the
    /// daemon cannot be reached or refuses the app.
    func call(_ request: AppRequest) async throws(NotificationError) -> AppReply

    /// Sends a request whose reply nobody waits for (Apple's fire-and-forget calls).
    /// Requests are processed in the order they are sent, so a later `call` sees its effect.
    func send(_ request: AppRequest)

    /// The daemon's events, in order. Called once, by the center that owns the transport.
    func events() -> AsyncStream<DaemonEvent>

    /// Sends a request now, in the order of `send` and `start` calls, and hands its reply
    /// to `completion`: what Apple's completion-handler methods need, so that
    /// `add(_:withCompletionHandler:)` followed by `removePendingNotificationRequests`
    /// reaches the daemon in that order.
    func start(_ request: AppRequest, completion: @escaping @Sendable (Result<AppReply, NotificationError>) -> Void)
}

extension NotificationServiceTransport {
    /// For transports without ordering of their own (test doubles): a task per call.
    public func start(_ request: AppRequest, completion: @escaping @Sendable (Result<AppReply, NotificationError>) -> Void) {
        Task {
            do throws(NotificationError) {
                completion(.success(try await call(request)))
            } catch {
                completion(.failure(error))
            }
        }
    }
}
