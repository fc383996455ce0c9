import Kernels

/// The buffers of a pass's mixture-of-experts products, allocated once for `maxRows` rows
/// and the model's widest mixture (`MixtureOfExperts`).
///
/// A pass of `n` rows, each routed to `k` experts, makes `n·k` (row, expert) pairs. They
/// are laid out expert by expert (`groupByExpert`): pair slot `j` holds one row's input
/// for one expert, and expert `e`'s pairs are the slots `starts[e] ..< starts[e + 1]`, in
/// the order of their rows (so the one-token rows first, then each prompt chunk's rows).
/// Each expert's weights are then read once for all its rows.
final class ExpertBuffers {
    /// Most pairs in a pass: `maxRows · k`.
    let maxPairs: Int
    /// Router outputs, then the gates: `[n][experts]`.
    let routerLogits: UnsafeMutablePointer<Float>
    let routerWidth: Int
    /// Per row and rank `c < k`: the chosen expert, its weight, and its pair slot.
    let chosen: UnsafeMutablePointer<Int>
    let weights: UnsafeMutablePointer<Float>
    let slots: UnsafeMutablePointer<Int>
    /// Per pair slot: the row of the pass it comes from.
    let sources: UnsafeMutablePointer<Int>
    /// Per expert: its first pair slot (`experts + 1` entries, the last one the pair count).
    let starts: UnsafeMutablePointer<Int>
    /// The pairs' inputs as floats (`[pairs][d]`, for the prefill product), then the
    /// experts' outputs.
    let inputs: UnsafeMutablePointer<Float>
    /// The experts' hidden rows `[pairs][ff]`: the gate projections, then `SiLU(g) ⊙ u`;
    /// and the up projections.
    let gate: UnsafeMutablePointer<Float>
    let up: UnsafeMutablePointer<Float>
    /// The pass's rows in 8 bits, quantized once for every expert that reads them.
    let tokens: QuantizedActivations
    /// The pairs' inputs in 8 bits, expert by expert (gathered from `tokens`, or the
    /// hidden rows quantized for the down projections).
    let pairs: QuantizedActivations

    init(maxRows n: Int, width d: Int, mixtures: [MixtureOfExperts]) {
        let k = mixtures.map(\.used).max()!, experts = mixtures.map(\.router.rows).max()!
        let hidden = mixtures.map { $0.gate[0].rows }.max()!
        maxPairs = n * k
        routerWidth = experts
        routerLogits = .allocate(capacity: n * experts)
        chosen = .allocate(capacity: maxPairs)
        weights = .allocate(capacity: maxPairs)
        slots = .allocate(capacity: maxPairs)
        sources = .allocate(capacity: maxPairs)
        starts = .allocate(capacity: experts + 1)
        inputs = .allocate(capacity: maxPairs * d)
        gate = .allocate(capacity: maxPairs * hidden)
        up = .allocate(capacity: maxPairs * hidden)
        tokens = QuantizedActivations(capacity: n * d)
        pairs = QuantizedActivations(capacity: maxPairs * max(d, hidden))
    }

    deinit {
        routerLogits.deallocate()
        for p in [chosen, slots, sources, starts] { p.deallocate() }
        for p in [weights, inputs, gate, up] { p.deallocate() }
    }
}

extension ForwardPass {
    /// The input of the expert products of a pass: the pairs' rows, expert by expert, as
    /// floats (`rows`, read by the prefill product) and, when `quantized`, in 8 bits in
    /// `ExpertBuffers.pairs` (read by the matvec and the integer matmul).
    struct ExpertProductInput {
        let rows: Rows
        let quantized: Bool
    }

    /// Whether the products with `w` need some of the pass's rows in 8 bits: the
    /// one-token rows (matvec), or the chunks where `w` has the integer matmul.
    private func needsQuantizedRows(_ w: [Linear]) -> Bool {
        singleRows > 0 || (rowCount > singleRows && w.contains(where: \.hasIntegerMatmul))
    }

    /// Whether the matvec of one-token rows with `w` reads floats (F32/F16/BF16 experts).
    private func needsFloats(_ w: [Linear]) -> Bool {
        singleRows > 0 && w.contains { !$0.type.usesQuantizedActivations }
    }

    /// Lays out the pairs of the pass's rows and the experts chosen for them (`k` per row
    /// in `ExpertBuffers.chosen`, among `experts`), expert by expert, and gathers each
    /// pair's input from `x`: as floats when a prompt chunk is in the pass, and in 8 bits,
    /// each row quantized once whatever the number of its experts, for the products
    /// that need it (`gate` and `up` of every expert read the same input).
    func groupByExpert(_ x: Rows, choices k: Int, experts: Int, for gate: [Linear], _ up: [Linear]) -> ExpertProductInput {
        let b = self.experts!, n = x.count, pairCount = n * k
        // Counting sort by expert, stable in row order.
        for e in 0...experts { b.starts[e] = 0 }
        for p in 0..<pairCount { b.starts[b.chosen[p] + 1] += 1 }
        for e in 0..<experts { b.starts[e + 1] += b.starts[e] }
        for i in 0..<n {
            for c in 0..<k {
                let e = b.chosen[i * k + c]
                let slot = b.starts[e]
                b.starts[e] += 1
                b.slots[i * k + c] = slot
                b.sources[slot] = i
            }
        }
        // The cursors ended at each expert's end, which is the next one's start.
        for e in stride(from: experts, to: 0, by: -1) { b.starts[e] = b.starts[e - 1] }
        b.starts[0] = 0

        let gathered = Rows(base: b.inputs, count: pairCount, width: x.width)
        if rowCount > singleRows {
            inParallel(rows: pairCount) { slots in
                for j in slots { gathered[j].update(from: x[b.sources[j]], count: x.width) }
            }
        }
        let linears = gate + up
        guard needsQuantizedRows(linears) else { return ExpertProductInput(rows: gathered, quantized: false) }
        b.tokens.quantizeRows(x.base, rows: n, cols: x.width, keepingFloats: needsFloats(linears), pool: pool)
        b.pairs.gatherRows(of: b.tokens, UnsafeBufferPointer(start: b.sources, count: pairCount), cols: x.width)
        return ExpertProductInput(rows: gathered, quantized: true)
    }

