#if canImport(Glibc)
import Glibc
#endif
@_spi(CustomByteBufferAllocator) import NIOCore
import Synchronization

/// A `ByteBufferAllocator` for device connections: buffers from `threshold` to `slotSize`
/// bytes live in slots of one large reserved mapping, so only the pages a buffer touches use
/// memory, and those pages can be handed back while the buffer lives (`releasePages`).
///
/// An idle device connection holds large buffers it barely uses: NIOSSL allocates a 32 KiB
/// plaintext read buffer and a 16 KiB outbound buffer per connection up front (measured with
/// heaptrack, docs/benchmarks.md, Gateway, idle connections). From the malloc heap such a
/// buffer costs its header page, its trailer page and any recycled page it lands on; in a slot
/// it costs the pages its bytes touch, and after `releasePages` none. A slot buffer grows in
/// place up to `slotSize`; smaller and larger buffers are plain `malloc` blocks.
enum LazyPageAllocator {
    /// Allocations from this size on get a slot.
    static let threshold = 16 * 1024
    /// One slot: room for NIOSSL's buffers and their growth.
    static let slotSize = 64 * 1024
    /// Slots in the reserved mapping (16 GiB of address space, none of it committed until
    /// touched): two per connection for 131,072 connections. When they run out, buffers
    /// come from the heap.
    static let slotCount = 1 << 18
    #if canImport(Glibc)
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    #else
    static let pageSize = 4096
    #endif

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
    private struct Slots {
        /// Slots given back, reused first (their pages were released when freed).
        var free: [Int] = []
        /// Slots below this index have been handed out at least once.
        var used = 0
    }

    /// The reserved mapping's first byte; nil when it could not be mapped (then every buffer
    /// comes from the heap).
    private static let regionAddress: UInt? = {
        let mapped = mmap(nil, slotCount * slotSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        guard let mapped, mapped != UnsafeMutableRawPointer(bitPattern: -1) else { return nil }
        return UInt(bitPattern: mapped)
    }()
    private static var region: UnsafeMutableRawPointer? { regionAddress.flatMap { UnsafeMutableRawPointer(bitPattern: $0) } }
    private static let slots = Mutex(Slots())

    /// The slot holding `pointer`, if it is in the reserved mapping.
    private static func slot(of pointer: UnsafeRawPointer) -> Int? {
        guard let region else { return nil }
        let offset = pointer - UnsafeRawPointer(region)
        guard offset >= 0, offset < slotCount * slotSize else { return nil }
        return offset / slotSize
    }

    private static func takeSlot() -> UnsafeMutableRawPointer? {
        guard let region else { return nil }
        let index: Int? = slots.withLock { s in
            if let reused = s.free.popLast() { return reused }
            guard s.used < slotCount else { return nil }
            defer { s.used += 1 }
            return s.used
        }
        return index.map { region + $0 * slotSize }
    }

    private static func giveBack(slot index: Int) {
        guard let region else { return }
        madvise(region + index * slotSize, slotSize, MADV_DONTNEED)
        slots.withLock { $0.free.append(index) }
    }

    private static func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        if size >= threshold, size <= slotSize, let slot = takeSlot() { return slot }
        return malloc(max(size, 1))
    }

    private static func deallocate(_ pointer: UnsafeMutableRawPointer) {
        if let index = slot(of: pointer) { giveBack(slot: index) } else { free(pointer) }
    }

    private static func reallocate(_ pointer: UnsafeMutableRawPointer?, oldSize: Int, newSize: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(newSize) }
        if let index = slot(of: pointer) {
            if newSize <= slotSize { return pointer }  // grows (or shrinks) in place
            guard let grown = malloc(newSize) else { return nil }
            grown.copyMemory(from: pointer, byteCount: min(oldSize, newSize))
            giveBack(slot: index)
            return grown
        }
        if newSize >= threshold, newSize <= slotSize, let slot = takeSlot() {
            slot.copyMemory(from: pointer, byteCount: min(oldSize, newSize))
            free(pointer)
            return slot
        }
        return realloc(pointer, max(newSize, 1))
    }
    #endif

    /// Hands back to the system the whole pages under `bytes`, rounded out to the page after
    /// the last byte, when they are in a slot: they read as zeros afterwards and use no memory
    /// until written again. Only for an allocation whose bytes from `bytes.baseAddress` to its
    /// end nobody needs any more, e.g. TLS's plaintext buffer once its bytes were read.
    /// Returns whether anything was released.
    @discardableResult
    static func releasePages(under bytes: UnsafeRawBufferPointer) -> Bool {
        #if canImport(Glibc)
        guard let start = bytes.baseAddress, let region, let index = slot(of: start) else { return false }
        let slotStart = UnsafeRawPointer(region) + index * slotSize
        // Whole pages only: from the page holding the first byte if it starts the slot, else
        // the next page boundary; to the page boundary after the last byte.
        let first = (start - slotStart) % pageSize == 0 ? start - slotStart : ((start - slotStart) / pageSize + 1) * pageSize
        let end = min(((start - slotStart) + bytes.count + pageSize - 1) / pageSize * pageSize, slotSize)
        guard end > first else { return false }
        return madvise(UnsafeMutableRawPointer(mutating: slotStart + first), end - first, MADV_DONTNEED) == 0
        #else
        return false
        #endif
    }
}

/// Sits between the socket and TLS on a device connection: once the socket has taken every
/// byte TLS wrote, the ciphertext buffer's pages go back to the system (NIOSSL keeps a 16 KiB
/// outbound buffer per connection whose bytes are dead once written: it hands out all of
/// them at each flush and clears the buffer before the next record). An idle connection then
/// holds none of its pages.
final class ReleaseWrittenPagesHandler: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What TLS wrote since the last flush.
    private var written: ByteBuffer?

    init() {}

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        written = unwrapOutboundIn(data)
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        context.flush()
        guard let buffer = written else { return }
        written = nil
        // Still queued in the channel (the socket would block): the bytes are live; the pages
        // stay until a later flush empties the queue.
        guard let pending = try? context.channel.syncOptions?.getOption(.bufferedWritableBytes), pending == 0 else { return }
        buffer.withVeryUnsafeBytes { storage in
            _ = LazyPageAllocator.releasePages(under: UnsafeRawBufferPointer(rebasing: storage.prefix(buffer.writerIndex)))
        }
    }
}
