import NIOSSL
import Synchronization

/// One TLS context per set of trust roots, shared by every connection of the process
/// (a context holds the parsed roots; a load test opens 100,000 connections).
final class TLSContexts: Sendable {
    static let shared = TLSContexts()
    private let contexts = Mutex<[[String]: NIOSSLContext]>([:])

    func context(trustRootPaths: [String]) throws -> NIOSSLContext {
        if let existing = contexts.withLock({ $0[trustRootPaths] }) { return existing }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if !trustRootPaths.isEmpty {
            tls.trustRoots = .certificates(try trustRootPaths.flatMap { try NIOSSLCertificate.fromPEMFile($0) })
        }
        let context = try NIOSSLContext(configuration: tls)
        contexts.withLock { $0[trustRootPaths] = context }
        return context
    }
}
