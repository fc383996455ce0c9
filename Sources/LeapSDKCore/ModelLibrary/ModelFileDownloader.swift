import Checksums
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The progress of one model's downloads: bytes over the total of its files, and the
/// speed in bytes per second since the first byte. Reports never go down, and stay
/// below 1 until `finish()`.
final class DownloadProgress: @unchecked Sendable {
    private let lock = NSLock()
    private let callback: @Sendable (Double, Int64) -> Void
    private var totals: [Int64?]
    private var done: [Int64]
    private var sessionBytes: Int64 = 0
    private var start: Date?
    /// When the latest bytes arrived: the speed is measured up to there, not over the
    /// hashing and renaming after the last file.
    private var lastByte: Date?
    private var last = 0.0
    private var lastReport = Date.distantPast

    init(files: Int, callback: @escaping @Sendable (Double, Int64) -> Void) {
        self.callback = callback
        totals = Array(repeating: nil, count: files)
        done = Array(repeating: 0, count: files)
    }

    func setTotal(_ file: Int, _ total: Int64?) { lock.withLock { if let total, total > 0 { totals[file] = total } } }

    /// The file's bytes on disk so far (after a resume, what the partial file holds).
    func setDone(_ file: Int, _ bytes: Int64) {
        lock.withLock { done[file] = bytes }
        report(force: false)
    }

    /// `bytes` more of the file arrived.
    func add(_ file: Int, _ bytes: Int) {
        lock.withLock {
            let now = Date()
            if start == nil { start = now }
            lastByte = now
            done[file] += Int64(bytes)
            sessionBytes += Int64(bytes)
        }
        report(force: false)
    }

    /// The file is complete: downloaded (reported), or found in the cache (not reported:
    /// `finish()` says 1).
    func complete(_ file: Int, downloaded: Bool = true) {
        lock.withLock {
            if let t = totals[file] { done[file] = t } else { totals[file] = max(1, done[file]) }
        }
        if downloaded { report(force: true) }
    }

    private func report(force: Bool) {
        let message: (Double, Int64)? = lock.withLock {
            let fraction: Double
            if totals.allSatisfy({ $0 != nil }) {
                let total = totals.reduce(Int64(0)) { $0 + ($1 ?? 0) }
                let got = zip(done, totals).reduce(Int64(0)) { $0 + min($1.0, $1.1 ?? 0) }
                fraction = total > 0 ? Double(got) / Double(total) : 0
            } else {
                let parts = zip(done, totals).map { d, t in t.map { Double(min(d, $0)) / Double($0) } ?? 0 }
                fraction = parts.reduce(0, +) / Double(max(1, parts.count))
            }
            let now = Date()
            let next = min(max(last, fraction), 0.999_999)
            guard force || next - last >= 0.001 || now.timeIntervalSince(lastReport) >= 0.1 else { return nil }
            guard next > last || force || last == 0 else { return nil }
            last = next
            lastReport = now
            return (next, speed(now))
        }
        if let message { callback(message.0, message.1) }
    }

    private func speed(_ now: Date) -> Int64 {
        guard let start else { return 0 }
        let elapsed = min(now, lastByte ?? now).timeIntervalSince(start)
        return elapsed > 0.001 ? Int64(Double(sessionBytes) / elapsed) : 0
    }

    /// Reports 1 (every file is in place).
    func finish() {
        let speed = lock.withLock {
            last = 1
            return self.speed(Date())
        }
        callback(1, speed)
    }
}

/// Downloads one model's files into the cache: resumable (`<file>.partial`, HTTP Range),
/// checked (sha256 from the server's ETag, or recorded at the first download in
/// `<file>.sha256`), put in place by an atomic rename, and serialized by a lock file
/// (`<file>.lock`) so that concurrent loads, in this process or another, download a file
/// once. Blocks the calling thread.
struct ModelFileDownloader {
    /// The model's name, for errors.
    let model: String
    /// Idle timeout of a request, in seconds.
    let timeout: TimeInterval
    /// Attempts at one file when the connection breaks (each resumes where the last ended).
    var maxAttempts = 5
    /// Set when the load's task is cancelled: the request in flight stops, and
    /// `ModelLibraryError.cancelled` is thrown (a partial file stays, to resume).
    var cancel: CancellationFlag?
    /// Whether a cached file is hashed at every load (false: only when its size or
    /// modification time is not the recorded one).
    var verifyCached = true

    /// A file's size and modification time, as recorded beside its sha256.
    static func stamp(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        #if canImport(Darwin)
        let m = st.st_mtimespec
        #else
        let m = st.st_mtim
        #endif
        return "\(st.st_size) \(m.tv_sec).\(m.tv_nsec)"
    }

    /// The sha256 a server states in an ETag (Hugging Face's is the file's sha256, for
    /// files stored with Git LFS or Xet), or nil.
    static func sha256(fromETag value: String?) -> String? {
        guard var v = value?.trimmingCharacters(in: .whitespaces) else { return nil }
        if v.hasPrefix("W/") { v.removeFirst(2) }
        v = v.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        guard v.count == 64, v.allSatisfy(\.isHexDigit) else { return nil }
        return v.lowercased()
    }

