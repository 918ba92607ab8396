#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a descriptor to its end with a bound: at most `limit` + 1 bytes are ever read, so a
/// hostile or mistaken input (a pipe of gigabytes, `/dev/zero`) is refused without being held.
/// An interrupted `read` (EINTR) is retried; `FileHandle.readDataToEndOfFile` traps on it.
public enum BoundedRead {
    public struct Failure: Error, CustomStringConvertible {
        public let errno: Int32
        public var description: String { String(cString: strerror(errno)) }
    }

    /// Everything until end of file, or nil if there is more than `limit` bytes.
    public static func toEnd(_ descriptor: Int32, limit: Int) throws(Failure) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: min(limit + 1, 64 * 1024))
        while true {
            let room = min(chunk.count, limit + 1 - bytes.count)
            let n = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, room) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(errno: errno)
            }
            if n == 0 { return bytes }
            bytes += chunk[..<n]
            if bytes.count > limit { return nil }
        }
    }
}
