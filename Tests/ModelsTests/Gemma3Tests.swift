import Foundation
import GGUF
import Kernels
import TestSupport
import Testing

@testable import Models
@testable import Reference

/// Gemma 3 (`Gemma3.swift`) on a tiny model of pseudo-random F32 weights that has what the
/// real one has at small sizes: two local layers with a sliding window of 6 positions and a
/// global one (the pattern of 3), 4 query heads sharing 2 key/value heads of 16, q/k norms,
/// the norms after attention and after the FFN, GEGLU, the `sqrt(d)` embedding scale and a
/// tied head. The reference forward pass is quick on it and the windows wrap many times
/// within a short sequence, so the sliding-window cache (a ring), its truncation and its
/// use in `BatchedSession` are checked exactly here; the real Gemma 3 270M file is checked
/// in ReferenceTests and GoldenTests.
@Suite struct Gemma3Tests {
    static let d = 32, heads = 4, kvHeads = 2, headDim = 16, ff = 64, vocab = 96, window = 6

    /// The tiny model's file: `layers` layers with the default pattern of `pattern` (layer
    /// `i` global when `i % pattern == pattern - 1`), with the keys of `extra` set and
    /// those of `removing` left out.
    static func tinyFile(layers: Int = 3, pattern: Int = 3, extra: [String: GGUFValue] = [:], removing: [String] = []) throws -> GGUFFile {
        var w = GGUFWriter()
        let keys: [(String, GGUFValue)] = [
            ("general.architecture", .string("gemma3")),
            ("gemma3.embedding_length", .uint32(UInt32(d))),
            ("gemma3.block_count", .uint32(UInt32(layers))),
            ("gemma3.attention.head_count", .uint32(UInt32(heads))),
            ("gemma3.attention.head_count_kv", .uint32(UInt32(kvHeads))),
            ("gemma3.attention.key_length", .uint32(UInt32(headDim))),
            ("gemma3.attention.value_length", .uint32(UInt32(headDim))),
            ("gemma3.feed_forward_length", .uint32(UInt32(ff))),
            ("gemma3.context_length", .uint32(4096)),
            ("gemma3.attention.layer_norm_rms_epsilon", .float32(1e-6)),
            ("gemma3.rope.freq_base", .float32(1_000_000)),
            ("gemma3.attention.sliding_window", .uint32(UInt32(window))),
            ("gemma3.attention.sliding_window_pattern", .uint32(UInt32(pattern))),
            ("gemma3.vocab_size", .uint32(UInt32(vocab)))
        ]
        for (key, value) in keys where !removing.contains(key) { w.metadata.set(key, value) }
        for (key, value) in extra.sorted(by: { $0.key < $1.key }) { w.metadata.set(key, value) }

        var seed = 0.0
        /// Pseudo-random floats (a sine hash), `scale` around `offset`.
        func floats(_ count: Int, scale: Float, offset: Float = 0) -> [UInt8] {
            seed += 1
            let values = (0..<count).map { i -> Float in
                let h = sin(Double(i) * 12.9898 + seed * 78.233) * 43758.5453
                return offset + scale * Float(2 * (h - h.rounded(.down)) - 1)
            }
            return values.withUnsafeBytes { Array($0) }
        }
        func add(_ name: String, _ shape: [Int], scale: Float, offset: Float = 0) throws {
            try w.addTensor(name: name, type: .f32, shape: shape, data: floats(shape.reduce(1, *), scale: scale, offset: offset))
        }
        try add("token_embd.weight", [d, vocab], scale: 0.2)
        try add("output_norm.weight", [d], scale: 0.2, offset: 1)
        for i in 0..<layers {
            try add("blk.\(i).attn_norm.weight", [d], scale: 0.2, offset: 1)
            try add("blk.\(i).attn_q.weight", [d, heads * headDim], scale: 0.3)
            try add("blk.\(i).attn_k.weight", [d, kvHeads * headDim], scale: 0.3)
            try add("blk.\(i).attn_v.weight", [d, kvHeads * headDim], scale: 0.3)
            try add("blk.\(i).attn_output.weight", [heads * headDim, d], scale: 0.2)
            try add("blk.\(i).attn_q_norm.weight", [headDim], scale: 0.3, offset: 1.5)
            try add("blk.\(i).attn_k_norm.weight", [headDim], scale: 0.3, offset: 1.5)
            try add("blk.\(i).post_attention_norm.weight", [d], scale: 0.2, offset: 1)
            try add("blk.\(i).ffn_norm.weight", [d], scale: 0.2, offset: 1)
            try add("blk.\(i).ffn_gate.weight", [d, ff], scale: 0.3)
            try add("blk.\(i).ffn_up.weight", [d, ff], scale: 0.3)
            try add("blk.\(i).ffn_down.weight", [ff, d], scale: 0.2)
            try add("blk.\(i).post_ffw_norm.weight", [d], scale: 0.2, offset: 1)
        }
        return try GGUFFile(bytes: try w.serialize())
    }

