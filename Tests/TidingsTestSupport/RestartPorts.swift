import Foundation
import Synchronization

/// A port for a server that a test stops and starts again on the same port (a gateway
/// restart that its device must find again). A port 0 gave first comes from the kernel's
/// ephemeral range, where any client socket of the parallel suite may take it while the
/// server is down (`bind(…): Address already in use` on the restart, seen once); these come
/// from below that range (20,000–32,767), where only explicit binds go, each free when
/// given and never given twice in one test process.
public enum RestartPorts {
    private static let given = Mutex<Set<Int>>([])

    public static func take() -> Int {
        for _ in 0..<1_000 {
            let port = Int.random(in: 20_000...32_767)
            let fresh = given.withLock { $0.insert(port).inserted }
            if fresh, isFree(port) { return port }
        }
        preconditionFailure("no free port between 20,000 and 32,767")
    }

    /// Whether a listening socket can be bound to 127.0.0.1:`port` now.
    static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var reuse: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
