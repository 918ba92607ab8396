import Foundation
import NIOCore
import NIOHPACK
import NIOPosix
import Synchronization
import TidingsGateway

/// An h2c client that writes frames as bytes (a stream's HEADERS, DATA, RST_STREAM, anything
/// malformed) and records every frame the gateway sends, with each HEADERS block decoded:
/// for what a well-behaved HTTP/2 stack would not send (resets of closed streams, SETTINGS
/// never acknowledged, floods).
final class RawHTTP2Client: Sendable {
    struct Frame: Sendable {
        var type: UInt8
        var flags: UInt8
        var streamID: UInt32
        var payload: [UInt8]
        /// A HEADERS frame's fields, decoded in order.
        var fields: [(name: String, value: String)] = []

        var endStream: Bool { flags & 0x1 != 0 }
        /// RST_STREAM's and GOAWAY's error code.
        var errorCode: UInt32? {
            switch type {
            case 0x3: return Self.uint32(payload, 0)
            case 0x7: return Self.uint32(payload, 4)
            default: return nil
            }
        }
        var lastStreamID: UInt32? { type == 0x7 ? Self.uint32(payload, 0) & 0x7FFF_FFFF : nil }
        var goAwayDebugData: String? { type == 0x7 ? String(decoding: payload.dropFirst(8), as: UTF8.self) : nil }
        func field(_ name: String) -> String? { fields.first { $0.name == name }?.value }

