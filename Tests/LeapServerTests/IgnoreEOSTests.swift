import Foundation
import GGUF
import TestSupport
import Testing
import Tokenizers

@testable import LeapSDKCore

/// llama-server's `ignore_eos`: the end-of-generation tokens are masked while sampling, so
/// a completion runs to its token limit; without it the best end token ends the reply.
@Suite struct IgnoreEOSTests {
    @Test func endTokensAreMaskedOnlyWhenAsked() throws {
        let tokenizer = try Tokenizer(gguf: try GGUFFile(path: TestFixtures.path("models/lfm2-tiny.gguf")))
        let ends = tokenizer.endOfGenerationIDs.map(Int.init).sorted()
        #expect(!ends.isEmpty)
        var logits = [Float](repeating: 0, count: tokenizer.vocabularySize)
        for (i, id) in ends.enumerated() { logits[id] = 50 - Float(i) }  // every end token above the rest
        logits[300] = 10
        func step(ignoringEnd: Bool, ban: CallMarkerBan? = nil) throws -> SequenceGeneration.Step {
            var generation = SequenceGeneration(
                tokenizer: tokenizer, sampling: .greedy, prompt: [1, 2, 3], constraints: ActiveConstraints(callBan: ban), callParser: nil,
                splitsReasoning: true,
                stops: [], maxTokens: 8, lengthLimit: 512, logprobs: nil, ignoresEndOfGeneration: ignoringEnd,
                continuesAfterToolCalls: false)
            return try logits.withUnsafeBufferPointer { try generation.next($0) { _ in } }
        }
        #expect(try step(ignoringEnd: false) == .finished(.stop))
        #expect(try step(ignoringEnd: true) == .next(300))
        // With the call marker banned too, both masks hold.
        let ban = CallMarkerBan(CallMarkerTokens(marker: "<|tool_call_start|>", tokenizer: tokenizer))
        let start = Int(try #require(tokenizer.tokenID(forText: "<|tool_call_start|>")))
        logits[start] = 40
        #expect(try step(ignoringEnd: true, ban: ban) == .next(300))
    }
}
