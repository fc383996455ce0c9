import Foundation
import GGUF
import TestSupport
import Testing

@testable import Kernels

/// The products of several activation rows at once (batched decoding): each row's result
/// must be bit for bit what that row gets alone, whatever the other rows are, however many
/// there are, and wherever the row sits.
@Suite struct MultiRowTests {
    /// 37 weight rows (tiles of 8-row groups and a tail), 5 activation rows with
    /// outliers, 1 and 2 threads, every kernel type (the float types read the floats kept
    /// beside the 8-bit blocks).
    @Test(arguments: GGMLType.kernelTypes)
    func multiRowMatvecEqualsMatvecOfEachRow(_ type: GGMLType) throws {
        let rows = 37, cols = testCols(type), tokens = 5
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 50 + UInt64(type.rawValue))
        var rng = SeededRandom(seed: 9)
        var x = rng.normal(tokens * cols, scale: 1.3)
        for j in stride(from: 1, to: x.count, by: 89) { x[j] *= 30 }
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols, keepingFloats: true)
        #expect(batch.holdsFloats && batch.count == tokens * cols)
        let one = QuantizedActivations(capacity: cols)
        for pool in [nil, ThreadPool(threads: 2)] {
            try bytes.withUnsafeBytes { raw in
                for (layout, m) in decodeLayouts(try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)) {
                    var all = [Float](repeating: .nan, count: tokens * rows)
                    m.matvec(batch, rows: 0..<tokens, into: &all, pool: pool)
                    // Rows 2..<4 only: the others stay untouched.
                    var some = [Float](repeating: .nan, count: tokens * rows)
                    m.matvec(batch, rows: 2..<4, into: &some, pool: pool)
                    for t in 0..<tokens {
                        x.withUnsafeBufferPointer { one.quantize($0.baseAddress! + t * cols, count: cols) }
                        var alone = [Float](repeating: .nan, count: rows)
                        m.matvec(one, into: &alone, pool: pool)
                        let multi = Array(all[(t * rows)..<((t + 1) * rows)])
                        #expect(sameBits(multi, alone), "\(type) \(layout) row \(t): \(firstDifference(multi, alone))")
                        let partial = Array(some[(t * rows)..<((t + 1) * rows)])
                        if (2..<4).contains(t) {
                            #expect(sameBits(partial, alone), "\(type) \(layout) row \(t) of 2..<4")
                        } else {
                            let untouched = partial.allSatisfy { $0.isNaN }
                            #expect(untouched, "\(type) \(layout) row \(t) is outside 2..<4")
                        }
                    }
                }
            }
        }
    }

    /// Several products that read one input in one parallel loop (`WeightMatrix.matvec`
    /// of a list: a decode step's q/k/v and gate/up) against each product's own matvec,
    /// bit for bit: every kernel type beside an interleaved Q4_0 matrix and a K-quant one
    /// (units of 8-row groups and of rows in one queue), row counts with tails, one and
    /// three activation rows, no pool and 2 or 3 threads (chunks crossing the matrices'
    /// edges); and each product over its own activation rows (a mixture's experts).
    @Test(arguments: GGMLType.kernelTypes)
    func productsInOneLoopEqualEachProduct(_ type: GGMLType) throws {
        let cols = 512, tokens = 4
        let shapes: [(type: GGMLType, rows: Int)] = [(type, 37), (.q4_0, 69), (.q6_K, 11), (type, 8)]
        let weights = shapes.enumerated().map { i, s in randomWeights(s.type, rows: s.rows, cols: cols, seed: 300 + UInt64(i) * 7) }
        var rng = SeededRandom(seed: 33)
        var x = rng.normal(tokens * cols, scale: 1.1)
        for j in stride(from: 3, to: x.count, by: 71) { x[j] *= 25 }
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols, keepingFloats: true)
        let pointers = weights.map { w in
            let p = UnsafeMutableRawPointer.allocate(byteCount: w.count, alignment: 64)
            p.copyMemory(from: w, byteCount: w.count)
            return p
        }
        defer { pointers.forEach { $0.deallocate() } }
        var matrices: [WeightMatrix] = []
        for (i, s) in shapes.enumerated() {
            let m = try WeightMatrix(type: s.type, rows: s.rows, cols: cols, data: pointers[i])
            // The first of each type's pair interleaved where the format has a copy, the last not.
            matrices.append(i == shapes.count - 1 ? m : m.interleavedForDecode())
        }
        for pool in [nil, ThreadPool(threads: 2), ThreadPool(threads: 3)] {
            for activationRows in [1..<2, 0..<3] {
                let outputs = matrices.map { UnsafeMutablePointer<Float>.allocate(capacity: tokens * $0.rows) }
                defer { outputs.forEach { $0.deallocate() } }
                for (m, y) in zip(matrices, outputs) { y.initialize(repeating: .nan, count: tokens * m.rows) }
                WeightMatrix.matvec(zip(matrices, outputs).map { (matrix: $0, y: $1) }, batch, rows: activationRows, pool: pool)
                // Each product over its own activation rows (a mixture's experts).
                let ownRows = matrices.indices.map { i in (i % 3)..<(i % 3 + 1 + i % 2) }
                let outputsOwn = matrices.map { UnsafeMutablePointer<Float>.allocate(capacity: tokens * $0.rows) }
                defer { outputsOwn.forEach { $0.deallocate() } }
                for (m, y) in zip(matrices, outputsOwn) { y.initialize(repeating: .nan, count: tokens * m.rows) }
                WeightMatrix.matvec(
                    matrices.indices.map { (matrix: matrices[$0], rows: ownRows[$0], y: outputsOwn[$0]) }, batch, pool: pool)
                for (i, m) in matrices.enumerated() {
                    var alone = [Float](repeating: .nan, count: tokens * m.rows)
                    m.matvec(batch, rows: ownRows[i], into: &alone, pool: nil)
                    let together = Array(UnsafeBufferPointer(start: outputsOwn[i], count: tokens * m.rows))
                    #expect(
                        sameBits(together, alone),
                        "\(shapes[i].type) product \(i) over rows \(ownRows[i]): \(firstDifference(together, alone))")
                }
                for (i, m) in matrices.enumerated() {
                    var alone = [Float](repeating: .nan, count: tokens * m.rows)
                    m.matvec(batch, rows: activationRows, into: &alone, pool: nil)
                    let together = Array(UnsafeBufferPointer(start: outputs[i], count: tokens * m.rows))
                    #expect(
                        sameBits(together, alone),
                        "\(shapes[i].type) product \(i), rows \(activationRows), \(pool?.threads ?? 1) threads: \(firstDifference(together, alone))"
                    )
                }
            }
        }
    }

    /// The multi-row kernels (each weight block unpacked once for 2 or 4 activation rows)
    /// against the matvec of each row alone, bit for bit: every kernel type, 1 to 9
    /// activation rows starting at row 0, 1 or 2 of the buffer (groups of four, a pair and
    /// a single row), blocks per row odd and even (the pair formats' tail block), weight
    /// rows of two tiles and an odd tail (partial 8-row groups at the tile and chunk
    /// edges), 1 and 2 threads.
    @Test(arguments: GGMLType.kernelTypes)
    func multiRowKernelsEqualMatvecOfEachRow(_ type: GGMLType) throws {
        let pool = ThreadPool(threads: 2)
        for cols in [testCols(type), testCols(type) + type.blockSize] {
            let rowBytes = type.rowBytes(count: cols)!
            let tile = max(8, 16_384 / rowBytes / 8 * 8)
            let rows = 2 * tile + 13, tokens = 11
            let bytes = randomWeights(type, rows: rows, cols: cols, seed: 90 + UInt64(type.rawValue) + UInt64(cols))
            var rng = SeededRandom(seed: 21 + UInt64(cols))
            var x = rng.normal(tokens * cols, scale: 0.8)
            for j in stride(from: 5, to: x.count, by: 61) { x[j] *= 40 }
            let batch = QuantizedActivations(capacity: tokens * cols)
            batch.quantizeRows(x, rows: tokens, cols: cols, keepingFloats: true, pool: pool)
            let one = QuantizedActivations(capacity: cols)
            try bytes.withUnsafeBytes { raw in
                for (layout, m) in decodeLayouts(try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)) {
                    var alone: [[Float]] = []
                    for t in 0..<tokens {
                        x.withUnsafeBufferPointer { one.quantize($0.baseAddress! + t * cols, count: cols) }
                        var y = [Float](repeating: .nan, count: rows)
                        m.matvec(one, into: &y)
                        alone.append(y)
                    }
                    for count in 1...9 {
                        let range = (count % 3)..<(count % 3 + count)
                        for threads in [nil, pool] {
                            var all = [Float](repeating: .nan, count: tokens * rows)
                            m.matvec(batch, rows: range, into: &all, pool: threads)
                            for t in 0..<tokens {
                                let got = Array(all[(t * rows)..<((t + 1) * rows)])
                                if range.contains(t) {
                                    #expect(
                                        sameBits(got, alone[t]),
                                        "\(type) \(layout) cols \(cols), rows \(range), threads \(threads?.threads ?? 1), row \(t): \(firstDifference(got, alone[t]))"
                                    )
                                } else {
                                    let untouched = got.allSatisfy { $0.isNaN }
                                    #expect(untouched, "\(type) \(layout) row \(t) is outside \(range)")
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The matmul of a range of activation rows gives those rows exactly what the matmul
    /// of all of them gives (on VNNI builds the packed integer kernel, elsewhere the
    /// multi-row matvec).
    @Test(arguments: [GGMLType.q8_0, .q4_0, .q4_1, .q5_0, .q5_1, .q4_K])
    func matmulOfARowRangeEqualsThoseRowsOfTheWhole(_ type: GGMLType) throws {
        let rows = 19, cols = testCols(type), tokens = 13
        let bytes = randomWeights(type, rows: rows, cols: cols, seed: 70 + UInt64(type.rawValue))
        var rng = SeededRandom(seed: 10)
        let x = rng.normal(tokens * cols, scale: 1.1)
        let batch = QuantizedActivations(capacity: tokens * cols)
        batch.quantizeRows(x, rows: tokens, cols: cols, pool: ThreadPool(threads: 2))
        let pool = ThreadPool(threads: 2)
        try bytes.withUnsafeBytes { raw in
            let m = try WeightMatrix(type: type, rows: rows, cols: cols, data: raw.baseAddress!)
            var whole = [Float](repeating: .nan, count: tokens * rows)
            m.matmul(batch, rows: tokens, into: &whole, pool: pool)
            for range in [0..<1, 3..<8, 5..<13] {
                var part = [Float](repeating: .nan, count: tokens * rows)
                m.matmul(batch, rows: range, into: &part, pool: pool)
                let inside = Array(part[(range.lowerBound * rows)..<(range.upperBound * rows)])
                let expected = Array(whole[(range.lowerBound * rows)..<(range.upperBound * rows)])
                #expect(sameBits(inside, expected), "\(type) rows \(range): \(firstDifference(inside, expected))")
                let outside = part[..<(range.lowerBound * rows)] + part[(range.upperBound * rows)...]
                let untouched = outside.allSatisfy { $0.isNaN }
                #expect(untouched, "\(type) rows outside \(range)")
            }
        }
    }

    /// Gathered rows (a mixture-of-experts layer's tokens grouped by expert: reordered,
    /// some taken twice, some not at all) are their source rows bit for bit: every
    /// buffer the kernels read, and so every product, equals that of the row quantized on
    /// its own; the floats come along when the source keeps them.
    @Test(arguments: [true, false])
    func gatheredRowsAreTheirSourceRows(keepingFloats: Bool) throws {
        let cols = 32 * 5, tokens = 6, weightRows = 11
        var rng = SeededRandom(seed: 12)
        var x = rng.normal(tokens * cols, scale: 0.9)
        for j in stride(from: 3, to: x.count, by: 71) { x[j] *= 25 }
        let source = QuantizedActivations(capacity: tokens * cols)
        source.quantizeRows(x, rows: tokens, cols: cols, keepingFloats: keepingFloats)
        let order = [4, 0, 4, 2, 5, 1, 4]
        let gathered = QuantizedActivations(capacity: order.count * cols)
        order.withUnsafeBufferPointer { gathered.gatherRows(of: source, $0, cols: cols) }
        #expect(gathered.count == order.count * cols && gathered.blockCount == order.count * cols / 32)
        #expect(gathered.holdsFloats == keepingFloats)

        let alone = QuantizedActivations(capacity: cols)
        let nb = cols / 32
        for (t, r) in order.enumerated() {
            x.withUnsafeBufferPointer { alone.quantize($0.baseAddress! + r * cols, count: cols) }
            let a = gathered.view.row(t, cols: cols), b = alone.view
            #expect((0..<cols).allSatisfy { a.qs[$0] == b.qs[$0] }, "row \(t): levels")
            #expect((0..<nb).allSatisfy { a.d[$0].bitPattern == b.d[$0].bitPattern && a.s[$0].bitPattern == b.s[$0].bitPattern })
            #expect((0..<(2 * nb)).allSatisfy { a.bsums[$0] == b.bsums[$0] })
            #expect((0..<(4 * nb)).allSatisfy { a.d4[$0].bitPattern == b.d4[$0].bitPattern && a.s4[$0].bitPattern == b.s4[$0].bitPattern })
            if keepingFloats { #expect((0..<cols).allSatisfy { a.x[$0].bitPattern == b.x[$0].bitPattern }, "row \(t): floats") }
        }
        // The products agree too, for a format with a min (Q4_1) and one without (Q8_0).
        for type in [GGMLType.q4_1, .q8_0] {
            let bytes = randomWeights(type, rows: weightRows, cols: cols, seed: 80 + UInt64(type.rawValue))
            try bytes.withUnsafeBytes { raw in
                let m = try WeightMatrix(type: type, rows: weightRows, cols: cols, data: raw.baseAddress!)
                var fromGathered = [Float](repeating: .nan, count: order.count * weightRows)
                m.matvec(gathered, rows: 0..<order.count, into: &fromGathered)
                var fromSource = [Float](repeating: .nan, count: tokens * weightRows)
                m.matvec(source, rows: 0..<tokens, into: &fromSource)
                for (t, r) in order.enumerated() {
                    let g = Array(fromGathered[(t * weightRows)..<((t + 1) * weightRows)])
                    let s = Array(fromSource[(r * weightRows)..<((r + 1) * weightRows)])
                    #expect(sameBits(g, s), "\(type) gathered row \(t) (source \(r))")
                }
            }
        }
    }

    /// Rows of a width that is not whole blocks keep only their floats, as one row does.
    @Test func rowsOfFloatsOnly() {
        let cols = 20, rows = 3
        let x = (0..<(rows * cols)).map { Float($0) }
        let a = QuantizedActivations(capacity: rows * cols)
        a.quantizeRows(x, rows: rows, cols: cols, keepingFloats: true)
        #expect(a.holdsFloats && a.blockCount == 0 && a.count == rows * cols)
        for i in 0..<(rows * cols) { #expect(a.x[i] == x[i]) }
    }
}
