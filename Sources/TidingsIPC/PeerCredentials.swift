import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Who is on the other end of a Unix domain socket: the kernel's `SO_PEERCRED` (the pid,
/// uid and gid of the process that called `connect`), and what that process was when the
/// daemon accepted the connection — its executable and its start time — read from `/proc`
/// at accept, not later (docs/security.md, "App socket and app identity (daemon)").
public struct PeerCredentials: Sendable, Hashable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// The peer's executable (`/proc/<pid>/exe`, resolved) when the connection was
    /// accepted; nil if the process was already gone or cannot be inspected.
    public var executable: String?
    /// The peer's start time (`/proc/<pid>/stat` field 22, clock ticks since boot) at
    /// accept: with the pid, it names one process even after the pid is reused.
    public var startTime: UInt64?

    public init(pid: Int32, uid: UInt32, gid: UInt32, executable: String? = nil, startTime: UInt64? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.executable = executable
        self.startTime = startTime
    }

    /// The credentials with the process's executable and start time read now: at accept.
    public static func capturing(pid: Int32, uid: UInt32, gid: UInt32) -> PeerCredentials {
        // The start time before and after the executable: if they differ (or either is
        // missing) the pid changed hands in between, and neither is trusted.
        let before = Self.startTime(ofProcess: pid)
        let executable = Self.executable(ofProcess: pid)
        let after = Self.startTime(ofProcess: pid)
        guard let before, before == after else { return PeerCredentials(pid: pid, uid: uid, gid: gid) }
        return PeerCredentials(pid: pid, uid: uid, gid: gid, executable: executable, startTime: before)
    }

    /// The executable captured at accept, if the peer is still that same process running
    /// that same program: its pid has the start time seen at accept (not a new process on
    /// a reused pid) and its executable is unchanged (it has not exec'd another program
    /// since it connected). Nil otherwise: the connection no longer speaks for that program.
    public func verifiedExecutable() -> String? {
        guard let executable, let startTime,
              Self.startTime(ofProcess: pid) == startTime,
              Self.executable(ofProcess: pid) == executable,
              Self.startTime(ofProcess: pid) == startTime else { return nil }
        return executable
    }

    /// A process's executable (`/proc/<pid>/exe`), resolved; nil once the process is gone.
    public static func executable(ofProcess pid: Int32) -> String? {
        guard pid > 0 else { return nil }
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

    /// A process's start time in clock ticks since boot (`/proc/<pid>/stat`, field 22);
    /// nil once the process is gone.
    public static func startTime(ofProcess pid: Int32) -> UInt64? {
        guard pid > 0 else { return nil }
        let descriptor = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return parseStartTime(stat: bytes[..<count])
    }

    /// Field 22 of a `/proc/<pid>/stat` line. The second field, the command name in
    /// parentheses, may itself hold spaces and parentheses: fields are counted after the
    /// last `)`.
    static func parseStartTime(stat: ArraySlice<UInt8>) -> UInt64? {
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
        // After the name come field 3 (state) onwards: field 22 is the 20th of those.
        guard fields.count >= 20 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
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
