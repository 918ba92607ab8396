import Foundation
import NIOCore
import NIOExtras
import TidingsCore

/// Frames on the app socket: a 4-byte big-endian length, then one JSON document.
public enum IPCCodec {
    /// Frames larger than this are refused: a request with its content is far smaller.
    public static let maximumFrameLength = 16 * 1024 * 1024

    public static func encode<T: Encodable>(_ value: T, allocator: ByteBufferAllocator) throws -> ByteBuffer {
        let data = try JSONEncoder().encode(value)
        var buffer = allocator.buffer(capacity: data.count)
        buffer.writeBytes(data)
        return buffer
    }

    public static func decode<T: Decodable>(_ type: T.Type, from buffer: ByteBuffer) throws -> T {
        try JSONDecoder().decode(type, from: Data(buffer.readableBytesView))
    }

    /// The handlers that turn a stream socket into frames of `ByteBuffer`s.
    public static func addFraming(to pipeline: ChannelPipeline.SynchronousOperations) throws {
        try pipeline.addHandler(ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .fourBytes)))
        try pipeline.addHandler(LengthFieldPrepender(lengthFieldBitLength: .fourBytes))
    }
}
