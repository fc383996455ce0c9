// Memory for the bytes a decode step streams: the weights' decode copies. A decoded token
// reads every weight once, 70-240 MB for the models this project runs, so the walk through
// the page tables that each new 4 KiB page costs is paid 18,000-60,000 times a token, and
// in a virtual machine (the second level of page tables, the hypervisor's) each walk is
// several memory reads. In 2 MiB pages the same bytes span 512 times fewer pages. On this
// project's machine (KVM, AMD EPYC) a read loop over 256 MiB streamed 28.7 GB/s on two
// threads and 20.3 on one in 4 KiB pages, 36.0 and 32.7 GB/s in 2 MiB pages
// (docs/performance-log.md, "Large pages, and Q5_0/Q5_1 in the interleaved copy").
//
// On Linux the pages come from the kernel's transparent huge pages: the allocator maps
// blocks of 32 MiB (or one per piece over 8 MiB) aligned to 2 MiB and asks for huge pages with
// `madvise(MADV_HUGEPAGE)`, which takes effect when
// /sys/kernel/mm/transparent_hugepage/enabled is `always` or `madvise` (not `never`). Other
// systems get the same blocks in their ordinary pages. Pieces are handed out from the
// current block in order (64-byte aligned); a block is unmapped when the last piece cut
// from it is gone, so a model that is released gives its memory back.

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A piece of memory from ``LargePages/allocate(byteCount:)``: `byteCount` zeroed bytes at
/// `pointer` (64-byte aligned), valid while this value (or a copy of it) exists.
public struct LargePageMemory: @unchecked Sendable {
    // @unchecked: the block is only read after allocation; its owner writes the bytes once.

    /// The first byte.
    public let pointer: UnsafeMutableRawPointer
    /// Bytes from `pointer` that belong to this piece.
    public let byteCount: Int
    /// The mapping the piece was cut from, kept mapped by this reference.
    let block: LargePageBlock
}

/// One mapping that pieces are cut from; unmapped when the last piece is released.
final class LargePageBlock: @unchecked Sendable {
    // @unchecked: `used` changes only under `LargePages.lock`.
    let base: UnsafeMutableRawPointer
    let byteCount: Int
    var used = 0

    init(base: UnsafeMutableRawPointer, byteCount: Int) {
        self.base = base
        self.byteCount = byteCount
    }

    deinit { munmap(base, byteCount) }
}

/// The allocator of memory in large pages (see the file header).
public enum LargePages {
    /// The size of a large page, and the alignment of every block.
    public static let pageBytes = 2 << 20
    /// The smallest block: pieces of many small matrices share one.
    static let blockBytes = 32 << 20
    /// Alignment of each piece: a cache line.
    static let pieceAlignment = 64

    private static let lock = NSLock()
    /// The block new pieces are cut from, while any piece of it is alive.
    nonisolated(unsafe) private static weak var current: LargePageBlock?

    /// `byteCount` zeroed bytes in large pages where the system gives them (see the file
    /// header). Pieces of up to a quarter of a block share blocks; a larger one gets a block
    /// of its own, rounded up to whole large pages. Stops the process when the system has no
    /// memory left to map, as an allocation does.
    public static func allocate(byteCount: Int) -> LargePageMemory {
        precondition(byteCount >= 0, "LargePages.allocate: negative size \(byteCount)")
        let size = max(pieceAlignment, (byteCount + pieceAlignment - 1) / pieceAlignment * pieceAlignment)
        if size > blockBytes / 4 {
            let block = mapBlock(byteCount: size)
            block.used = size
            return LargePageMemory(pointer: block.base, byteCount: byteCount, block: block)
        }
        lock.lock()
        defer { lock.unlock() }
        let block: LargePageBlock
        if let current, current.byteCount - current.used >= size {
            block = current
        } else {
            block = mapBlock(byteCount: blockBytes)
            current = block
        }
        let piece = LargePageMemory(pointer: block.base + block.used, byteCount: byteCount, block: block)
        block.used += size
        return piece
    }

    /// Whether this system is asked for large pages (Linux, transparent huge pages not
    /// turned off).
    public static var areRequested: Bool {
        #if os(Linux)
        guard let mode = try? String(contentsOfFile: "/sys/kernel/mm/transparent_hugepage/enabled", encoding: .utf8) else { return false }
        return !mode.contains("[never]")
        #else
        return false
        #endif
    }

    /// Maps `byteCount` (rounded up to whole large pages) aligned to a large page: a mapping
    /// one page longer, trimmed at both ends.
    private static func mapBlock(byteCount: Int) -> LargePageBlock {
        let length = (byteCount + pageBytes - 1) / pageBytes * pageBytes
        let raw = mmap(nil, length + pageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let raw, raw != MAP_FAILED else {
            fatalError("LargePages: cannot map \(length) bytes: \(String(cString: strerror(errno)))")
        }
        let address = UInt(bitPattern: raw)
        let aligned = (address + UInt(pageBytes) - 1) / UInt(pageBytes) * UInt(pageBytes)
        let head = Int(aligned - address), tail = pageBytes - head
        if head > 0 { munmap(raw, head) }
        if tail > 0 { munmap(raw + head + length, tail) }
        let base = raw + head
        #if os(Linux)
        _ = madvise(base, length, Int32(MADV_HUGEPAGE))
        #endif
        return LargePageBlock(base: base, byteCount: length)
    }
}
