import Foundation

/// The app socket's framing and request decoding on plain bytes (docs/app-ipc.md,
/// "Framing"): a 4-byte big-endian length, then one JSON `AppEnvelope` or a binary frame.
/// The daemon's channel handler and the `FuzzAppFrame` target both go through these
/// functions, so what the fuzzer feeds is what a peer can send.
public enum AppFraming {
    /// Frames larger than this are refused: a request with its content is far smaller.
    public static let maximumFrameLength = 16 * 1024 * 1024
    /// The length field's size.
    public static let headerLength = 4

    /// Binary frame kinds (the payload's first byte).
    public enum BinaryKind {
        /// App → daemon: `AppEnvelope(id, .add(request))`; u64 id (little-endian), then the
        /// request in `BinaryRequestCodec`'s form.
        public static let add: UInt8 = 0x01
        /// Daemon → app: `DaemonEnvelope.reply(id, .ok)`; u64 id (little-endian).
        public static let replyOK: UInt8 = 0x02
    }

    /// A frame the daemon refuses before reading its body.
    public enum FrameError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The length prefix announces more than `limit` bytes.
        case tooLong(length: UInt32, limit: Int)

        public var description: String {
            switch self {
            case .tooLong(let length, let limit): "a frame of \(length) bytes is over the limit of \(limit) bytes"
            }
        }
    }

    /// What the bytes at the start of `bytes` hold.
    public enum Next: Sendable, Hashable {
        /// Not a whole frame yet: at least `needed` bytes in all are required (header
        /// included). Never more than `headerLength + limit`.
        case incomplete(needed: Int)
        /// A whole frame: its body is `bytes[headerLength ..< headerLength + bodyLength]`.
        case frame(bodyLength: Int)
    }

    /// Looks at the start of `bytes` for one frame. A length prefix over `limit` is refused
    /// as soon as its 4 bytes are there, before any of the body is buffered.
    public static func next(in bytes: UnsafeRawBufferPointer, limit: Int = maximumFrameLength) throws(FrameError) -> Next {
        guard bytes.count >= headerLength else { return .incomplete(needed: headerLength) }
        let length = UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3])
        // Checked: a u32 always fits an Int on the 64-bit platforms Tidings runs on, but a
        // limit below 0 or a 32-bit Int must not turn into a trap.
        guard let body = Int(exactly: length), body <= limit else { throw .tooLong(length: length, limit: limit) }
        let (total, overflow) = body.addingReportingOverflow(headerLength)
        guard !overflow else { throw .tooLong(length: length, limit: limit) }
        return bytes.count >= total ? .frame(bodyLength: body) : .incomplete(needed: total)
    }

    /// Decodes an app's request frame (the body, without its length). For a binary `add`,
    /// `encodedRequest` holds the request's bytes as received, for the daemon to store as
    /// they are. Throws on anything that is not a request: the daemon drops the peer.
    public static func decodeRequest(_ body: UnsafeRawBufferPointer) throws -> ReceivedRequest {
        guard body.first == BinaryKind.add else {
            let envelope = try JSONDecoder().decode(AppEnvelope.self, from: Data(body))
            return ReceivedRequest(id: envelope.id, request: envelope.request, encodedRequest: nil)
        }
        var reader = BinaryReader(body)
        _ = try reader.byte()
        let id = try reader.fixed64()
        let rest = UnsafeRawBufferPointer(rebasing: body[9...])
        let request = try BinaryRequestCodec.decode(rest)
        return ReceivedRequest(id: id, request: .add(request), encodedRequest: Data(rest))
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
