import Dispatch
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization

/// Where the PostgreSQL store connects: parsed from `postgres://user:password@host:port/database?sslmode=…`
/// (`postgresql://` too). `sslmode` is `disable` (the default), `prefer` or `require`.
public struct PostgresStoreURL: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public enum TLSMode: String, Sendable, Hashable { case disable, prefer, require }
    public var tls: TLSMode

    /// Nil, with the reason, for anything that is not such a URL.
    public static func parse(_ text: String) -> Result<PostgresStoreURL, GatewayDatabaseURLError> {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              scheme == "postgres" || scheme == "postgresql" else {
            return .failure(GatewayDatabaseURLError("not a postgres:// URL"))
        }
        guard let host = components.host, !host.isEmpty else { return .failure(GatewayDatabaseURLError("the URL has no host")) }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { return .failure(GatewayDatabaseURLError("the port is out of range")) }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else {
            return .failure(GatewayDatabaseURLError("the URL names no database (postgres://host/DATABASE)"))
        }
        var tls = TLSMode.disable
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let mode = item.value.flatMap(TLSMode.init(rawValue:)) else {
                    return .failure(GatewayDatabaseURLError("sslmode must be disable, prefer or require"))
                }
                tls = mode
            default:
                return .failure(GatewayDatabaseURLError("unknown URL parameter \(item.name)"))
            }
        }
        return .success(PostgresStoreURL(host: host, port: port, username: components.user ?? "postgres",
                                         password: components.password, database: database, tls: tls))
    }

    /// The URL without its password (for logs).
    public var description: String { "postgres://\(username)@\(host):\(port)/\(database)" }
}

/// Why a `--database` value was refused.
public struct GatewayDatabaseURLError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// A few PostgreSQL connections for blocking callers (the gateway's commit thread, its thread
/// pool, the CLI): each call borrows one, runs its queries on it and waits on the futures.
/// Never called on an event loop. A connection that failed is closed and replaced on the next
/// call, so the store recovers by itself once PostgreSQL is back.
final class PostgresConnectionPool: Sendable {
    private struct State {
        var idle: [PostgresConnection] = []
        var nextID = 0
        var closed = false
    }

    private let configuration: PostgresConnection.Configuration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state = Mutex(State())
    /// One permit per connection that may exist.
    private let permits: DispatchSemaphore
    private let acquireTimeout: DispatchTimeInterval
    /// Connections opened over the pool's life (a restart of PostgreSQL shows as new ones).
    let opened = Atomic<Int>(0)

    init(url: PostgresStoreURL, limits: PostgresStoreLimits, group: any EventLoopGroup, logger: Logger) throws {
        let tls: PostgresConnection.Configuration.TLS
        switch url.tls {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(host: url.host, port: url.port, username: url.username,
                                                             password: url.password, database: url.database, tls: tls)
        configuration.options.connectTimeout = .milliseconds(limits.connectTimeout.wholeMilliseconds)
        configuration.options.additionalStartupParameters = [("statement_timeout", "\(limits.statementTimeout.wholeMilliseconds)")]
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.permits = DispatchSemaphore(value: limits.maximumConnections)
        self.acquireTimeout = .milliseconds(Int(limits.acquireTimeout.wholeMilliseconds))
    }

    /// Runs `body` on a connection of its own. A connection whose call failed is closed unless
    /// the failure was the server's answer to a statement (the connection is still good).
    func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        guard permits.wait(timeout: .now() + acquireTimeout) == .success else {
            throw PostgresPoolError.busy
        }
        defer { permits.signal() }
        let connection = try take()
        do {
            let value = try body(connection)
            give(connection)
            return value
        } catch {
            if let psql = error as? PSQLError, psql.code == .server, !connection.isClosed {
                give(connection)
            } else {
                // Waited for: a connection released before its close completed trips
                // PostgresNIO's "deinitialized before being closed" assertion.
                let closing: EventLoopFuture<Void> = connection.close()
                try? closing.wait()
            }
            throw error
        }
    }

    private func take() throws -> PostgresConnection {
        let (reused, id): (PostgresConnection?, Int) = try state.withLock { s in
            if s.closed { throw PostgresPoolError.closed }
            while let c = s.idle.popLast() {
                if !c.isClosed { return (c, 0) }
            }
            s.nextID += 1
            return (nil, s.nextID)
        }
        if let reused { return reused }
        let connection = try PostgresConnection.connect(on: group.next(), configuration: configuration, id: id, logger: logger).wait()
        opened.add(1, ordering: .relaxed)
        return connection
    }

    /// A new connection that is not the pool's (the caller closes it).
    func connectOutside() throws -> PostgresConnection {
        let id = state.withLock { s in s.nextID += 1; return s.nextID }
        let connection = try PostgresConnection.connect(on: group.next(), configuration: configuration, id: id, logger: logger).wait()
        opened.add(1, ordering: .relaxed)
        return connection
    }

    private func give(_ connection: PostgresConnection) {
        let keep = state.withLock { s in
            guard !s.closed, !connection.isClosed else { return false }
            s.idle.append(connection)
            return true
        }
        if !keep { let _: EventLoopFuture<Void> = connection.close() }
    }

    /// Closes every idle connection; later calls fail.
    func close() {
        let idle = state.withLock { s in
            s.closed = true
            defer { s.idle = [] }
            return s.idle
        }
        for c in idle { let closing: EventLoopFuture<Void> = c.close(); try? closing.wait() }
    }
}

enum PostgresPoolError: Error, CustomStringConvertible {
    /// Every connection was busy for the whole acquire timeout.
    case busy
    case closed
    var description: String {
        switch self {
        case .busy: "every PostgreSQL connection stayed busy"
        case .closed: "the PostgreSQL store is closed"
        }
    }
}
