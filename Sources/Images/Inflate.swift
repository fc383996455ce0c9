/// A canonical Huffman code of DEFLATE (RFC 1951 section 3.2.2), read least significant
/// bit first. Codes of up to `fastBits` bits resolve with one table look-up; longer ones bit
/// by bit from the per-length counts.
struct DeflateHuffmanCode {
    static let fastBits = 9
    /// Indexed by the next `fastBits` input bits: `symbol << 4 | length`, or 0 when the code
    /// is longer than `fastBits` (or not assigned).
    var fast: [UInt16]
    /// `counts[n]`: how many codes have length n (1...15).
    var counts: [Int]
    /// Symbols ordered by code (by length, then by symbol value).
    var symbols: [UInt16]

    /// The code whose symbol `i` has length `lengths[i]` (0: unused). An over-subscribed set of
    /// lengths (more codes than the lengths can number) is invalid and returns nil; an
    /// incomplete set is accepted, as stb_image and the one-code distance trees of real
    /// encoders need, and its unassigned codes fail when they are met.
    init?(lengths: ArraySlice<UInt8>) {
        var counts = [Int](repeating: 0, count: 16)
        for length in lengths { counts[Int(length)] += 1 }
        counts[0] = 0
        var left = 1
        for n in 1...15 {
            left = left << 1 - counts[n]
            if left < 0 { return nil }
        }
        // The first code of each length, and where its symbols start in `symbols`.
        var nextCode = [Int](repeating: 0, count: 16)
        var offsets = [Int](repeating: 0, count: 16)
        var code = 0
        for n in 1...15 {
            code = (code + counts[n - 1]) << 1
            nextCode[n] = code
            offsets[n] = n == 1 ? 0 : offsets[n - 1] + counts[n - 1]
        }
        var fast = [UInt16](repeating: 0, count: 1 << Self.fastBits)
        for (symbol, lengthByte) in lengths.enumerated() where lengthByte != 0 {
            let length = Int(lengthByte)
            let codeValue = nextCode[length]
            nextCode[length] += 1
            if length <= Self.fastBits {
                // The stream sends the code's most significant bit first, into the low bit.
                var reversed = 0
                for bit in 0..<length where codeValue & (1 << bit) != 0 { reversed |= 1 << (length - 1 - bit) }
                let entry = UInt16(symbol << 4 | length)
                var index = reversed
                while index < fast.count {
                    fast[index] = entry
                    index += 1 << length
                }
            }
        }
        // Symbols in code order: by length, then by symbol value (canonical order).
        var symbols = [UInt16](repeating: 0, count: lengths.count)
        var position = offsets
        for (symbol, lengthByte) in lengths.enumerated() where lengthByte != 0 {
            symbols[position[Int(lengthByte)]] = UInt16(symbol)
            position[Int(lengthByte)] += 1
        }
        self.fast = fast
        self.counts = counts
        self.symbols = symbols
    }
}

/// Why inflating stopped; the PNG decoder turns these into `ImageError`s with file offsets.
enum InflateFailure: Error {
    /// The stream ended early; `at` is the offset in the compressed data.
    case truncated(at: Int, reading: String)
    /// Invalid data at offset `at` of the compressed data.
    case corrupt(at: Int, reason: String)
    /// The stream produces more than `limit` bytes.
    case outputLimitExceeded(limit: Int)
}

/// A zlib stream (RFC 1950) of DEFLATE blocks: stored, fixed and dynamic Huffman. Output is
/// bounded: a stream that would produce more than `outputLimit` bytes is refused at that
/// point, so a decompression bomb costs no more than the image it claims to be.
struct Inflater {
    private let input: [UInt8]
    private var position = 0
    private var bitBuffer: UInt64 = 0
    private var bitCount = 0
    private var output: [UInt8]
    private var written = 0

    /// Inflates the zlib stream `input`, producing at most `outputLimit` bytes, and checks its
    /// Adler-32. Returns the output (possibly shorter than the limit).
    static func inflateZlib(_ input: [UInt8], outputLimit: Int) throws(InflateFailure) -> [UInt8] {
        var inflater = Inflater(input: input, outputLimit: outputLimit)
        try inflater.readZlibHeader()
        try inflater.inflateBlocks()
        try inflater.checkAdler32()
        inflater.output.removeSubrange(inflater.written...)
        return inflater.output
    }

    private init(input: [UInt8], outputLimit: Int) {
        self.input = input
        self.output = [UInt8](repeating: 0, count: outputLimit)
    }

    private mutating func readZlibHeader() throws(InflateFailure) {
        guard input.count >= 2 else { throw .truncated(at: input.count, reading: "the zlib header") }
        let cmf = Int(input[0])
        let flg = Int(input[1])
        guard (cmf << 8 | flg) % 31 == 0 else { throw .corrupt(at: 0, reason: "bad zlib header check bits (0x\(hex(cmf))\(hex(flg)))") }
        guard cmf & 0x0F == 8 else { throw .corrupt(at: 0, reason: "zlib compression method \(cmf & 0x0F), not 8 (DEFLATE)") }
        guard flg & 0x20 == 0 else { throw .corrupt(at: 1, reason: "zlib preset dictionary, which PNG forbids") }
        position = 2
    }