    /// Prepares the experts' hidden rows `h` (already expert by expert) as the input of
    /// the products with `w` (the down projections).
    func expertInput(_ h: Rows, for w: [Linear]) -> ExpertProductInput {
        guard needsQuantizedRows(w) else { return ExpertProductInput(rows: h, quantized: false) }
        experts!.pairs.quantizeRows(h.base, rows: h.count, cols: h.width, keepingFloats: needsFloats(w), pool: pool)
        return ExpertProductInput(rows: h, quantized: true)
    }

    /// `out_j = input_j · W_eᵀ` for every pair slot `j` of every expert `e` (`w[e]` is
    /// expert `e`'s matrix), with the kernels `project` uses, each expert's weights read
    /// once for all its rows: its one-token rows through the multi-row matvec, the rows
    /// of each prompt chunk through the prefill product (the integer matmul or sgemm).
    /// A pair's result depends only on its own row, as in `project`.
    func projectExperts(_ w: [Linear], _ input: ExpertProductInput, into out: UnsafeMutablePointer<Float>) -> Rows {
        projectExperts([(w, out)], input)[0]
    }

    /// `projectExperts(_:_:into:)` of each of `products` (the experts' matrices that read
    /// the same input: gate and up), the one-token rows of every expert of every product
    /// in one parallel loop (`Linear.apply(_:_:pool:)`): a decode step's threads meet once
    /// for all of them instead of once per expert and matrix.
    func projectExperts(_ products: [([Linear], UnsafeMutablePointer<Float>)], _ input: ExpertProductInput) -> [Rows] {
        let b = experts!, pairCount = input.rows.count, singleRows = singleRows, rowSegment = rowSegment
        // Each expert's pair slots: its one-token rows first, then its chunks' rows.
        func oneTokenEnd(_ e: Int) -> Int {
            var k = b.starts[e]
            while k < b.starts[e + 1] && b.sources[k] < singleRows { k += 1 }
            return k
        }
        var matvecs: [(Linear, rows: Range<Int>, UnsafeMutablePointer<Float>)] = []
        for (w, out) in products {
            for e in w.indices {
                let end = oneTokenEnd(e)
                if end > b.starts[e] { matvecs.append((w[e], b.starts[e]..<end, out)) }
            }
        }
        if !matvecs.isEmpty {
            precondition(input.quantized)
            Linear.apply(matvecs, b.pairs, pool: pool)
        }
        return products.map { w, out in
            let outputs = w[0].rows
            for (e, matrix) in w.enumerated() {
                var j = oneTokenEnd(e)
                let end = b.starts[e + 1]
                while j < end {
                    let segment = rowSegment[b.sources[j]]
                    var k = j + 1
                    while k < end && rowSegment[b.sources[k]] == segment { k += 1 }
                    if matrix.hasIntegerMatmul {
                        precondition(input.quantized)
                        matrix.apply(
                            batch: b.pairs, rows: j..<k, out, scratch: packedWeights!, scratchBytes: packedWeightsBytes, pool: pool)
                    } else if matrix.hasWideIntegerMatmul, let wide = wideActivations {
                        // The expert's rows of this chunk in 16 bits (they are its rows alone).
                        wide.quantizeRows(input.rows[j], rows: k - j, cols: input.rows.width, pool: pool)
                        wideInput = -1
                        matrix.apply(
                            wideBatch: wide, rows: 0..<(k - j), out + j * outputs, scratch: packedWeights!,
                            scratchBytes: packedWeightsBytes, pool: pool)
                    } else {
                        matrix.apply(
                            batch: input.rows[j], count: k - j, out + j * outputs, tile: floatTile!, tileCapacity: floatTileCapacity,
                            pool: pool)
                    }
                    j = k
                }
            }
            return Rows(base: out, count: pairCount, width: outputs)
        }
    }

    /// `out_i = Σ_c w_ic · y_(i,c)` for every row `i` of the pass: its `k` experts'
    /// outputs (pair slots in `ExpertBuffers.slots`) weighted by `ExpertBuffers.weights`,
    /// summed in the order of the ranks.
    func combineExperts(_ y: Rows, choices k: Int, into out: UnsafeMutablePointer<Float>) -> Rows {
        let b = experts!, n = rowCount, d = y.width
        let result = Rows(base: out, count: n, width: d)
        inParallel(rows: n) { rows in
            for i in rows {
                let o = result[i], first = y[b.slots[i * k]], w0 = b.weights[i * k]
                for c in 0..<d { o[c] = w0 * first[c] }
                for c in 1..<k { Elementwise.axpy(b.weights[i * k + c], y[b.slots[i * k + c]], o, count: d) }
            }
        }
        return result
    }
}