    static func tinyModel(extra: [String: GGUFValue] = [:], removing: [String] = []) throws -> TransformerModel {
        try TransformerModel(file: try tinyFile(extra: extra, removing: removing), threads: 2)
    }

    /// A fixed pseudo-random token sequence.
    static func tokens(_ count: Int, seed: Int = 0) -> [Int] { (0..<count).map { ($0 * 37 + seed * 11 + 5) % vocab } }

    static func relativeError(_ fast: [Float], _ reference: [Float]) -> Float {
        let range = reference.max()! - reference.min()!
        return zip(fast, reference).map { abs($0 - $1) }.max()! / range
    }

    /// Evaluates `tokens` in `session` in pieces of `chunk` tokens and returns the logits
    /// after each piece.
    static func feed(_ session: InferenceSession, _ tokens: [Int], chunk: Int) throws -> [[Float]] {
        var out: [[Float]] = []
        var start = 0
        while start < tokens.count {
            let end = min(tokens.count, start + chunk)
            try session.evaluate(Array(tokens[start..<end]))
            out.append(Array(session.logits))
            start = end
        }
        return out
    }

    /// Decoding token by token gives the same bits on 1, 2, 3 and 4 threads, with F32 and
    /// F16 caches. With more threads than the model's 2 KV heads (and one block of keys),
    /// the F32 cache's decode attention splits each group's query heads over the threads
    /// (`Attention.attendOne`); the products are split by rows at any count.
    @Test(arguments: [KVCacheType.f32, .f16])
    func decodeIsTheSameBitsOnAnyThreadCount(_ type: KVCacheType) throws {
        let file = try Self.tinyFile()
        func decode(threads: Int) throws -> [[UInt32]] {
            let session = InferenceSession(model: try TransformerModel(file: file, threads: threads), contextLength: 64, kvCacheType: type)
            return try Self.feed(session, Self.tokens(20, seed: 3), chunk: 1).map { $0.map(\.bitPattern) }
        }
        let one = try decode(threads: 1)
        for threads in 2...4 {
            #expect(try decode(threads: threads) == one, "\(type) cache, \(threads) threads")
        }
    }

    // MARK: - The architecture

    @Test func readsTheLayersAsLlamaCppDoes() throws {
        let model = try Self.tinyModel()
        let settings = try Gemma3.settings(model.file.metadata, model.hyperparameters)
        #expect(settings.windows == [6, 6, nil])
        #expect(settings.localRopeBase == 10000)
        #expect(settings.queryScale == 0.25)
        #expect(settings.finalLogitSoftcap == nil)
        #expect(model.weights.embeddingScale == Float(Self.d).squareRoot())
        #expect(model.weights.output.name == "token_embd.weight", "tied head")
        let caches = model.weights.layers.map(\.cache)
        #expect(
            caches == [
                .windowedKeysAndValues(kvHeads: 2, headDim: 16, window: 6), .windowedKeysAndValues(kvHeads: 2, headDim: 16, window: 6),
                .keysAndValues(kvHeads: 2, headDim: 16)
            ])
        #expect(model.weights.layers.compactMap(\.rope).map(\.base) == [10000, 10000, 1_000_000])

