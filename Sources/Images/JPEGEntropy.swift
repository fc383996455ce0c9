/// The Huffman entropy coding of JPEG (ITU-T T.81, Annex C and F.2.2): the code tables, the
/// bit reader over entropy-coded segments, and the decoding of one 8x8 block in a baseline,
/// progressive-DC or progressive-AC scan. Coefficients land in natural (row-major) order.

/// Position in the 8x8 block (row-major) of the k-th coefficient in zig-zag order. Entries
/// 64...79 repeat 63, so that a corrupt run length that carries k past 63 writes the last
/// coefficient, as stb_image does, rather than out of the block.
let jpegNaturalOrder: [Int] =
    [
        0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
        35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63
    ] + [Int](repeating: 63, count: 16)

/// A Huffman table from a DHT segment (T.81 C.2: code lengths to canonical codes).
struct JPEGHuffmanTable {
    static let fastBits = 9
    /// Indexed by the next `fastBits` bits: `length << 8 | symbol`, or 0 for longer codes.
    var fast: [UInt16]
    /// `maxCode[n]`: one more than the largest code of n bits, left-aligned in 16 bits
    /// (so that it compares with the next 16 bits of the stream); n = 1...16.
    var maxCode: [UInt32]
    /// `symbolOffset[n]`: index in `symbols` of the first n-bit code, minus that code.
    var symbolOffset: [Int]
    var symbols: [UInt8]

    /// `counts[n - 1]` codes of n bits (n = 1...16) for `symbols`, in order. Nil when the
    /// counts cannot be codes (more codes of a length than that length can hold).
    init?(counts: [Int], symbols: [UInt8]) {
        var fast = [UInt16](repeating: 0, count: 1 << Self.fastBits)
        var maxCode = [UInt32](repeating: 0, count: 18)
        var symbolOffset = [Int](repeating: 0, count: 18)
        var code = 0
        var index = 0
        for length in 1...16 {
            symbolOffset[length] = index - code
            for _ in 0..<counts[length - 1] {
                // Past the last code of this length: the counts over-subscribe the code space.
                guard code < 1 << length else { return nil }
                if length <= Self.fastBits {
                    let first = code << (Self.fastBits - length)
                    for j in 0..<(1 << (Self.fastBits - length)) { fast[first + j] = UInt16(length << 8) | UInt16(symbols[index]) }
                }
                code += 1
                index += 1
            }
            maxCode[length] = UInt32(code) << UInt32(16 - length)
            code <<= 1
        }
        maxCode[17] = .max
        self.fast = fast
        self.maxCode = maxCode
        self.symbolOffset = symbolOffset
        self.symbols = symbols
    }
}

/// Reads an entropy-coded segment most significant bit first, removing the 0x00 stuffed
/// after each 0xFF data byte. At a marker or at the end of the input it stops reading and
/// supplies zero bits, as stb_image does: decoding always terminates (block counts bound it),
/// and the caller then finds the marker, or reports the missing end of the file.
struct JPEGBitReader {
    let bytes: [UInt8]
    var position: Int
    /// Unread bits, the next one in bit 63.
    var buffer: UInt64 = 0
    var count = 0
    /// The marker code that stopped reading, if any.
    var marker: UInt8?
    var reachedEnd = false

    init(bytes: [UInt8], position: Int) {
        self.bytes = bytes
        self.position = position
    }

    /// Tops the buffer up to at least 57 bits.
    @inline(__always)
    mutating func fill() {
        while count <= 56 {
            var byte: UInt8 = 0
            if marker == nil && !reachedEnd {
                if position >= bytes.count {
                    reachedEnd = true
                } else if bytes[position] != 0xFF {
                    byte = bytes[position]
                    position += 1
                } else {
                    var next = position + 1
                    while next < bytes.count && bytes[next] == 0xFF { next += 1 }  // fill bytes
                    if next >= bytes.count {
                        reachedEnd = true
                        position = next
                    } else if bytes[next] == 0 {
                        byte = 0xFF
                        position = next + 1
                    } else {
                        marker = bytes[next]
                        position = next + 1
                    }
                }
            }
            buffer |= UInt64(byte) << UInt64(56 - count)
            count += 8
        }
    }

