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

    /// A slot buffer grows in place; released pages read as zeros (they went back to the
    /// system) and are usable again; heap buffers are never released.
    @Test func releasedSlotPagesReadAsZerosAndHeapBuffersAreLeftAlone() {
        let allocator = LazyPageAllocator.allocator
        var slot = allocator.buffer(capacity: 32 * 1024)
        let address = slot.withVeryUnsafeBytes { $0.baseAddress }
        slot.writeBytes(Array(repeating: 0xAB, count: 40 * 1024))
        #expect(slot.withVeryUnsafeBytes { $0.baseAddress } == address, "grew in place within its slot")
        let released = slot.withVeryUnsafeBytes { LazyPageAllocator.releasePages(under: UnsafeRawBufferPointer(rebasing: $0.prefix(5000))) }
        #expect(released)
        #expect(slot.withVeryUnsafeBytes { $0.prefix(8192).allSatisfy { $0 == 0 } }, "the first two pages were released")
        #expect(slot.withVeryUnsafeBytes { $0[8192..<(40 * 1024)].allSatisfy { $0 == 0xAB } }, "pages after them were not")
        slot.clear()
        slot.writeBytes(Array(repeating: 0xCD, count: 100))
        #expect(slot.readableBytesView.allSatisfy { $0 == 0xCD })

        var heap = allocator.buffer(capacity: 100)
        heap.writeBytes(Array(repeating: 0xEF, count: 100))
        let releasedHeap = heap.withVeryUnsafeBytes { LazyPageAllocator.releasePages(under: UnsafeRawBufferPointer(rebasing: $0.prefix(100))) }
        #expect(!releasedHeap)
        #expect(heap.readableBytesView.allSatisfy { $0 == 0xEF })
    }
}