    /// The sha256 an exchange states: an `X-Linked-Etag` (Hugging Face's redirect to its
    /// file store carries the file's sha256 there), else the final response's `ETag`,
    /// else a redirect's.
    static func statedSHA256(_ transfer: HTTPTransfer) -> String? {
        let all = [transfer.headers] + transfer.redirectHeaders.reversed()
        for headers in all { if let s = sha256(fromETag: headers["x-linked-etag"]) { return s } }
        for headers in all { if let s = sha256(fromETag: headers["etag"]) { return s } }
        return nil
    }

    /// The hex sha256 of the file at `path`.
    static func sha256(ofFile path: String) throws -> String {
        var hash = try hashing(file: path)
        return hash.finalizeHex()
    }

    /// A sha256 updated with the whole file at `path`, read in 4 MiB chunks.
    static func hashing(file path: String) throws -> SHA256 {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
        defer { try? handle.close() }
        var hash = SHA256()
        while true {
            let chunk = try handle.read(upToCount: 1 << 22) ?? Data()
            if chunk.isEmpty { break }
            chunk.withUnsafeBytes { hash.update($0.bindMemory(to: UInt8.self)) }
        }
        return hash
    }

    static func fileSize(_ path: String) -> Int64? {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : nil
    }

    /// The file's size from a HEAD request, or nil (unknown; not an error here).
    func size(of url: URL) -> Int64? {
        var request = URLRequest(url: url)
        request.httpMethod = "HEAD"
        let t = HTTPTransfer.run(request, sink: .memory(limit: 0), timeout: timeout, cancel: cancel)
        guard t.error == nil, (200..<300).contains(t.status), let length = t.headers["content-length"] else { return nil }
        return Int64(length)
    }

    /// A small document (the endpoint's answer, a manifest) in memory.
    func fetchSmall(_ url: URL, file: String) throws(ModelLibraryError) -> (status: Int, body: Data) {
        let t = HTTPTransfer.run(URLRequest(url: url), sink: .memory(limit: 64 << 20), timeout: timeout, cancel: cancel)
        if t.cancelled { throw .cancelled(model: model) }
        if let error = t.error { throw .networkUnavailable(model: model, file: file, url: url.absoluteString, reason: Self.reason(error)) }
        if t.overLimit { throw .invalidManifest(model: model, reason: "\(url) is larger than 64 MiB") }
        return (t.status, t.body)
    }

    static func reason(_ error: URLError) -> String {
        switch error.code {
        case .cannotConnectToHost: return "connection refused"
        case .cannotFindHost, .dnsLookupFailed: return "unknown host"
        case .notConnectedToInternet: return "not connected"
        case .timedOut: return "timed out"
        case .networkConnectionLost: return "connection lost"
        default: return error.localizedDescription
        }
    }

    /// Puts the file at `url` at `destination`, from the cache when it is there and its
    /// recorded checksum holds, else downloaded. Returns whether it was downloaded.
    func ensure(url: URL, file: String, destination: String, index: Int, progress: DownloadProgress) throws(ModelLibraryError)
        -> Bool
    {
        if cancel?.isCancelled == true { throw .cancelled(model: model) }
        let folder = (destination as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw .fileSystem(model: model, file: file, path: folder, reason: "\(error)")
        }
        let lockPath = destination + ".lock"
        let lockFD = open(lockPath, O_CREAT | O_RDWR, 0o644)
        guard lockFD >= 0 else { throw fileError(errno, file: file, path: lockPath) }
        defer { close(lockFD) }
        while flock(lockFD, LOCK_EX) != 0 {
            guard errno == EINTR else { throw fileError(errno, file: file, path: lockPath) }
        }
        defer { flock(lockFD, LOCK_UN) }

        let record = destination + ".sha256"
        if FileManager.default.fileExists(atPath: destination) {
            // The record: "SHA256 SIZE MTIME".
            let fields = (try? String(contentsOfFile: record, encoding: .utf8))?.split(whereSeparator: \.isWhitespace).map(String.init)
            let recorded = fields?.first
            let unchanged = fields.map { $0.count >= 3 && $0[1...].joined(separator: " ") == Self.stamp(destination) } ?? false
            if !verifyCached, recorded != nil, unchanged {
                progress.setTotal(index, Self.fileSize(destination))
                progress.complete(index, downloaded: false)
                return false
            }
            let actual: String
            do {
                actual = try Self.sha256(ofFile: destination)
            } catch {
                throw .fileSystem(model: model, file: file, path: destination, reason: "cannot read the cached file: \(error)")
            }
            if recorded == nil || recorded == actual {
                if recorded == nil || !unchanged { try writeRecord(actual, of: destination, to: record, file: file) }
                progress.setTotal(index, Self.fileSize(destination))
                progress.complete(index, downloaded: false)
                return false
            }
            // The cached file changed since it was recorded: download it again.
            unlink(destination)
        }
        let partial = destination + ".partial"
        let (expected, actual) = try download(url: url, file: file, partial: partial, index: index, progress: progress)
        if let expected, expected != actual {
            unlink(partial)
            throw .checksumMismatch(model: model, file: file, expected: expected, actual: actual)
        }
        try writeRecord(actual, of: partial, to: record, file: file)
        guard rename(partial, destination) == 0 else { throw fileError(errno, file: file, path: destination) }
        progress.complete(index)
        return true
    }

