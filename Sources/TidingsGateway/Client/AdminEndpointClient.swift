import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// One GET to a gateway's admin endpoint (HTTP/1.1, `connection: close`), with the bearer
/// token when one is given: what `tidings status --admin` uses.
public enum AdminEndpointClient {
    public struct Response: Sendable {
        public var status: Int
        public var body: [UInt8]
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The endpoint's token from a token file (`GatewayConfiguration.adminTokenPath`).
    public static func token(fromFile path: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        } catch {
            throw Failure(description: "cannot read the admin token file \(path): \(error.localizedDescription)")
        }
    }

    public static func get(host: String, port: Int, path: String, token: String?, timeout: Duration = .seconds(30)) async throws -> Response {
        try await withThrowingTaskGroup(of: Response.self) { tasks in
            tasks.addTask { try await exchange(host: host, port: port, path: path, token: token) }
            tasks.addTask {
                try await Task.sleep(for: timeout)
                throw Failure(description: "the admin endpoint \(host):\(port) did not answer within \(timeout)")
            }
            defer { tasks.cancelAll() }
            return try await tasks.next()!
        }
    }

    private static func exchange(host: String, port: Int, path: String, token: String?) async throws -> Response {
        let channel: NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        return try NIOAsyncChannel(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw Failure(description: "cannot connect to the admin endpoint \(host):\(port): \(error)")
        }
        return try await channel.executeThenClose { inbound, outbound in
            var headers = HTTPHeaders([("host", host), ("connection", "close")])
            if let token { headers.add(name: "authorization", value: "bearer \(token)") }
            // Head and end in one write: a GET without a body is whole once its head arrives, and
            // the endpoint answers and closes (`connection: close`) at once — an `end` written
            // after that failed with "I/O on closed channel" instead of reading the answer.
            try await outbound.write(contentsOf: [.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)), .end(nil)])
            var status = 0
            var body: [UInt8] = []
            for try await part in inbound {
                switch part {
                case .head(let head): status = Int(head.status.code)
                case .body(var buffer): body += buffer.readBytes(length: buffer.readableBytes) ?? []
                case .end: return Response(status: status, body: body)
                }
            }
            throw Failure(description: "the admin endpoint \(host):\(port) closed the connection without a complete answer")
        }
    }
}
