import NIOCore
import Testing
@testable import TidingsGateway

@Suite("Device channel allocator")
struct LazyPageAllocatorTests {
    /// Buffers below and above the mapping threshold hold their bytes, through growth from
    /// heap to mapped pages, copies and release.
    @Test func buffersKeepTheirBytesAcrossTheThreshold() {
        let allocator = LazyPageAllocator.allocator
        var small = allocator.buffer(capacity: 100)
        small.writeBytes(Array(0..<100))
        var big = allocator.buffer(capacity: 2 * LazyPageAllocator.threshold)
        let pattern = (0..<(2 * LazyPageAllocator.threshold)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        big.writeBytes(pattern)
        // Growing a heap buffer past the threshold moves it to mapped pages, keeping its bytes.
        var growing = small
        growing.writeBytes(pattern)
        #expect(small.readableBytesView.elementsEqual(0..<100))
        #expect(big.readableBytesView.elementsEqual(pattern))
        #expect(growing.readableBytesView.prefix(100).elementsEqual(0..<100))
        #expect(growing.readableBytesView.dropFirst(100).elementsEqual(pattern))
        // Growing a mapped buffer further.
        big.writeBytes(pattern)
        #expect(big.readableBytes == 2 * pattern.count)
        #expect(big.readableBytesView.suffix(pattern.count).elementsEqual(pattern))
    }
}