    private mutating func inflateBlocks() throws(InflateFailure) {
        var isFinal = false
        while !isFinal {
            isFinal = try bits(1) == 1
            switch try bits(2) {
            case 0: try copyStoredBlock()
            case 1: try inflateHuffmanBlock(literals: Self.fixedLiteralCode, distances: Self.fixedDistanceCode)
            case 2:
                let (literals, distances) = try readDynamicCodes()
                try inflateHuffmanBlock(literals: literals, distances: distances)
            default: throw .corrupt(at: position, reason: "DEFLATE block type 3 (reserved)")
            }
        }
    }

    // MARK: Bits

    /// Fills the bit buffer with whole bytes while there is input and room.
    @inline(__always)
    private mutating func refill() {
        while bitCount <= 56 && position < input.count {
            bitBuffer |= UInt64(input[position]) << UInt64(bitCount)
            position += 1
            bitCount += 8
        }
    }

    /// The next `count` (0...32) bits, least significant first.
    @inline(__always)
    private mutating func bits(_ count: Int) throws(InflateFailure) -> Int {
        if bitCount < count {
            refill()
            guard bitCount >= count else { throw .truncated(at: input.count, reading: "DEFLATE data") }
        }
        let value = Int(truncatingIfNeeded: bitBuffer & ((1 << UInt64(count)) - 1))
        bitBuffer >>= UInt64(count)
        bitCount -= count
        return value
    }

    @inline(__always)
    private mutating func decodeSymbol(_ code: DeflateHuffmanCode) throws(InflateFailure) -> Int {
        if bitCount < 15 { refill() }
        let entry = Int(code.fast[Int(truncatingIfNeeded: bitBuffer) & ((1 << DeflateHuffmanCode.fastBits) - 1)])
        if entry != 0 {
            let length = entry & 15
            // The look-up saw zeros past the end of the input: the code is not all there.
            guard length <= bitCount else { throw .truncated(at: input.count, reading: "a DEFLATE Huffman code") }
            bitBuffer >>= UInt64(length)
            bitCount -= length
            return entry >> 4
        }
        // Longer codes, one bit at a time (RFC 1951's canonical decoding).
        var codeValue = 0
        var first = 0
        var index = 0
        for length in 1...15 {
            guard length <= bitCount else { throw .truncated(at: input.count, reading: "a DEFLATE Huffman code") }
            codeValue |= Int((bitBuffer >> UInt64(length - 1)) & 1)
            let count = code.counts[length]
            if codeValue - first < count {
                bitBuffer >>= UInt64(length)
                bitCount -= length
                return Int(code.symbols[index + codeValue - first])
            }
            index += count
            first = (first + count) << 1
            codeValue <<= 1
        }
        throw .corrupt(at: position, reason: "a Huffman code that the block's code table does not assign")
    }

    // MARK: Blocks

    private mutating func copyStoredBlock() throws(InflateFailure) {
        // Drop to a byte boundary, then give back the whole bytes still in the buffer.
        bitBuffer >>= UInt64(bitCount & 7)
        bitCount -= bitCount & 7
        position -= bitCount / 8
        bitBuffer = 0
        bitCount = 0
        guard position + 4 <= input.count else { throw .truncated(at: input.count, reading: "a stored block's length") }
        let length = Int(input[position]) | Int(input[position + 1]) << 8
        let complement = Int(input[position + 2]) | Int(input[position + 3]) << 8
        guard length ^ 0xFFFF == complement else {
            throw .corrupt(at: position, reason: "stored block length \(length) does not match its complement \(complement)")
        }
        position += 4
        guard position + length <= input.count else { throw .truncated(at: input.count, reading: "a stored block of \(length) bytes") }
        guard written + length <= output.count else { throw .outputLimitExceeded(limit: output.count) }
        output.withUnsafeMutableBufferPointer { out in
            input.withUnsafeBufferPointer { source in
                for i in 0..<length { out[written + i] = source[position + i] }
            }
        }
        written += length
        position += length
    }

