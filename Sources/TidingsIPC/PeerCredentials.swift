import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Who is on the other end of a Unix domain socket, as the kernel says (`SO_PEERCRED`).
public struct PeerCredentials: Sendable, Hashable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// The peer's executable (`/proc/<pid>/exe`), resolved; nil once the process is gone.
    public var executablePath: String? {
        let link = "/proc/\(pid)/exe"
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(link, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let path = buffer.withUnsafeBufferPointer { pointer in
            String(decoding: UnsafeRawBufferPointer(start: pointer.baseAddress, count: count), as: UTF8.self)
        }
        // The kernel appends " (deleted)" when the file was replaced after exec.
        let deleted = " (deleted)"
        return path.hasSuffix(deleted) ? String(path.dropLast(deleted.count)) : path
    }
}

/// `struct ucred` of Linux (pid, uid, gid: three 32-bit fields), which Glibc's module
/// does not export without `_GNU_SOURCE`.
struct KernelPeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

public enum IPCError: Error, Sendable, Hashable, CustomStringConvertible {
    case connectionClosed
    case malformedFrame

    public var description: String {
        switch self {
        case .connectionClosed: "the connection to the notification daemon closed"
        case .malformedFrame: "the notification daemon sent a frame that is no reply"
        }
    }
}
