import Foundation
import NIOCore
import NIOExtras
import TidingsCore

/// Frames on the app socket: a 4-byte big-endian length, then one JSON document or, for
/// the hot path, a binary frame (docs/app-ipc.md, "Binary frames"). A JSON document
/// starts with `{`; a binary frame with its kind byte.
public enum IPCCodec {
    /// Frames larger than this are refused: a request with its content is far smaller.
    public static let maximumFrameLength = 16 * 1024 * 1024

    /// Binary frame kinds (the payload's first byte).
    enum BinaryKind {
        /// App → daemon: `AppEnvelope(id, .add(request))`; u64 id (little-endian), then the
        /// request in `BinaryRequestCodec`'s form.
        static let add: UInt8 = 0x01
        /// Daemon → app: `DaemonEnvelope.reply(id, .ok)`; u64 id (little-endian).
        static let replyOK: UInt8 = 0x02
    }

    public static func encode<T: Encodable>(_ value: T, allocator: ByteBufferAllocator) throws -> ByteBuffer {
        let data = try JSONEncoder().encode(value)
        var buffer = allocator.buffer(capacity: data.count)
        buffer.writeBytes(data)
        return buffer
    }

    public static func decode<T: Decodable>(_ type: T.Type, from buffer: ByteBuffer) throws -> T {
        try JSONDecoder().decode(type, from: Data(buffer.readableBytesView))
    }

    // MARK: App → daemon

    /// An app's request frame: `add` in the binary form, everything else as JSON.
    public static func encodeRequest(_ envelope: AppEnvelope, allocator: ByteBufferAllocator) throws -> ByteBuffer {
        guard case .add(let request) = envelope.request else { return try encode(envelope, allocator: allocator) }
        var writer = BinaryWriter()
        writer.bytes.reserveCapacity(160)
        writer.byte(BinaryKind.add)
        writer.fixed64(envelope.id)
        try BinaryRequestCodec.encode(request, into: &writer)
        var buffer = allocator.buffer(capacity: writer.bytes.count)
        buffer.writeBytes(writer.bytes)
        return buffer
    }

    /// Decodes an app's request frame. For a binary `add`, `encodedRequest` holds the
    /// request's bytes as received, for the daemon to store as they are.
    public static func decodeRequest(_ buffer: ByteBuffer) throws -> ReceivedRequest {
        guard buffer.readableBytesView.first == BinaryKind.add else {
            let envelope = try decode(AppEnvelope.self, from: buffer)
            return ReceivedRequest(id: envelope.id, request: envelope.request, encodedRequest: nil)
        }
        return try buffer.withUnsafeReadableBytes { (bytes: UnsafeRawBufferPointer) throws -> ReceivedRequest in
            var reader = BinaryReader(bytes)
            _ = try reader.byte()
            let id = try reader.fixed64()
            let body = UnsafeRawBufferPointer(rebasing: bytes[9...])
            let request = try BinaryRequestCodec.decode(body)
            return ReceivedRequest(id: id, request: .add(request), encodedRequest: Data(body))
        }
    }

    // MARK: Daemon → app

    /// A daemon frame. `compact` allows the binary form for a plain `ok` reply: the daemon
    /// sets it for replies to binary requests, which only a client that reads binary sends.
    public static func encodeDaemonEnvelope(_ envelope: DaemonEnvelope, compact: Bool, allocator: ByteBufferAllocator) throws -> ByteBuffer {
        if compact, case .reply(let id, .ok) = envelope {
            var buffer = allocator.buffer(capacity: 9)
            buffer.writeInteger(BinaryKind.replyOK)
            buffer.writeInteger(id, endianness: .little)
            return buffer
        }
        return try encode(envelope, allocator: allocator)
    }

    public static func decodeDaemonEnvelope(_ buffer: ByteBuffer) throws -> DaemonEnvelope {
        guard buffer.readableBytesView.first == BinaryKind.replyOK else { return try decode(DaemonEnvelope.self, from: buffer) }
        var buffer = buffer
        guard buffer.readableBytes == 9, buffer.readInteger(as: UInt8.self) != nil,
              let id = buffer.readInteger(endianness: .little, as: UInt64.self) else {
            throw IPCError.malformedFrame
        }
        return .reply(id: id, .ok)
    }

    /// The handlers that turn a stream socket into frames of `ByteBuffer`s.
    public static func addFraming(to pipeline: ChannelPipeline.SynchronousOperations) throws {
        try pipeline.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
        try pipeline.addHandler(LengthFieldPrepender(lengthFieldBitLength: .fourBytes))
    }
}

/// One request as the daemon received it.
public struct ReceivedRequest: Sendable {
    public var id: UInt64
    public var request: AppRequest
    /// The request's `NotificationRequestValue` bytes as received (`BinaryRequestCodec`),
    /// for a binary `add`; nil otherwise.
    public var encodedRequest: Data?

    public init(id: UInt64, request: AppRequest, encodedRequest: Data? = nil) {
        self.id = id
        self.request = request
        self.encodedRequest = encodedRequest
    }
}
