import Foundation

/// Blocking length-prefixed frames (a 4-byte big-endian length, then the bytes) on a file
/// descriptor: the framing of `IPCCodec` for a service extension's pipe or socket, where a
/// thread may block on one peer.
public enum DescriptorFraming {
    public struct Error: Swift.Error, CustomStringConvertible, Hashable {
        public let description: String
        /// The descriptor failed (reset, closed), as opposed to bytes that are no frame.
        public let isIOError: Bool
        public init(_ description: String, isIOError: Bool = false) {
            self.description = description
            self.isIOError = isIOError
        }
    }

    /// Reads one frame. Returns nil at end of file on a frame boundary; throws on a cut
    /// frame, a frame over `maximumLength`, or a read error.
    public static func read(from descriptor: Int32, maximumLength: Int = IPCCodec.maximumFrameLength) throws(Error) -> [UInt8]? {
        var header = [UInt8](repeating: 0, count: 4)
        let got = try readFully(descriptor, into: &header)
        if got == 0 { return nil }
        guard got == 4 else { throw Error("the stream ended inside a frame header") }
        let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
        guard length <= maximumLength else {
            throw Error("a frame of \(length) bytes is over the limit of \(maximumLength)")
        }
        var body = [UInt8](repeating: 0, count: length)
        guard try readFully(descriptor, into: &body) == length else {
            throw Error("the stream ended inside a frame of \(length) bytes")
        }
        return body
    }

    /// Writes one frame in a single write where possible. On a socket the write never
    /// raises `SIGPIPE`; a closed peer is an error.
    public static func write(_ bytes: some Collection<UInt8>, to descriptor: Int32) throws(Error) {
        var frame = [UInt8]()
        frame.reserveCapacity(bytes.count + 4)
        let length = UInt32(bytes.count)
        frame.append(UInt8(truncatingIfNeeded: length >> 24))
        frame.append(UInt8(truncatingIfNeeded: length >> 16))
        frame.append(UInt8(truncatingIfNeeded: length >> 8))
        frame.append(UInt8(truncatingIfNeeded: length))
        frame.append(contentsOf: bytes)
        try writeAll(frame, to: descriptor)
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) throws(Error) {
        var offset = 0
        var useSend = true
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw -> Int in
                let base = raw.baseAddress! + offset
                if useSend {
                    return send(descriptor, base, raw.count - offset, Int32(MSG_NOSIGNAL))
                }
                return Foundation.write(descriptor, base, raw.count - offset)
            }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ENOTSOCK, useSend { useSend = false; continue }
                throw Error("write failed: \(String(cString: strerror(errno)))", isIOError: true)
            }
            offset += n
        }
    }

    private static func readFully(_ descriptor: Int32, into buffer: inout [UInt8]) throws(Error) -> Int {
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeMutableBytes { raw in
                Foundation.read(descriptor, raw.baseAddress! + offset, raw.count - offset)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw Error("read failed: \(String(cString: strerror(errno)))", isIOError: true)
            }
            if n == 0 { break }
            offset += n
        }
        return offset
    }
}
