import Foundation
import TestSupport
import Testing

@testable import Kernels

/// The causal attention kernels (decode's `query`, prefill's sgemm `causal`) against the
/// scalar reference, and the reference against the definition written out here.
@Suite struct AttentionTests {
    struct Shape: Sendable, CustomTestStringConvertible {
        let start: Int
        let count: Int
        let headDim: Int
        var testDescription: String { "start \(start), \(count) queries, head \(headDim)" }
    }

    /// Several query blocks (count > queryBlock), a block that starts past 0, one query.
    static let shapes = [
        Shape(start: 0, count: 5, headDim: 16), Shape(start: 7, count: 3, headDim: 64),
        Shape(start: 3, count: CausalAttention.queryBlock + 9, headDim: 32), Shape(start: 20, count: 1, headDim: 64)
    ]

    /// Random queries, keys and values of `shape`: queries in rows of `stride`, keys and
    /// values for every position the last query sees.
    static func data(_ s: Shape, stride: Int, seed: UInt64) -> (q: [Float], k: [Float], v: [Float]) {
        var rng = SeededRandom(seed: seed)
        let span = s.start + s.count
        return (rng.normal(s.count * stride), rng.normal(span * s.headDim), rng.normal(span * s.headDim))
    }

    static func reference(_ s: Shape, _ q: [Float], stride: Int, _ k: [Float], _ v: [Float], scale: Float) -> [Float] {
        var out = [Float](repeating: .nan, count: s.count * s.headDim)
        CausalAttention.causalReference(
            queries: q, queryStride: stride, count: s.count, start: s.start, keys: k, values: v,
            headDim: s.headDim, scale: scale, out: &out, outStride: s.headDim)
        return out
    }

    @Test(arguments: shapes)
    func batchedAttentionMatchesReference(_ s: Shape) {
        let stride = s.headDim + 8  // rows of a wider matrix, as the heads of a query row
        let (q, k, v) = Self.data(s, stride: stride, seed: 3)
        let scale = 1 / Float(s.headDim).squareRoot()
        let expected = Self.reference(s, q, stride: stride, k, v, scale: scale)
        var out = [Float](repeating: .nan, count: s.count * stride)
        var scores = [Float](repeating: .nan, count: min(s.count, CausalAttention.queryBlock) * (s.start + s.count))
        CausalAttention.causal(
            queries: q, queryStride: stride, count: s.count, start: s.start, keys: k, values: v,
            headDim: s.headDim, scale: scale, scores: &scores, out: &out, outStride: stride)
        for i in 0..<s.count {
            for c in 0..<s.headDim {
                #expect(abs(out[i * stride + c] - expected[i * s.headDim + c]) <= 1e-5, "query \(i) dim \(c)")
            }
        }
    }

