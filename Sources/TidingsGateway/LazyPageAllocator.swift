#if canImport(Glibc)
import Glibc
#endif
@_spi(CustomByteBufferAllocator) import NIOCore

/// A `ByteBufferAllocator` for device connections: buffers of at least `threshold` bytes are
/// mapped pages, so only the pages a buffer actually touches use memory.
///
/// An idle device connection holds large buffers it barely uses: NIOSSL allocates a 32 KiB
/// plaintext read buffer and a 16 KiB outbound buffer per connection up front (measured with
/// heaptrack, docs/benchmarks.md, Gateway §3). From the malloc heap such a buffer costs its
/// header page, its trailer page and any recycled page it lands on; mapped, it costs the one
/// or two pages that a few hundred bytes of device messages touch, and it goes back to the
/// system when the connection closes. Smaller buffers stay on malloc.
enum LazyPageAllocator {
    /// Allocations from this size on are mapped.
    static let threshold = 16 * 1024
    /// In front of every block: its kind and size, keeping 16-byte alignment.
    private static let headerSize = 16
    private static let mappedTag: UInt64 = 0x6d61_7070_6564_2121  // "mapped!!"
    private static let heapTag: UInt64 = 0x6865_6170_6865_6170    // "heapheap"

    static var allocator: ByteBufferAllocator {
        #if canImport(Glibc)
        ByteBufferAllocator(allocate: { size in
            LazyPageAllocator.allocate(size)
        }, reallocate: { pointer, oldSize, newSize in
            LazyPageAllocator.reallocate(pointer, oldSize: oldSize, newSize: newSize)
        }, deallocate: { pointer in
            LazyPageAllocator.deallocate(pointer)
        }, copy: { destination, source, count in
            destination.copyMemory(from: source, byteCount: count)
        })
        #else
        ByteBufferAllocator()
        #endif
    }

    #if canImport(Glibc)
    private static func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        let total = size + headerSize
        if size >= threshold {
            let mapped = mmap(nil, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            if let mapped, mapped != UnsafeMutableRawPointer(bitPattern: -1) {
                mapped.storeBytes(of: mappedTag, as: UInt64.self)
                mapped.storeBytes(of: UInt64(total), toByteOffset: 8, as: UInt64.self)
                return mapped + headerSize
            }
            // Out of mappings: fall back to the heap.
        }
        guard let block = malloc(total) else { return nil }
        block.storeBytes(of: heapTag, as: UInt64.self)
        block.storeBytes(of: UInt64(total), toByteOffset: 8, as: UInt64.self)
        return block + headerSize
    }

    private static func deallocate(_ pointer: UnsafeMutableRawPointer) {
        let block = pointer - headerSize
        if block.load(as: UInt64.self) == mappedTag {
            munmap(block, Int(block.load(fromByteOffset: 8, as: UInt64.self)))
        } else {
            free(block)
        }
    }

    private static func reallocate(_ pointer: UnsafeMutableRawPointer?, oldSize: Int, newSize: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(newSize) }
        let block = pointer - headerSize
        if block.load(as: UInt64.self) == heapTag && newSize < threshold {
            guard let grown = realloc(block, newSize + headerSize) else { return nil }
            grown.storeBytes(of: UInt64(newSize + headerSize), toByteOffset: 8, as: UInt64.self)
            return grown + headerSize
        }
        guard let fresh = allocate(newSize) else { return nil }
        fresh.copyMemory(from: pointer, byteCount: min(oldSize, newSize))
        deallocate(pointer)
        return fresh
    }
    #endif
}