    /// Forgets buffered bits and the pending marker: the state after a restart marker.
    mutating func reset() {
        buffer = 0
        count = 0
        marker = nil
    }

    @inline(__always)
    mutating func bits(_ n: Int) -> Int {
        if n == 0 { return 0 }
        if count < n { fill() }
        let value = Int(buffer >> UInt64(64 - n))
        buffer <<= UInt64(n)
        count -= n
        return value
    }

    @inline(__always)
    mutating func bit() -> Bool { bits(1) == 1 }

    /// T.81 F.2.2.1 RECEIVE and EXTEND: `n` bits as a signed magnitude category value.
    @inline(__always)
    mutating func receiveExtend(_ n: Int) -> Int {
        if n == 0 { return 0 }
        let value = bits(n)
        return value < 1 << (n - 1) ? value - (1 << n) + 1 : value
    }

    /// The next Huffman-coded symbol, or nil when the bits are no code of `table`.
    @inline(__always)
    mutating func decode(_ table: JPEGHuffmanTable) -> Int? {
        if count < 16 { fill() }
        let entry = Int(table.fast[Int(buffer >> UInt64(64 - JPEGHuffmanTable.fastBits))])
        if entry != 0 {
            let length = entry >> 8
            buffer <<= UInt64(length)
            count -= length
            return entry & 0xFF
        }
        let next16 = UInt32(truncatingIfNeeded: buffer >> 48)
        var length = JPEGHuffmanTable.fastBits + 1
        while next16 >= table.maxCode[length] { length += 1 }
        guard length <= 16 else { return nil }
        let code = Int(next16 >> UInt32(16 - length))
        let index = code + table.symbolOffset[length]
        guard index >= 0 && index < table.symbols.count else { return nil }
        buffer <<= UInt64(length)
        count -= length
        return Int(table.symbols[index])
    }
}

/// Why a block could not be decoded; the scan decoder adds where.
enum JPEGBlockError: Error {
    case invalidCode(String)
    case overflow(String)
}

/// Decodes blocks of one scan, keeping the state that runs across blocks: the DC
/// predictions of the components and the end-of-band run of progressive AC scans.
struct JPEGBlockDecoder {
    var reader: JPEGBitReader
    var dcPredictions: [Int] = [0, 0, 0, 0]
    var endOfBandRun = 0

    /// Clears the predictions and the end-of-band run, as a restart marker does.
    mutating func restart() {
        reader.reset()
        dcPredictions = [0, 0, 0, 0]
        endOfBandRun = 0
    }

    /// The next DC coefficient of `component`: the predicted value plus the coded difference.
    @inline(__always)
    private mutating func nextDC(_ table: JPEGHuffmanTable, component: Int) throws(JPEGBlockError) -> Int {
        guard let category = reader.decode(table), category <= 15 else { throw .invalidCode("DC code") }
        let dc = dcPredictions[component] + reader.receiveExtend(category)
        guard dc >= Int(Int32.min) && dc <= Int(Int32.max) else { throw .overflow("DC prediction overflows") }
        dcPredictions[component] = dc
        return dc
    }

    /// A baseline (sequential) block: DC and all 63 AC coefficients, dequantized into
    /// `block` (64 values, natural order; stored in 16 bits as stb_image stores them).
    mutating func decodeBaseline(
        into block: UnsafeMutablePointer<Int16>, dc: JPEGHuffmanTable, ac: JPEGHuffmanTable, quantization: [Int], component: Int
    ) throws(JPEGBlockError) {
        block.update(repeating: 0, count: 64)
        let dcValue = try nextDC(dc, component: component) * quantization[0]
        guard let dcSample = Int16(exactly: dcValue) else { throw .overflow("dequantized DC \(dcValue) does not fit 16 bits") }
        block[0] = dcSample
        var k = 1
        while k < 64 {
            guard let runSize = reader.decode(ac) else { throw .invalidCode("AC code") }
            let run = runSize >> 4
            let size = runSize & 15
            if size == 0 {
                if runSize != 0xF0 { break }  // end of block (stb_image reads any run with size 0 but 15 as one)
                k += 16
                continue
            }
            k += run
            let position = jpegNaturalOrder[k]
            k += 1
            block[position] = Int16(truncatingIfNeeded: reader.receiveExtend(size) * quantization[position])
        }
    }