        // The 270M pattern: every sixth layer global (the default), a pattern of 0 makes every
        // layer local, an array says it per layer, and without a window every layer is global.
        let m = try Self.tinyFile(layers: 12, removing: ["gemma3.attention.sliding_window_pattern"]).metadata
        let hp = try Hyperparameters.reading(m, architecture: "gemma3")
        #expect(try Gemma3.settings(m, hp).windows.map { $0 == nil } == (0..<12).map { $0 % 6 == 5 })
        let all = try Self.tinyFile(layers: 4, pattern: 0).metadata
        #expect(try Gemma3.settings(all, try Hyperparameters.reading(all, architecture: "gemma3")).windows == [6, 6, 6, 6])
        let flags = try Self.tinyFile(extra: ["gemma3.attention.sliding_window_pattern": .array(.bool([false, true, false]))]).metadata
        #expect(try Gemma3.settings(flags, try Hyperparameters.reading(flags, architecture: "gemma3")).windows == [nil, 6, nil])
        let none = try Self.tinyFile(removing: ["gemma3.attention.sliding_window"]).metadata
        #expect(try Gemma3.settings(none, try Hyperparameters.reading(none, architecture: "gemma3")).windows == [nil, nil, nil])
    }

    /// What leap-ref does not implement, or a value that makes no sense, is refused with a
    /// typed error naming the key.
    @Test func refusesWhatItDoesNotSupport() throws {
        func refusal(_ extra: [String: GGUFValue]) throws -> String? {
            do {
                _ = try Self.tinyModel(extra: extra)
                return nil
            } catch let error as ModelError {
                guard case .invalidHyperParameter(let key, _, _) = error else { return "\(error)" }
                return key
            }
        }
        #expect(
            try refusal(["gemma3.rope.scaling.type": .string("linear"), "gemma3.rope.scaling.factor": .float32(8)])
                == "gemma3.rope.scaling.factor")
        #expect(try refusal(["gemma3.rope.scaling.factor": .float32(8)]) == "gemma3.rope.scaling.factor")
        #expect(try refusal(["gemma3.rope.scaling.type": .string("yarn")]) == "gemma3.rope.scaling.type")
        #expect(
            try refusal(["gemma3.attention.sliding_window_pattern": .array(.bool([true, false]))])
                == "gemma3.attention.sliding_window_pattern")
        #expect(
            try refusal(["gemma3.attention.sliding_window_pattern": .array(.string(["a", "b", "c"]))])
                == "gemma3.attention.sliding_window_pattern")
        #expect(try refusal(["gemma3.attention.sliding_window": .int32(-1)]) == "gemma3.attention.sliding_window")
        #expect(try refusal(["gemma3.rope.freq_base_swa": .float32(0)]) == "gemma3.rope.freq_base_swa")
        #expect(try refusal(["gemma3.final_logit_softcapping": .float32(-30)]) == "gemma3.final_logit_softcapping")
        // No scaling at all is fine.
        #expect(try refusal(["gemma3.rope.scaling.type": .string("none"), "gemma3.rope.scaling.factor": .float32(8)]) == nil)
        #expect(try refusal(["gemma3.rope.scaling.type": .string("linear"), "gemma3.rope.scaling.factor": .float32(1)]) == nil)
        // A missing post-norm is a missing tensor.
        #expect(throws: ModelError.file(.missingTensor("blk.0.post_attention_norm.weight"))) {
            let file = try Self.tinyFile()
            var w = GGUFWriter(copyingMetadataOf: file)
            for t in file.tensors where t.name != "blk.0.post_attention_norm.weight" {
                try w.addTensor(name: t.name, type: t.type, shape: t.shape, data: Array(file.data(for: t)))
            }
            _ = try TransformerModel(file: try GGUFFile(bytes: try w.serialize()))
        }
    }

    /// The engine against the reference forward pass, far past the window: a prompt in
    /// chunks of 4 (each chunk's first query sees keys of the previous chunks only through
    /// the window), then one token at a time. F32 weights, so only summation order
    /// separates them (bound 0.01% of the logit range, as for SmolLM2 F32); the same run
    /// with the reference attending over every position (no window) is far outside it.
    @Test(arguments: [nil, Float(5)])
    func engineMatchesReferencePastTheWindow(softcap: Float?) throws {
        let model = try Self.tinyModel(extra: softcap.map { ["gemma3.final_logit_softcapping": .float32($0)] } ?? [:])
        let session = InferenceSession(model: model, contextLength: 64, maxBatch: 4)
        let reference = try ReferenceForward(model: model), unwindowed = try ReferenceForward(model: model)
        unwindowed.windows = unwindowed.windows.map { _ in nil }
        let prompt = Self.tokens(22), continuation = Self.tokens(14, seed: 3)
        var worst: Float = 0, withoutWindow: Float = 0
        for (row, token) in zip(try session.evaluateAllLogits(prompt), prompt) {
            let expected = reference.next(token), full = unwindowed.next(token)
            worst = max(worst, Self.relativeError(row, expected))
            withoutWindow = max(withoutWindow, Self.relativeError(row, full))
        }
        for token in continuation {
            try session.evaluate([token])
            worst = max(worst, Self.relativeError(Array(session.logits), reference.next(token)))
            withoutWindow = max(withoutWindow, Self.relativeError(Array(session.logits), unwindowed.next(token)))
        }
        print(
            "tiny gemma3 (softcap \(softcap.map { "\($0)" } ?? "none")) vs reference: \(worst * 100)%, without the window \(withoutWindow * 100)%"
        )
        #expect(worst <= 0.0001)
        #expect(withoutWindow > 0.01)
        if let softcap { #expect(Array(session.logits).allSatisfy { abs($0) < softcap }) }
    }

    // MARK: - The ring

    /// A local layer's cache is a ring of `window - 1 + maxBatch` positions, each stored
    /// twice: a session whose rings wrap many times computes exactly (bit for bit) what a
    /// session whose local layers hold the whole context computes, fed the same pieces.
    /// Its memory does not grow with the context; the global layer's does.
    @Test func ringComputesWhatTheWholeCacheComputes() throws {
        let model = try Self.tinyModel()
        let ring = InferenceSession(model: model, contextLength: 64, maxBatch: 4)  // rings of 9 positions
        let whole = InferenceSession(model: model, contextLength: 64, maxBatch: 32)  // 2 · (5 + 32) ≥ 64: no ring
        #expect(ring.sequence.kv.ringLengths == [9, 9, nil])
        #expect(whole.sequence.kv.ringLengths == [nil, nil, nil])
        let tokens = Self.tokens(52)
        let chunked = Array(tokens[0..<24]), single = Array(tokens[24...])
        #expect(try Self.feed(ring, chunked, chunk: 4) == Self.feed(whole, chunked, chunk: 4))
        #expect(try Self.feed(ring, single, chunk: 1) == Self.feed(whole, single, chunk: 1))

        // Bytes per local layer: 2 (K, V) x 2 rings x 9 rows x kvHeads x headDim x 4, whatever the context.
        let perPosition = 2 * Self.kvHeads * Self.headDim * 4
        let long = InferenceSession(model: model, contextLength: 4096, maxBatch: 4)
        #expect(long.cacheByteCount == 2 * (2 * 9 * perPosition) + 4096 * perPosition)
        #expect(ring.cacheByteCount == 2 * (2 * 9 * perPosition) + 64 * perPosition)
    }

    /// Truncating a sequence keeps its prefix while the rings still hold the window the
    /// prefix needs (the sequence went at most `maxBatch` tokens past it): going on from
    /// there gives exactly what a fresh session fed the same tokens gives. Further back, the
    /// window has been overwritten: `truncate` refuses the prefix and empties the session
    /// (it returns 0), and the caller evaluates the prefix again.
    @Test func truncationKeepsAPrefixOnlyWhileTheRingHoldsItsWindow() throws {
        let model = try Self.tinyModel()
        let tokens = Self.tokens(32), other = Self.tokens(6, seed: 9)
        let session = InferenceSession(model: model, contextLength: 64, maxBatch: 4)  // rings of 9
        _ = try Self.feed(session, tokens, chunk: 4)
        // Back 4 (= maxBatch) positions: position 28 sees 23...28, and the rings hold 23...31.
        #expect(session.truncate(to: 28) == 28)
        let resumed = try Self.feed(session, other, chunk: 4)
        let fresh = InferenceSession(model: model, contextLength: 64, maxBatch: 4)
        _ = try Self.feed(fresh, Array(tokens[0..<28]), chunk: 4)
        #expect(try Self.feed(fresh, other, chunk: 4) == resumed)

        // The sequence went as far as 34: the rings hold 25...33. Position 20 sees 15...20,
        // overwritten: refused, and the session is empty.
        #expect(session.position == 34)
        #expect(session.truncate(to: 20) == 0)
        #expect(session.position == 0)
        // One position further back than the rings allow is refused too.
        let edge = InferenceSession(model: model, contextLength: 64, maxBatch: 4)
        _ = try Self.feed(edge, tokens, chunk: 4)
        #expect(edge.truncate(to: 27) == 0)
        // A session that stayed within one ring has overwritten nothing.
        let short = InferenceSession(model: model, contextLength: 64, maxBatch: 4)
        _ = try Self.feed(short, Array(tokens[0..<9]), chunk: 4)
        #expect(short.truncate(to: 2) == 2)
        // A model without local layers keeps any prefix.
        let global = InferenceSession(
            model: try Self.tinyModel(removing: ["gemma3.attention.sliding_window"]), contextLength: 64, maxBatch: 4)
        _ = try Self.feed(global, tokens, chunk: 4)
        #expect(global.truncate(to: 3) == 3)
    }

    /// Sequences with rings in the slots of a `BatchedSession`: each one's logits are what it
    /// gets alone in an `InferenceSession` fed the same pieces, bit for bit, while the others
    /// decode around it; truncation follows the same rule per slot.
    @Test func batchedSequencesKeepTheirOwnRings() throws {
        let model = try Self.tinyModel()
        let batch = BatchedSession(model: model, slots: 2, contextLength: 64, maxStepTokens: 4)
        let a = try batch.open(), b = try batch.open()
        let ta = Self.tokens(20, seed: 1), tb = Self.tokens(20, seed: 2)
        var logitsA: [[Float]] = [], logitsB: [[Float]] = []
        // a prefills in chunks of 4 while b goes one token at a time, then both decode.
        var fedA = 0, fedB = 0
        while fedA < ta.count || fedB < tb.count {
            var inputs: [BatchedSession.Input] = []
            let chunk = fedA < 12 ? 3 : 1
            if fedA < ta.count { inputs.append(.init(a, Array(ta[fedA..<min(ta.count, fedA + chunk)]))) }
            if fedB < tb.count { inputs.append(.init(b, [tb[fedB]])) }
            try batch.step(inputs)
            if fedA < ta.count {
                fedA = min(ta.count, fedA + chunk)
                logitsA.append(Array(try batch.logits(of: a)))
            }
            if fedB < tb.count {
                fedB += 1
                logitsB.append(Array(try batch.logits(of: b)))
            }
        }
        let aloneA = InferenceSession(model: model, contextLength: 64, maxBatch: 4)
        #expect(try Self.feed(aloneA, Array(ta[0..<12]), chunk: 3) + Self.feed(aloneA, Array(ta[12...]), chunk: 1) == logitsA)
        let aloneB = InferenceSession(model: model, contextLength: 64, maxBatch: 4)
        #expect(try Self.feed(aloneB, tb, chunk: 1) == logitsB)

        #expect(try batch.truncate(a, to: 17) == 17)
        #expect(try batch.truncate(b, to: 5) == 0)
        #expect(try batch.position(of: b) == 0)
    }
}
