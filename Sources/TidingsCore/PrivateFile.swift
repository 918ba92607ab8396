#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a file that holds a secret (a private key, a token, a `.p12`) with its mode from the
/// moment it exists: `open(O_CREAT|O_EXCL, mode)`, never created readable and then `chmod`ed
/// as `FileManager.createFile(attributes:)` does. The gateway's key and token files,
/// `tidings certs create`'s output and the daemon's device key use it.
public enum PrivateFile {
    public struct Failure: Error, CustomStringConvertible {
        public let path: String
        public let errno: Int32
        public var description: String { "cannot write \(path): \(String(cString: strerror(errno)))" }
    }

    /// Creates `path` with `mode` and writes `bytes`, synced. With `replacing`, a file already
    /// there is removed first (its replacement is still created exclusively); without it, an
    /// existing file is an error (`EEXIST`). A symbolic link at `path` is never followed.
    public static func create(_ path: String, contents bytes: [UInt8], mode: mode_t = 0o600, replacing: Bool) throws(Failure) {
        if replacing, unlink(path) != 0, errno != ENOENT { throw Failure(path: path, errno: errno) }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw Failure(path: path, errno: errno) }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(path: path, errno: errno)
            }
            written += n
        }
        guard fsync(fd) == 0 else { throw Failure(path: path, errno: errno) }
    }
}
