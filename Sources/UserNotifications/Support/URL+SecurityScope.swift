import Foundation

#if !canImport(Darwin)
extension URL {
    /// Security-scoped access does not exist on Linux: file permissions alone decide
    /// whether a file is readable. Returns true, so code written for Apple's sandbox
    /// (`if url.startAccessingSecurityScopedResource() { … }`) runs unchanged.
    public func startAccessingSecurityScopedResource() -> Bool { true }

    /// Balances `startAccessingSecurityScopedResource()`; nothing to release on Linux.
    public func stopAccessingSecurityScopedResource() {}
}
#endif