    /// The first scan of a DC band (progressive, T.81 G.1.2.1): the DC coefficient scaled by
    /// 2^successiveLow, and the rest of the block cleared.
    mutating func decodeFirstDC(
        into block: UnsafeMutablePointer<Int16>, table: JPEGHuffmanTable, component: Int, successiveLow: Int
    ) throws(JPEGBlockError) {
        block.update(repeating: 0, count: 64)
        let dc = try nextDC(table, component: component) * (1 << successiveLow)
        guard let value = Int16(exactly: dc) else { throw .overflow("DC \(dc) does not fit 16 bits") }
        block[0] = value
    }

    /// A DC refinement scan: one more bit of the DC coefficient.
    mutating func refineDC(into block: UnsafeMutablePointer<Int16>, successiveLow: Int) {
        if reader.bit() { block[0] = block[0] &+ Int16(truncatingIfNeeded: 1 << successiveLow) }
    }

    /// The first scan of an AC band (T.81 G.1.2.2): coefficients start...end, scaled by
    /// 2^successiveLow, with end-of-band runs spanning blocks.
    mutating func decodeFirstAC(
        into block: UnsafeMutablePointer<Int16>, table: JPEGHuffmanTable, start: Int, end: Int, successiveLow: Int
    ) throws(JPEGBlockError) {
        if endOfBandRun > 0 {
            endOfBandRun -= 1
            return
        }
        var k = start
        while k <= end {
            guard let runSize = reader.decode(table) else { throw .invalidCode("AC code") }
            let run = runSize >> 4
            let size = runSize & 15
            if size == 0 {
                if run < 15 {
                    endOfBandRun = (1 << run) + reader.bits(run) - 1
                    return
                }
                k += 16
                continue
            }
            k += run
            let position = jpegNaturalOrder[k]
            k += 1
            block[position] = Int16(truncatingIfNeeded: reader.receiveExtend(size) * (1 << successiveLow))
        }
    }

    /// An AC refinement scan (T.81 G.1.2.3): one more bit of every coefficient already
    /// non-zero, and new coefficients of magnitude 1 placed among the zeros.
    mutating func refineAC(
        into block: UnsafeMutablePointer<Int16>, table: JPEGHuffmanTable, start: Int, end: Int, successiveLow: Int
    ) throws(JPEGBlockError) {
        let bit = Int16(truncatingIfNeeded: 1 << successiveLow)
        var k = start
        if endOfBandRun > 0 {
            endOfBandRun -= 1
            while k <= end {
                refineNonZero(block, at: jpegNaturalOrder[k], bit: bit)
                k += 1
            }
            return
        }
        while k <= end {
            guard let runSize = reader.decode(table) else { throw .invalidCode("AC refinement code") }
            var zerosToSkip = runSize >> 4
            let size = runSize & 15
            var newValue: Int16 = 0
            if size == 0 {
                if zerosToSkip < 15 {
                    // End of band: this block's remaining non-zero coefficients still get
                    // their correction bits.
                    endOfBandRun = (1 << zerosToSkip) - 1 + reader.bits(zerosToSkip)
                    zerosToSkip = 64
                }
            } else {
                guard size == 1 else { throw .invalidCode("AC refinement magnitude \(size), not 1") }
                newValue = reader.bit() ? bit : -bit
            }
            while k <= end {
                let position = jpegNaturalOrder[k]
                k += 1
                if block[position] != 0 {
                    refineNonZero(block, at: position, bit: bit)
                } else {
                    if zerosToSkip == 0 {
                        block[position] = newValue
                        break
                    }
                    zerosToSkip -= 1
                }
            }
        }
    }

    @inline(__always)
    private mutating func refineNonZero(_ block: UnsafeMutablePointer<Int16>, at position: Int, bit: Int16) {
        let value = block[position]
        guard value != 0, reader.bit(), value & bit == 0 else { return }
        block[position] = value > 0 ? value &+ bit : value &- bit
    }
}
