#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// The bytes of a GGUF file: a read-only memory mapping of the file, or an owned copy of
/// bytes given in memory (tests, fuzzing). Tensor views point into it, so it lives as
/// long as any `GGUFFile` that holds it.
final class GGUFStorage: @unchecked Sendable {
    // Safety: the bytes are never written after init; the mapping is released in deinit only.
    let base: UnsafeRawPointer?
    let count: Int
    private let isMapped: Bool

    /// Maps `path` read-only.
    init(path: String) throws(GGUFError) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw .cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw .cannotOpen(path: path, reason: "not a regular file") }
        let size = Int(st.st_size)
        if size == 0 {
            base = nil
            count = 0
            isMapped = false
            return
        }
        let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0)
        guard let p, p != MAP_FAILED else { throw .cannotOpen(path: path, reason: "mmap failed: \(String(cString: strerror(errno)))") }
        base = UnsafeRawPointer(p)
        count = size
        isMapped = true
    }

    /// Copies `bytes` into owned, 64-byte-aligned memory.
    init(bytes: UnsafeRawBufferPointer) {
        count = bytes.count
        isMapped = false
        if bytes.count == 0 {
            base = nil
            return
        }
        let p = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 64)
        p.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        base = UnsafeRawPointer(p)
    }

    var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Drops the whole pages of `range` (byte offsets) from this process's resident memory
    /// when the bytes are a file mapping: they stay readable, and are read from the file
    /// again if touched. Does nothing for bytes held in memory.
    func releaseResidentPages(_ range: Range<Int>) {
        guard isMapped, let base, range.lowerBound >= 0, range.upperBound <= count else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (range.lowerBound + page - 1) / page * page, end = range.upperBound / page * page
        guard page > 0, end > start else { return }
        _ = madvise(UnsafeMutableRawPointer(mutating: base + start), end - start, Int32(MADV_DONTNEED))
    }

    deinit {
        guard let base else { return }
        if isMapped {
            munmap(UnsafeMutableRawPointer(mutating: base), count)
        } else {
            base.deallocate()
        }
    }
}
