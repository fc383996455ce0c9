import Foundation
import Testing

@testable import GGUF

/// A mapped file's pages given up by `releaseResidentPages` stay out of resident memory:
/// `touchPages` (what the SDK runs after loading a model, so that the first token does not
/// wait on the disk) skips them, so a tensor copied into the decode kernels' layout is
/// held once, and growing prefixes of a tensor (released while it is copied) give each
/// page up once.
@Suite struct ResidentPagesTests {
    static let tensorBytes = 8 << 20
    /// How far a release or a touch may spill past a range: the page cache may hold a file
    /// in folios of up to 2 MiB (ext4 on Linux 6.x), mapped whole by one fault and dropped
    /// whole when part of one is released.
    static let slack = (2 << 20) + 8192

    /// A file of two F32 tensors, `a` and `b`, of `tensorBytes` each (values `i` and
    /// `-i`), written to a temporary path.
    static func twoTensorFile() throws -> String {
        var w = GGUFWriter()
        w.metadata.set("general.architecture", .string("llama"))
        let n = tensorBytes / 4
        for (name, sign) in [("a", Float(1)), ("b", Float(-1))] {
            let values = (0..<n).map { sign * Float($0) }
            try w.addTensor(name: name, type: .f32, shape: [1024, n / 1024], data: values.withUnsafeBytes { Array($0) })
        }
        let path = NSTemporaryDirectory() + "resident-pages-\(UInt64.random(in: 0...UInt64.max)).gguf"
        try w.write(to: path)
        return path
    }

    #if os(Linux)
    /// Resident bytes of the mapping that starts at `base` (/proc/self/smaps `Rss`).
    static func residentBytes(of base: UnsafeRawPointer) throws -> Int {
        // Read to the end: /proc files report no size.
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/self/smaps"))
        let text = String(decoding: try #require(try handle.readToEnd()), as: UTF8.self)
        var inside = false
        for line in text.split(separator: "\n") {
            let head = line.split(separator: " ", maxSplits: 1).first ?? ""
            let bounds = head.split(separator: "-")
            if bounds.count == 2, let lo = UInt(bounds[0], radix: 16), UInt(bounds[1], radix: 16) != nil {
                inside = lo == UInt(bitPattern: base)
            } else if inside, line.hasPrefix("Rss:") {
                return Int(line.split(separator: " ")[1])! * 1024
            }
        }
        Issue.record("no mapping at \(base)")
        return -1
    }

    @Test func touchPagesLeavesReleasedTensorsOut() throws {
        let path = try Self.twoTensorFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try GGUFFile(path: path)
        let base = try #require(file.bytes.baseAddress)
        var reports: [Double] = []
        file.touchPages { reports.append($0) }
        #expect(reports.last == 1 && reports == reports.sorted())
        let all = try Self.residentBytes(of: base)
        #expect(all >= 2 * Self.tensorBytes, "touched: \(all) bytes resident")

        let a = try file.requireTensor("a"), b = try file.requireTensor("b")
        file.releaseResidentPages(of: a)
        let released = try Self.residentBytes(of: base)
        #expect(all - released >= Self.tensorBytes - Self.slack, "released a: \(all) -> \(released) bytes")
        file.touchPages { _ in }
        let touchedAgain = try Self.residentBytes(of: base)
        #expect(touchedAgain <= released + Self.slack, "touchPages brought a back: \(released) -> \(touchedAgain) bytes")
        // The released bytes are still readable, unchanged (read back from the file).
        let values = file.data(for: a).bindMemory(to: Float.self), others = file.data(for: b).bindMemory(to: Float.self)
        #expect(values[12345] == 12345 && others[12345] == -12345)
    }

    @Test func growingPrefixesReleaseAsTheyGrow() throws {
        let path = try Self.twoTensorFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try GGUFFile(path: path)
        let base = try #require(file.bytes.baseAddress)
        file.touchPages { _ in }
        let a = try file.requireTensor("a")
        let all = try Self.residentBytes(of: base)
        var last = all
        for prefix in [Self.tensorBytes / 4 + 100, Self.tensorBytes / 2, Self.tensorBytes / 2 + 1, Self.tensorBytes] {
            file.releaseResidentPages(of: a, prefix: prefix)
            let now = try Self.residentBytes(of: base)
            // At least the prefix leaves (more may: a 2 MiB folio mapped whole across the
            // prefix's end is unmapped whole, and comes back page by page when read).
            #expect(now <= last && all - now >= prefix - Self.slack, "prefix \(prefix): \(all) -> \(now)")
            last = now
        }
        file.touchPages { _ in }
        let after = try Self.residentBytes(of: base)
        #expect(after <= all - Self.tensorBytes + Self.slack, "touchPages brought the released prefixes back: \(all) -> \(after)")
    }
    #endif

    /// A file held in memory has nothing to release: the calls change nothing.
    @Test func bytesInMemoryAreUnaffected() throws {
        let path = try Self.twoTensorFile()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let file = try GGUFFile(bytes: bytes)
        let a = try file.requireTensor("a")
        file.releaseResidentPages(of: a, prefix: 1 << 20)
        file.releaseResidentPages(of: a)
        var reports = 0
        file.touchPages { _ in reports += 1 }
        #expect(reports > 0)
        #expect(file.data(for: a).bindMemory(to: Float.self)[777] == 777)
    }
}