    @Test(arguments: shapes)
    func singleQueryMatchesReference(_ s: Shape) {
        // The last query of the shape, alone: it sees every key.
        let (q, k, v) = Self.data(s, stride: s.headDim, seed: 4)
        let scale: Float = 0.3
        let expected = Self.reference(s, q, stride: s.headDim, k, v, scale: scale)
        let last = s.count - 1, span = s.start + s.count
        var out = [Float](repeating: .nan, count: s.headDim)
        var scores = [Float](repeating: .nan, count: span)
        q.withUnsafeBufferPointer { qb in
            CausalAttention.query(
                qb.baseAddress! + last * s.headDim, keys: k, values: v, span: span, headDim: s.headDim, scale: scale,
                scores: &scores, out: &out)
        }
        for c in 0..<s.headDim { #expect(abs(out[c] - expected[last * s.headDim + c]) <= 1e-5) }
        #expect(abs(scores.reduce(0, +) - 1) <= 1e-5, "the probabilities sum to 1")
    }

    /// The query heads of a KV group together (`queryGroup`, each key and value row read
    /// once) give each head's `query` bit for bit, scores, outputs and statistics: for every
    /// group shape the kernel writes out as constants (1-4 heads of 64; 1, 2, 4 of 256) and
    /// for shapes it runs as they come (3 of 48, 3 of 256).
    @Test(arguments: [(1, 64), (2, 64), (3, 64), (4, 64), (1, 256), (2, 256), (4, 256), (3, 48), (3, 256)])
    func groupedQueriesEqualEachHeadAlone(_ g: Int, _ hd: Int) {
        let span = 300, scoreStride = 320, outStride = hd + 16
        var rng = SeededRandom(seed: UInt64(31 + 10 * g + hd))
        let q = rng.normal(g * hd), k = rng.normal(span * hd), v = rng.normal(span * hd)
        var scores = [Float](repeating: .nan, count: g * scoreStride), out = [Float](repeating: .nan, count: g * outStride)
        var statistics = [(Float, Float)](repeating: (.nan, .nan), count: g)
        scores.withUnsafeMutableBufferPointer { sb in
            out.withUnsafeMutableBufferPointer { ob in
                CausalAttention.queryGroup(
                    q, heads: g, keys: FloatRows(k, width: hd), values: FloatRows(v, width: hd), span: span, headDim: hd, scale: 0.125,
                    scores: sb.baseAddress!, scoreStride: scoreStride, out: ob.baseAddress!, outStride: outStride
                ) { h, top, sum in statistics[h] = (top, sum) }
            }
        }
        for h in 0..<g {
            var aloneScores = [Float](repeating: .nan, count: span), alone = [Float](repeating: .nan, count: hd)
            let (top, sum) = q.withUnsafeBufferPointer {
                CausalAttention.query(
                    $0.baseAddress! + h * hd, keys: k, values: v, span: span, headDim: hd, scale: 0.125, scores: &aloneScores, out: &alone)
            }
            #expect(Array(out[(h * outStride)..<(h * outStride + hd)]).map(\.bitPattern) == alone.map(\.bitPattern), "head \(h)")
            #expect(Array(scores[(h * scoreStride)..<(h * scoreStride + span)]) == aloneScores, "head \(h) probabilities")
            #expect(statistics[h].0 == top && statistics[h].1 == sum, "head \(h) statistics")
            let gap = out[(h * outStride + hd)..<((h + 1) * outStride)].filter { !$0.isNaN }
            #expect(gap.isEmpty, "head \(h): nothing written past its output")
        }
    }

    /// The decode scores (`scoreKeys`: eight keys a tile on x86, heads up to
    /// `tiledHeadWidth` wide) are each key's scaled dot product, and a key's score is the
    /// same bits whether it sits in a whole tile or in a last, partial one (the partial tile
    /// runs as a whole one): every span from 1 to 19 keys against the scores of 24. Head
    /// widths that are a multiple of 8, one with columns past it, and one wider than the
    /// tiles (the per-key path).
    @Test(arguments: [64, 36, 8, 256])
    func scoresDoNotDependOnTheKeysAfterThem(_ hd: Int) {
        let g = 2, longest = 24
        var rng = SeededRandom(seed: UInt64(700 + hd))
        let q = rng.normal(g * hd), k = rng.normal(longest * hd)
        func scores(_ span: Int) -> [Float] {
            var out = [Float](repeating: .nan, count: g * longest)
            k.withUnsafeBufferPointer { kb in
                CausalAttention.scoreKeys(
                    q, g, FloatRows(kb.baseAddress!, width: hd), span, hd, 0.25, &out, longest)
            }
            return out
        }
        let all = scores(longest)
        for h in 0..<g {
            for j in 0..<longest {
                var dot = 0.0
                for c in 0..<hd { dot += Double(q[h * hd + c]) * Double(k[j * hd + c]) }
                #expect(abs(Double(all[h * longest + j]) - 0.25 * dot) <= 1e-5 * Double(hd), "head \(h) key \(j)")
            }
        }
        for span in 1..<20 {
            let some = scores(span)
            for h in 0..<g {
                let row = h * longest
                #expect(some[row..<(row + span)].map(\.bitPattern) == all[row..<(row + span)].map(\.bitPattern), "span \(span) head \(h)")
                let past = Array(some[(row + span)..<(row + longest)])
                #expect(past.allSatisfy { $0.isNaN }, "span \(span) head \(h): nothing past the span")
            }
        }
    }

    /// An F16 cache read in place (`HalfRows`, widened in registers) gives the bits of the
    /// same keys and values widened into an F32 copy first (`FloatRows`): scores, outputs
    /// and statistics. Head widths with and without a tail past the last 16 columns.
    @Test(arguments: [64, 40])
    func halfRowsEqualTheirFloatCopy(_ hd: Int) {
        let g = 3, span = 77
        var rng = SeededRandom(seed: UInt64(hd))
        let q = rng.normal(g * hd)
        // Keys and values as an F16 cache holds them, and their exact F32 copy.
        let halves = [UInt16](rng.normal(2 * span * hd).map { FloatBits.floatToHalf($0 * 3) })
        let floats = halves.map(FloatBits.halfToFloat)
        func run(_ attend: (UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>, (Int, Float, Float) -> Void) -> Void)
            -> (scores: [Float], out: [Float], statistics: [Float])
        {
            var scores = [Float](repeating: .nan, count: g * span), out = [Float](repeating: .nan, count: g * hd)
            var statistics = [Float](repeating: .nan, count: 2 * g)
            scores.withUnsafeMutableBufferPointer { sb in
                out.withUnsafeMutableBufferPointer { ob in
                    attend(sb.baseAddress!, ob.baseAddress!) { h, top, sum in (statistics[2 * h], statistics[2 * h + 1]) = (top, sum) }
                }
            }
            return (scores, out, statistics)
        }
        let half = halves.withUnsafeBytes { raw in
            run { scores, out, record in
                CausalAttention.queryGroup(
                    q, heads: g, keys: HalfRows(raw.baseAddress!, width: hd), values: HalfRows(raw.baseAddress! + 2 * span * hd, width: hd),
                    span: span, headDim: hd, scale: 0.2, scores: scores, scoreStride: span, out: out, outStride: hd, record: record)
            }
        }
        let float = floats.withUnsafeBufferPointer { fb in
            run { scores, out, record in
                CausalAttention.queryGroup(
                    q, heads: g, keys: FloatRows(fb.baseAddress!, width: hd), values: FloatRows(fb.baseAddress! + span * hd, width: hd),
                    span: span, headDim: hd, scale: 0.2, scores: scores, scoreStride: span, out: out, outStride: hd, record: record)
            }
        }
        #expect(half.scores.map(\.bitPattern) == float.scores.map(\.bitPattern))
        #expect(half.out.map(\.bitPattern) == float.out.map(\.bitPattern))
        #expect(half.statistics.map(\.bitPattern) == float.statistics.map(\.bitPattern))
        #expect(half.out.allSatisfy(\.isFinite) && Set(half.out).count > hd, "real outputs, not a constant")
    }

    /// A decoded query over a long cache split into blocks of `decodeKeyBlock` keys
    /// ("flash decoding"): each block through `query`, merged by `mergeBlocks`, equals the
    /// softmax over all the keys; one block needs no merge (and is `query` itself). Spans of
    /// one key past a block, several blocks and a short last one; scores of very different
    /// sizes per block, so that the weights span many orders of magnitude.
    @Test(arguments: [CausalAttention.decodeKeyBlock + 1, 3 * CausalAttention.decodeKeyBlock + 37, 2 * CausalAttention.decodeKeyBlock])
    func decodeBlocksMergeToTheWholeSoftmax(_ span: Int) {
        let hd = 64, blockKeys = CausalAttention.decodeKeyBlock, n = CausalAttention.decodeBlocks(span: span)
        #expect(n == (span + blockKeys - 1) / blockKeys && n > 1)
        var rng = SeededRandom(seed: UInt64(span))
        let q = rng.normal(hd)
        var k = rng.normal(span * hd)
        for j in 0..<span where j / blockKeys == 1 { k[j * hd] *= 30 }  // one block's scores far larger
        let v = rng.normal(span * hd)
        let scale: Float = 0.25
        var expected = [Float](repeating: .nan, count: hd)
        CausalAttention.causalReference(
            queries: q, queryStride: hd, count: 1, start: span - 1, keys: k, values: v, headDim: hd, scale: scale, out: &expected,
            outStride: hd)
        var partial = [Float](repeating: .nan, count: n * hd), maxima = [Float](repeating: .nan, count: n)
        var sums = maxima, scores = [Float](repeating: .nan, count: span)
        for b in 0..<n {
            let from = b * blockKeys, length = min(blockKeys, span - from)
            k.withUnsafeBufferPointer { kb in
                v.withUnsafeBufferPointer { vb in
                    scores.withUnsafeMutableBufferPointer { sb in
                        partial.withUnsafeMutableBufferPointer { pb in
                            (maxima[b], sums[b]) = CausalAttention.query(
                                q, keys: kb.baseAddress! + from * hd, values: vb.baseAddress! + from * hd, span: length, headDim: hd,
                                scale: scale, scores: sb.baseAddress! + from, out: pb.baseAddress! + b * hd)
                        }
                    }
                }
            }
        }
        var out = [Float](repeating: .nan, count: hd)
        CausalAttention.mergeBlocks(partial, maxima: maxima, sums: sums, count: n, headDim: hd, out: &out)
        let worst = zip(out, expected).map { abs($0 - $1) }.max()!
        #expect(worst <= 1e-5, "max |diff| \(worst)")
        // Merging one block is the block itself, bit for bit.
        var one = [Float](repeating: .nan, count: hd)
        CausalAttention.mergeBlocks(partial, maxima: maxima, sums: sums, count: 1, headDim: hd, out: &one)
        #expect(one == Array(partial[0..<hd]))
    }

    /// A sliding window of `window` positions (Gemma 3's local layers): the keys start at
    /// the first position the first query sees, as a ring cache hands them over.
    struct WindowCase: Sendable, CustomTestStringConvertible {
        let shape: Shape
        let window: Int
        var testDescription: String { "\(shape.testDescription), window \(window)" }
        var keyStart: Int { CausalAttention.firstVisible(shape.start, window) }
    }

    /// Windows inside one block and across blocks (the first block starting at 0), a
    /// window of one position (each query sees itself), one longer than the sequence.
    static let windows = [
        WindowCase(shape: Shape(start: 10, count: 5, headDim: 16), window: 4),
        WindowCase(shape: Shape(start: 3, count: CausalAttention.queryBlock + 9, headDim: 32), window: 20),
        WindowCase(shape: Shape(start: 100, count: 70, headDim: 16), window: 1),
        WindowCase(shape: Shape(start: 7, count: 3, headDim: 64), window: 100),
        WindowCase(shape: Shape(start: 40, count: 1, headDim: 16), window: 8)
    ]

    @Test(arguments: windows)
    func windowedAttentionMatchesReference(_ c: WindowCase) {
        let s = c.shape, stride = s.headDim + 4
        var rng = SeededRandom(seed: 11)
        let keyCount = s.start + s.count - c.keyStart
        let q = rng.normal(s.count * stride), k = rng.normal(keyCount * s.headDim), v = rng.normal(keyCount * s.headDim)
        let scale: Float = 0.4
        var expected = [Float](repeating: .nan, count: s.count * s.headDim)
        CausalAttention.causalReference(
            queries: q, queryStride: stride, count: s.count, start: s.start, keys: k, values: v, keyStart: c.keyStart, window: c.window,
            headDim: s.headDim, scale: scale, out: &expected, outStride: s.headDim)
        var out = [Float](repeating: .nan, count: s.count * stride)
        var scores = [Float](repeating: .nan, count: min(s.count, CausalAttention.queryBlock) * keyCount)
        CausalAttention.causal(
            queries: q, queryStride: stride, count: s.count, start: s.start, keys: k, values: v, keyStart: c.keyStart, window: c.window,
            headDim: s.headDim, scale: scale, scores: &scores, out: &out, outStride: stride)
        for i in 0..<s.count {
            for d in 0..<s.headDim {
                #expect(abs(out[i * stride + d] - expected[i * s.headDim + d]) <= 1e-5, "query \(i) dim \(d)")
            }
        }

        // The reference's window is the definition: each query attends, without a window,
        // over exactly the keys from its first visible position to its own.
        for i in 0..<s.count {
            let position = s.start + i, first = CausalAttention.firstVisible(position, c.window) - c.keyStart
            let seen = position + 1 - c.keyStart - first
            var alone = [Float](repeating: .nan, count: s.headDim)
            CausalAttention.causalReference(
                queries: Array(q[(i * stride)...]), queryStride: stride, count: 1, start: seen - 1,
                keys: Array(k[(first * s.headDim)...]), values: Array(v[(first * s.headDim)...]), headDim: s.headDim, scale: scale,
                out: &alone, outStride: s.headDim)
            #expect(alone == Array(expected[(i * s.headDim)..<((i + 1) * s.headDim)]), "query \(i)")
        }
    }

    /// The reference is the definition: with one key, the output is that value; a query
    /// that matches one key far better than the others returns (almost) its value; and the
    /// first query of a batch starting at 0 never sees the later keys.
    @Test func referenceIsCausalSoftmaxAttention() {
        let hd = 4
        let k: [Float] = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0]
        let v: [Float] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        // Query 0 sees key 0 only; query 2 points at key 2 with a large scale.
        let q: [Float] = [0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0]
        var out = [Float](repeating: .nan, count: 3 * hd)
        CausalAttention.causalReference(
            queries: q, queryStride: hd, count: 3, start: 0, keys: k, values: v, headDim: hd, scale: 1, out: &out, outStride: hd)
        #expect(Array(out[0..<4]) == [1, 2, 3, 4])
        // Query 1 is zero: the mean of the two values it sees.
        #expect(Array(out[4..<8]) == [3, 4, 5, 6])
        for c in 0..<hd { #expect(abs(out[8 + c] - v[8 + c]) < 1e-6) }
    }
}