    /// Downloads `url` into `partial`, resuming what it holds; returns the sha256 the
    /// server stated, if any, and the sha256 of the file, hashed as its bytes are written
    /// (a partial file's earlier bytes read once, when the download resumes it).
    private func download(url: URL, file: String, partial: String, index: Int, progress: DownloadProgress) throws(ModelLibraryError)
        -> (stated: String?, actual: String)
    {
        var attempts = 0
        var stated: String?
        var etag: String?
        // The sha256 of the partial file's first `hashed` bytes.
        var hash = SHA256()
        var hashed: Int64 = 0
        while true {
            let fd = open(partial, O_WRONLY | O_CREAT, 0o644)
            guard fd >= 0 else { throw fileError(errno, file: file, path: partial) }
            let offset = Int64(lseek(fd, 0, SEEK_END))
            if hashed != offset {
                do {
                    hash = try Self.hashing(file: partial)
                } catch {
                    close(fd)
                    throw .fileSystem(model: model, file: file, path: partial, reason: "cannot read the download: \(error)")
                }
                hashed = offset
            }
            var request = URLRequest(url: url)
            if offset > 0 {
                request.setValue("bytes=\(offset)-", forHTTPHeaderField: "Range")
                if let etag { request.setValue(etag, forHTTPHeaderField: "If-Range") }
            }
            progress.setDone(index, offset)
            var restarted = false
            let t = HTTPTransfer.run(
                request, sink: .file(fd), timeout: timeout, cancel: cancel,
                accept: { status, headers in
                    switch status {
                    case 206 where offset > 0:
                        if let range = headers["content-range"], let total = range.split(separator: "/").last.flatMap({ Int64($0) }) {
                            progress.setTotal(index, total)
                        }
                        return true
                    case 200:
                        if offset > 0 {
                            // The server sent the whole file: start over.
                            _ = ftruncate(fd, 0)
                            _ = lseek(fd, 0, SEEK_SET)
                            restarted = true
                            hash = SHA256()
                            hashed = 0
                        }
                        progress.setTotal(index, headers["content-length"].flatMap { Int64($0) })
                        return true
                    default:
                        return false
                    }
                },
                onData: { data in
                    data.withUnsafeBytes { hash.update($0.bindMemory(to: UInt8.self)) }
                    hashed += Int64(data.count)
                    progress.add(index, data.count)
                })
            close(fd)
            if restarted { progress.setDone(index, t.received) }
            if t.cancelled { throw .cancelled(model: model) }
            stated = Self.statedSHA256(t) ?? stated
            if let e = t.headers["etag"] { etag = e }
            if let failure = t.writeErrno { throw fileError(failure, file: file, path: partial) }
            if let error = t.error {
                let unreachable: Set<URLError.Code> = [.cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet]
                attempts += 1
                if (unreachable.contains(error.code) && t.received == 0) || attempts >= maxAttempts {
                    let why = attempts >= maxAttempts && !unreachable.contains(error.code) ? " after \(attempts) attempts" : ""
                    throw .networkUnavailable(model: model, file: file, url: url.absoluteString, reason: Self.reason(error) + why)
                }
                Thread.sleep(forTimeInterval: min(2, 0.1 * Double(attempts)))
                continue
            }
            switch t.status {
            case 200, 206:
                // A body shorter than its stated length is a broken connection too.
                if let total = t.headers["content-length"].flatMap({ Int64($0) }), t.received < total {
                    attempts += 1
                    if attempts >= maxAttempts {
                        throw .networkUnavailable(
                            model: model, file: file, url: url.absoluteString, reason: "the body kept ending early")
                    }
                    continue
                }
                return (stated, hash.finalizeHex())
            case 404, 410:
                unlink(partial)
                throw .fileNotFound(model: model, file: file, url: url.absoluteString)
            case 416 where attempts < maxAttempts:
                // The partial file is not a prefix the server can continue: start over.
                unlink(partial)
                attempts += 1
                etag = nil
            default:
                throw .httpStatus(model: model, file: file, url: url.absoluteString, status: t.status)
            }
        }
    }

    /// Records `sha` with the size and modification time of `data` (which keeps them when
    /// renamed) at `path`.
    private func writeRecord(_ sha: String, of data: String, to path: String, file: String) throws(ModelLibraryError) {
        do {
            let line = [sha, Self.stamp(data)].compactMap { $0 }.joined(separator: " ")
            try Data((line + "\n").utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw .fileSystem(model: model, file: file, path: path, reason: "\(error)")
        }
    }

    private func fileError(_ code: Int32, file: String, path: String) -> ModelLibraryError {
        if code == ENOSPC || code == EDQUOT { return .diskFull(model: model, file: file, path: path) }
        return .fileSystem(model: model, file: file, path: path, reason: String(cString: strerror(code)))
    }
}
