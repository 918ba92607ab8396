import Foundation
import NIOCore
import NIOExtras
import TidingsCore

/// Frames on the app socket: a 4-byte big-endian length, then one JSON document or, for
/// the hot path, a binary frame (docs/app-ipc.md, "Binary frames"). A JSON document
/// starts with `{`; a binary frame with its kind byte.
public enum IPCCodec {
    /// Frames larger than this are refused (`AppFraming.maximumFrameLength`, 16 MiB).
    public static let maximumFrameLength = AppFraming.maximumFrameLength

    typealias BinaryKind = AppFraming.BinaryKind

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

    /// Decodes an app's request frame (`AppFraming.decodeRequest`).
    public static func decodeRequest(_ buffer: ByteBuffer) throws -> ReceivedRequest {
        try buffer.withUnsafeReadableBytes { try AppFraming.decodeRequest($0) }
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

    /// The longest daemon frame a client reads: any length the 4-byte prefix can carry.
    /// The daemon is trusted by its clients, and its replies and events may be far over
    /// `maximumFrameLength` (a `pendingRequests` listing without a pending limit, an
    /// `.added` request with its `userInfo`, an admin listing).
    public static let maximumDaemonFrameLength = Int(UInt32.max)

    /// The client's handlers that turn a stream socket into frames of `ByteBuffer`s. What
    /// the client sends is kept within `maximumFrameLength` by `AppSocketClient`; what it
    /// reads, within `maximumDaemonFrameLength` (the daemon's side reads with its own
    /// limits and a hello timeout).
    public static func addFraming(to pipeline: ChannelPipeline.SynchronousOperations) throws {
        try pipeline.addHandler(AppFrameDecoder(limit: maximumDaemonFrameLength, firstFrameTimeout: nil))
        try pipeline.addHandler(LengthFieldPrepender(lengthFieldBitLength: .fourBytes))
    }
}