    private static let lengthBase: [Int] = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258
    ]
    private static let lengthExtraBits: [Int] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    private static let distanceBase: [Int] = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
        8193, 12289, 16385, 24577
    ]
    private static let distanceExtraBits: [Int] = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13
    ]

    /// RFC 1951 3.2.6: literal/length codes 0-143 have 8 bits, 144-255 9, 256-279 7, 280-287 8;
    /// the 32 distance codes 5 bits.
    private static let fixedLiteralCode: DeflateHuffmanCode = {
        let lengths =
            [UInt8](repeating: 8, count: 144) + [UInt8](repeating: 9, count: 112) + [UInt8](repeating: 7, count: 24)
            + [UInt8](repeating: 8, count: 8)
        return DeflateHuffmanCode(lengths: lengths[...])!
    }()
    private static let fixedDistanceCode = DeflateHuffmanCode(lengths: [UInt8](repeating: 5, count: 32)[...])!

    /// Reads a dynamic block's code-length code, then the literal/length and distance code
    /// lengths it encodes (RFC 1951 3.2.7).
    private mutating func readDynamicCodes() throws(InflateFailure) -> (DeflateHuffmanCode, DeflateHuffmanCode) {
        let literalCount = try bits(5) + 257
        let distanceCount = try bits(5) + 1
        let codeLengthCount = try bits(4) + 4
        let codeLengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
        var codeLengthLengths = [UInt8](repeating: 0, count: 19)
        for i in 0..<codeLengthCount { codeLengthLengths[codeLengthOrder[i]] = UInt8(try bits(3)) }
        guard let codeLengthCode = DeflateHuffmanCode(lengths: codeLengthLengths[...]) else {
            throw .corrupt(at: position, reason: "over-subscribed code-length code")
        }
        let total = literalCount + distanceCount
        var lengths = [UInt8]()
        lengths.reserveCapacity(total)
        while lengths.count < total {
            let symbol = try decodeSymbol(codeLengthCode)
            var repeated: UInt8 = 0
            let count: Int
            switch symbol {
            case 0...15:
                lengths.append(UInt8(symbol))
                continue
            case 16:
                guard let previous = lengths.last else {
                    throw .corrupt(at: position, reason: "code length 16 (repeat) with nothing to repeat")
                }
                repeated = previous
                count = try bits(2) + 3
            case 17: count = try bits(3) + 3
            default: count = try bits(7) + 11
            }
            guard lengths.count + count <= total else {
                throw .corrupt(at: position, reason: "code lengths run past the \(total) the block declares")
            }
            lengths.append(contentsOf: repeatElement(repeated, count: count))
        }
        guard let literals = DeflateHuffmanCode(lengths: lengths[0..<literalCount]) else {
            throw .corrupt(at: position, reason: "over-subscribed literal/length code")
        }
        guard let distances = DeflateHuffmanCode(lengths: lengths[literalCount...]) else {
            throw .corrupt(at: position, reason: "over-subscribed distance code")
        }
        return (literals, distances)
    }

    private mutating func inflateHuffmanBlock(literals: DeflateHuffmanCode, distances: DeflateHuffmanCode) throws(InflateFailure) {
        let limit = output.count
        while true {
            let symbol = try decodeSymbol(literals)
            if symbol < 256 {
                guard written < limit else { throw .outputLimitExceeded(limit: limit) }
                output[written] = UInt8(truncatingIfNeeded: symbol)
                written += 1
                continue
            }
            if symbol == 256 { return }
            let lengthIndex = symbol - 257
            guard lengthIndex < 29 else { throw .corrupt(at: position, reason: "length symbol \(symbol), which DEFLATE does not define") }
            let length = Self.lengthBase[lengthIndex] + (try bits(Self.lengthExtraBits[lengthIndex]))
            let distanceSymbol = try decodeSymbol(distances)
            guard distanceSymbol < 30 else {
                throw .corrupt(at: position, reason: "distance symbol \(distanceSymbol), which DEFLATE does not define")
            }
            let distance = Self.distanceBase[distanceSymbol] + (try bits(Self.distanceExtraBits[distanceSymbol]))
            guard distance <= written else {
                throw .corrupt(at: position, reason: "a match \(distance) bytes back, before the start of the data (\(written) bytes out)")
            }
            guard written + length <= limit else { throw .outputLimitExceeded(limit: limit) }
            let start = written
            output.withUnsafeMutableBufferPointer { out in
                // Byte by byte: a match may overlap the bytes it is producing.
                for i in 0..<length { out[start + i] = out[start - distance + i] }
            }
            written += length
        }
    }

    /// The Adler-32 of the output (RFC 1950), big-endian after the last block.
    private mutating func checkAdler32() throws(InflateFailure) {
        bitBuffer >>= UInt64(bitCount & 7)
        bitCount -= bitCount & 7
        position -= bitCount / 8
        bitBuffer = 0
        bitCount = 0
        guard position + 4 <= input.count else { throw .truncated(at: input.count, reading: "the zlib Adler-32 checksum") }
        let stored =
            UInt32(input[position]) << 24 | UInt32(input[position + 1]) << 16 | UInt32(input[position + 2]) << 8
            | UInt32(input[position + 3])
        let computed = Self.adler32(output[0..<written])
        guard stored == computed else {
            throw .corrupt(
                at: position, reason: "zlib Adler-32 is 0x\(String(stored, radix: 16)), the data's is 0x\(String(computed, radix: 16))")
        }
        position += 4
    }

    static func adler32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        var index = bytes.startIndex
        while index < bytes.endIndex {
            // 5552 bytes is the most that cannot overflow 32 bits before the modulo.
            let end = min(index + 5552, bytes.endIndex)
            for i in index..<end {
                a &+= UInt32(bytes[i])
                b &+= a
            }
            a %= 65521
            b %= 65521
            index = end
        }
        return b << 16 | a
    }

    private func hex(_ byte: Int) -> String {
        let s = String(byte, radix: 16)
        return s.count == 1 ? "0" + s : s
    }
}
