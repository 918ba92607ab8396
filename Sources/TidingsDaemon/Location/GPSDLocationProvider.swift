import Foundation
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
import TidingsCore
import TidingsEngine

/// A position report from a location source.
public struct LocationFix: Sendable, Hashable {
    public var latitude: Double
    public var longitude: Double
    public var time: Date?

    public init(latitude: Double, longitude: Double, time: Date? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.time = time
    }
}

/// gpsd's JSON protocol: `?WATCH={"enable":true,"json":true};` then one JSON object a
/// line; `TPV` objects with a 2D or 3D fix (`mode` ≥ 2) carry `lat` and `lon`.
public enum GPSDProtocol {
    public static let watchCommand = #"?WATCH={"enable":true,"json":true};"# + "\n"

    /// The fix in one line of gpsd output, or nil for other classes and fixes without a position.
    public static func fix(fromLine line: String) -> LocationFix? {
        guard let data = line.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              object["class"] as? String == "TPV",
              let mode = (object["mode"] as? NSNumber)?.intValue, mode >= 2,
              let lat = (object["lat"] as? NSNumber)?.doubleValue,
              let lon = (object["lon"] as? NSNumber)?.doubleValue,
              (-90...90).contains(lat), (-180...180).contains(lon) else { return nil }
        let time = (object["time"] as? String).flatMap { ISO8601DateFormatter.gpsd.date(from: $0) }
        return LocationFix(latitude: lat, longitude: lon, time: time)
    }
}

extension ISO8601DateFormatter {
    fileprivate static var gpsd: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}

/// Follows a gpsd server and hands every fix to the engine's location triggers.
/// Reconnects with backoff (on the injected clock) when gpsd goes away.
public struct GPSDLocationProvider: Service {
    public let host: String
    public let port: Int
    public let engine: NotificationEngine
    public let clock: any WallClock
    public let logger: Logger

    public init(host: String = "127.0.0.1", port: Int = 2947, engine: NotificationEngine, clock: any WallClock = SystemWallClock(), logger: Logger) {
        self.host = host
        self.port = port
        self.engine = engine
        self.clock = clock
        self.logger = logger
    }

    public func run() async throws {
        try await cancelWhenGracefulShutdown {
            var backoff = 0.5
            while !Task.isCancelled {
                do {
                    try await follow()
                    backoff = 0.5
                } catch is CancellationError {
                    return
                } catch {
                    logger.notice("gpsd connection failed; retrying", metadata: ["gpsd": "\(host):\(port)", "error": "\(error)", "retry_in": "\(backoff)"])
                }
                try await clock.sleep(for: backoff)
                backoff = min(backoff * 2, 30)
            }
        }
    }

    func follow() async throws {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineBasedFrameDecoder()))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        logger.info("following gpsd", metadata: ["gpsd": "\(host):\(port)"])
        try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: GPSDProtocol.watchCommand))
            for try await line in inbound {
                if let fix = GPSDProtocol.fix(fromLine: String(buffer: line)) {
                    await engine.locationChanged(latitude: fix.latitude, longitude: fix.longitude)
                }
            }
        }
    }
}
