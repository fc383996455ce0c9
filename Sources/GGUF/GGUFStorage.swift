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
    /// The byte ranges given to `releaseResidentPages(_:)`, in the order released, under
    /// `lock`: `touchPages` leaves them out.
    private var released: [Range<Int>] = []
    private let lock: UnsafeMutablePointer<pthread_mutex_t> = {
        let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(lock, nil)
        return lock
    }()

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
        let page = Self.pageBytes
        let start = (range.lowerBound + page - 1) / page * page, end = range.upperBound / page * page
        guard page > 0, end > start else { return }
        // A longer prefix of the range released last extends it, and only its new pages
        // are given up.
        var from = start
        pthread_mutex_lock(lock)
        if let last = released.last, last.lowerBound == start {
            from = max(start, last.upperBound)
            released[released.count - 1] = start..<max(end, last.upperBound)
        } else {
            released.append(start..<end)
        }
        pthread_mutex_unlock(lock)
        guard end > from else { return }
        let pages = UnsafeMutableRawPointer(mutating: base + from)
        #if os(Linux)
        // The page cache may hold the file in folios of up to 2 MiB, which a fault maps whole
        // (one PMD) when a 2 MiB-aligned range of the mapping allows huge pages: a read of a
        // small tensor next to a released one would bring back up to 2 MiB of it. Marked
        // NOHUGEPAGE, the released range is a mapping of its own that no such range spans.
        _ = madvise(pages, end - from, Int32(MADV_NOHUGEPAGE))
        #endif
        _ = madvise(pages, end - from, Int32(MADV_DONTNEED))
    }

    /// The system's page size.
    static let pageBytes = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Reads one byte of every page of the bytes but those released
    /// (`releaseResidentPages(_:)`), calling `progress` with the fraction of the file done
    /// about 100 times: a mapped file's pages are then resident before they are first
    /// needed, without bringing back the pages of tensors that were copied elsewhere.
    func touchPages(_ progress: (Double) -> Void) {
        guard let base, count > 0 else { return }
        pthread_mutex_lock(lock)
        let skipped = released.sorted { $0.lowerBound < $1.lowerBound }
        pthread_mutex_unlock(lock)
        let page = max(4096, Self.pageBytes)
        let step = max(page, (count / 100 + page - 1) / page * page)
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var sum: UInt8 = 0, next = 0, chunkStart = 0
        while chunkStart < count {
            let chunkEnd = min(count, chunkStart + step)
            var i = chunkStart
            while i < chunkEnd {
                while next < skipped.count, skipped[next].upperBound <= i { next += 1 }
                if next < skipped.count, skipped[next].contains(i) {
                    i = skipped[next].upperBound
                    continue
                }
                sum &+= bytes[i]
                i += page
            }
            chunkStart = chunkEnd
            progress(Double(chunkStart) / Double(count))
        }
        keepAlive(sum)
    }

    deinit {
        pthread_mutex_destroy(lock)
        lock.deallocate()
        guard let base else { return }
        if isMapped {
            munmap(UnsafeMutableRawPointer(mutating: base), count)
        } else {
            base.deallocate()
        }
    }
}

/// Consumes a value so that the page reads producing it are not optimized away.
@_optimize(none) @inline(never) private func keepAlive(_ value: UInt8) {}
