import Foundation
import TidingsCore
import TidingsIPC

/// The person's connection to a running daemon: what the `tidings` CLI uses.
public struct AdminClient: Sendable {
    let client: AppSocketClient

    public static func connect(socketPath: String) async throws(NotificationError) -> AdminClient {
        let client: AppSocketClient
        do {
            client = try await AppSocketClient.connect(path: socketPath)
        } catch {
            throw NotificationError(.daemonUnavailable, "no notification daemon is listening at \(socketPath); start one with `tidings serve` (or pass --socket)")
        }
        let reply: AppReply
        do {
            reply = try await client.call(.adminHello)
        } catch {
            throw NotificationError(.daemonUnavailable, "the daemon at \(socketPath) closed the connection")
        }
        if case .failure(let error) = reply { throw error }
        return AdminClient(client: client)
    }

    public func send(_ request: AdminRequest) async throws(NotificationError) -> AdminReply {
        let reply: AppReply
        do {
            reply = try await client.call(.admin(request))
        } catch {
            throw NotificationError(.daemonUnavailable, "the daemon closed the connection")
        }
        switch reply {
        case .admin(.failure(let error)), .failure(let error): throw error
        case .admin(let reply): return reply
        default: throw NotificationError(.invalidRequest, "unexpected reply from the daemon")
        }
    }

    public func close() { client.close() }
}
