#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Random 64-bit words from the system's cryptographically secure generator, fetched 4 KiB at
/// a time (256 bytes per `getentropy` call): `SystemRandomNumberGenerator` makes one
/// `getrandom(2)` system call per word, which the provider API paid twice per request for its
/// generated `apns-id`s.
final class RandomBytePool: Sendable {
    static let shared = RandomBytePool()

    private struct Words {
        var words = [UInt64](repeating: 0, count: 512)
        var next = 512
    }

    private let state = Mutex(Words())

    /// Two words (128 bits) at once.
    func next128() -> (UInt64, UInt64) {
        state.withLock { s in
            if s.next + 2 > s.words.count {
                s.words.withUnsafeMutableBytes { Self.fill($0) }
                s.next = 0
            }
            defer { s.next += 2 }
            return (s.words[s.next], s.words[s.next + 1])
        }
    }

    private static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        #if canImport(Glibc) || canImport(Darwin)
        // getentropy(3) (getrandom(2) on Linux) hands out at most 256 bytes per call.
        var filled = 0
        while filled < buffer.count {
            let n = min(256, buffer.count - filled)
            guard getentropy(buffer.baseAddress! + filled, n) == 0 else { break }
            filled += n
        }
        if filled == buffer.count { return }
        #endif
        // No getentropy(3): the standard library's generator, a word at a time.
        var generator = SystemRandomNumberGenerator()
        let words = buffer.bindMemory(to: UInt64.self)
        for i in words.indices { words[i] = generator.next() }
    }
}