        static func uint32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
            guard bytes.count >= at + 4 else { return 0 }
            return UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
        }
    }

    struct Received: Sendable {
        var frames: [Frame] = []
        var closed = false

        /// The `:status` answered on each stream.
        var statuses: [UInt32: String] {
            var result: [UInt32: String] = [:]
            for f in frames where f.type == 0x1 { if let s = f.field(":status") { result[f.streamID] = s } }
            return result
        }
        var goAways: [Frame] { frames.filter { $0.type == 0x7 } }
        var resets: [Frame] { frames.filter { $0.type == 0x3 } }
    }

    let channel: any Channel
    private let recorder: Recorder
    private let encoder = Mutex(HPACKEncoder(allocator: ByteBufferAllocator()))

    private init(channel: any Channel, recorder: Recorder) {
        self.channel = channel
        self.recorder = recorder
    }

    /// Connects and sends the connection preface with an empty SETTINGS frame. With
    /// `acknowledgesSettings` false the client never ACKs the gateway's SETTINGS.
    static func connect(port: Int, acknowledgesSettings: Bool = true) async throws -> RawHTTP2Client {
        let recorder = Recorder(acknowledgesSettings: acknowledgesSettings)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(recorder) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return RawHTTP2Client(channel: channel, recorder: recorder)
    }

    var received: Received { recorder.state.withLock { $0 } }

    func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).get()
    }

    func close() async { try? await channel.close().get() }

    /// Polls (real time: the network) until `condition` holds or `timeout` passed.
    @discardableResult
    func wait(timeout: Duration = .seconds(20), until condition: (Received) -> Bool) async -> Received {
        let deadline = ContinuousClock.now + timeout
        while true {
            let r = received
            if condition(r) || ContinuousClock.now >= deadline { return r }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    // MARK: Frames

    static func frame(type: UInt8, flags: UInt8, streamID: UInt32, payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags,
                UInt8(streamID >> 24 & 0x7F), UInt8(streamID >> 16 & 0xFF), UInt8(streamID >> 8 & 0xFF), UInt8(streamID & 0xFF)] + payload
    }

    /// HEADERS (END_HEADERS, and END_STREAM when `endStream`), HPACK-encoded in order.
    func headers(_ streamID: UInt32, _ fields: [(String, String)], endStream: Bool = false) -> [UInt8] {
        var headers = HPACKHeaders()
        for (n, v) in fields { headers.add(name: n, value: v, indexing: n == "authorization" ? .neverIndexed : .indexable) }
        let block: [UInt8] = encoder.withLock { encoder in
            var buffer = ByteBufferAllocator().buffer(capacity: 512)
            try! encoder.encode(headers: headers, to: &buffer)
            return Array(buffer.readableBytesView)
        }
        return Self.frame(type: 0x1, flags: 0x4 | (endStream ? 0x1 : 0), streamID: streamID, payload: block)
    }

    static func data(_ streamID: UInt32, _ bytes: [UInt8], endStream: Bool = true) -> [UInt8] {
        frame(type: 0x0, flags: endStream ? 0x1 : 0, streamID: streamID, payload: bytes)
    }

    /// RST_STREAM (CANCEL by default, as AsyncHTTPClient sends it).
    static func reset(_ streamID: UInt32, code: UInt32 = 0x8) -> [UInt8] {
        frame(type: 0x3, flags: 0, streamID: streamID, payload: [UInt8(code >> 24), UInt8(code >> 16 & 0xFF), UInt8(code >> 8 & 0xFF), UInt8(code & 0xFF)])
    }

    /// A push request: HEADERS then DATA with END_STREAM.
    func push(_ streamID: UInt32, token: String, authorization: String, extra: [(String, String)] = [],
              body: String = #"{"aps":{"alert":"Hello"}}"#) -> [UInt8] {
        var fields: [(String, String)] = [(":method", "POST"), (":scheme", "http"), (":path", "/3/device/\(token)"),
                                          (":authority", "127.0.0.1"), ("authorization", authorization),
                                          ("apns-topic", GatewayHarness.bundleID), ("apns-push-type", "alert")]
        fields += extra
        return headers(streamID, fields) + Self.data(streamID, Array(body.utf8))
    }

    /// Reads the gateway's frames as they come, decoding HEADERS blocks in order, and
    /// acknowledges SETTINGS (unless told not to).
    private final class Recorder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let state = Mutex(Received())
        let acknowledgesSettings: Bool
        var pending: [UInt8] = []
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())

        init(acknowledgesSettings: Bool) { self.acknowledgesSettings = acknowledgesSettings }

        /// The preface goes first, before any SETTINGS ACK (the gateway's SETTINGS may arrive
        /// before the client has written anything).
        func channelActive(context: ChannelHandlerContext) {
            let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + RawHTTP2Client.frame(type: 0x4, flags: 0, streamID: 0, payload: [])
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: preface)), promise: nil)
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            pending += unwrapInboundIn(data).readableBytesView
            var frames: [Frame] = []
            var offset = 0
            while pending.count - offset >= 9 {
                let length = Int(pending[offset]) << 16 | Int(pending[offset + 1]) << 8 | Int(pending[offset + 2])
                guard pending.count - offset >= 9 + length else { break }
                let type = pending[offset + 3], flags = pending[offset + 4]
                let streamID = Frame.uint32(pending, offset + 5) & 0x7FFF_FFFF
                var frame = Frame(type: type, flags: flags, streamID: streamID, payload: Array(pending[(offset + 9)..<(offset + 9 + length)]))
                offset += 9 + length
                if type == 0x1 {
                    var block = ByteBufferAllocator().buffer(bytes: frame.payload)
                    if let decoded = try? decoder.decodeHeaders(from: &block) {
                        frame.fields = decoded.map { ($0.name, $0.value) }
                    }
                }
                if type == 0x4, flags & 0x1 == 0, acknowledgesSettings {
                    context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: RawHTTP2Client.frame(type: 0x4, flags: 0x1, streamID: 0, payload: []))),
                                          promise: nil)
                }
                frames.append(frame)
            }
            pending.removeFirst(offset)
            state.withLock { $0.frames += frames }
        }

        func channelInactive(context: ChannelHandlerContext) {
            state.withLock { $0.closed = true }
            context.fireChannelInactive()
        }
    }
}
