import Grammar
import Models
import Sampling
import Tokenizers

/// One sequence's generation after its prompt, one token at a time: the only generation
/// loop body in leap-ref. Every completion runs through it, whether it comes from
/// `Conversation` (through `LiquidInferenceEngineRunner`) or from the server, alone or
/// beside others (`ServingEngine` steps every sequence's `next` in its rounds).
///
/// A step:
///
/// ```
/// ended?     a finished JSON document, maxTokens, the context    → stop
/// token    = sample(logits, mask)       mask: the active grammar, a banned call opening,
///                                             end of turn when ignored
/// end of turn                                                       → stop
/// grammar.accept(token)                 a closed call block         → tool_calls (after emitting;
///                                                                      or the model goes on)
/// text     = detokenize(token)          the call opening seen?      → constrain the call block
/// events   = output(stops(text))        reasoning, calls and text split; a stop string → stop
/// ```
struct SequenceGeneration {
    /// What a step decided: the token to evaluate next, or the end of the completion.
    enum Step: Equatable {
        case next(Int)
        /// A spoken reply's audio frame: the backbone takes `embedding` next, at a position
        /// whose prompt-cache key is `key`.
        case nextEmbedding([Float], key: Int)
        case finished(ServingFinishReason)
    }

    private let tokenizer: Tokenizer
    private var sampler: Sampler
    private var detokenizer: StreamingDetokenizer
    private var output: OutputAssembler
    private var stops: StopStringMatcher
    /// The grammar being enforced: the whole reply's, or an open call block's.
    private var constraint: GrammarConstraint?
    /// Watches for the model opening a call block (tool_choice auto).
    private var callOpening: CallOpening?
    /// Forbids the call syntax (tool_choice none).
    private var callBan: CallMarkerBan?
    /// The end-of-generation ids masked while sampling (llama-server's `ignore_eos`), or
    /// none. A short array: the mask runs for every id of the vocabulary, and a Set lookup
    /// hashed each one (7% of a served token).
    private let maskedEndTokens: [Int]
    /// Whether a closed call block hands generation back to the model.
    private let continuesAfterToolCalls: Bool
    private let logprobCount: Int?
    private let maxTokens: Int?
    /// Tokens the sequence may hold, prompt included.
    private let lengthLimit: Int
    private let promptLength: Int

    /// Tokens generated so far.
    private(set) var generated = 0
    /// The reply has called a tool.
    private(set) var calledTools = false
    /// The log-probabilities of tokens whose text has not been released yet.
    private var pendingLogprobs: [ServingTokenLogprob] = []
    /// A spoken reply's schedule, depthformer and detokenizer (nil: text only).
    private var speech: SpeechGeneration?

    /// The generation state of a sequence whose prompt has `promptLength` tokens (the
    /// prompt's tokens feed the sampler's penalties).
    init(
        tokenizer: Tokenizer, sampling: SamplingParameters, prompt: [Int], constraints: ActiveConstraints,
        callParser: (any LeapFunctionCallParserProtocol)?, splitsReasoning: Bool, stops: [String], maxTokens: Int?, lengthLimit: Int,
        logprobs: Int?,
        ignoresEndOfGeneration: Bool, continuesAfterToolCalls: Bool, speech: SpeechGeneration? = nil
    ) {
        self.speech = speech
        self.tokenizer = tokenizer
        sampler = Sampler(sampling)
        for t in prompt.suffix(sampling.historyLength) { sampler.accept(t) }
        detokenizer = StreamingDetokenizer(tokenizer: tokenizer, renderSpecial: true)
        output = OutputAssembler(parser: callParser, splitsReasoning: splitsReasoning)
        self.stops = StopStringMatcher(stops: stops)
        constraint = constraints.grammar
        callOpening = constraints.callOpening
        callBan = constraints.callBan
        maskedEndTokens = ignoresEndOfGeneration ? tokenizer.endOfGenerationIDs.map(Int.init).sorted() : []
        self.continuesAfterToolCalls = continuesAfterToolCalls
        logprobCount = logprobs
        self.maxTokens = maxTokens
        self.lengthLimit = lengthLimit
        promptLength = prompt.count
    }

    /// Whether nothing more may be generated, before sampling: the JSON document is
    /// complete, `maxTokens` or the length limit is reached.
    private var limitReached: ServingFinishReason? {
        if let c = constraint, !c.isCallBlock, !c.matcher.canContinue { return .stop }
        if let maxTokens, generated >= maxTokens { return .length }
        if promptLength + generated >= lengthLimit { return .length }
        // A spoken reply whose detokenizer holds as many frames as a turn may have.
        if let spoken = speech, spoken.isFull { return .length }
        return nil
    }

    /// Samples the next token from `logits` and reports the text it completes through
    /// `emit`. Returns the token for the caller to evaluate, or how the completion ended
    /// (then call `finish`).
    mutating func next(
        _ logits: UnsafeBufferPointer<Float>, hiddenState: UnsafeBufferPointer<Float> = UnsafeBufferPointer(start: nil, count: 0),
        emit: (ServingEvent) -> Void
    ) throws(ServingError) -> Step {
        if let reason = limitReached { return .finished(reason) }
        if speech != nil, speech?.schedule.beginStep() == .audio { return try audioStep(hiddenState, emit: emit) }
        guard let token = try sample(logits) else { return .finished(.stop) }
        if var spoken = speech {
            let outcome = spoken.schedule.recordText(token)
            speech = spoken
            if outcome == .ended { return .finished(.stop) }
            emit(.speechStep(.text(token)))
            if outcome == .emittedAndEnded || (tokenizer.isEndOfGeneration(TokenID(token)) && !spoken.steers(token)) {
                generated += 1
                return .finished(.stop)
            }
            if spoken.steers(token) {
                // A step of the reply, not a piece of its text.
                sampler.accept(token)
                generated += 1
                return limitReached.map { .finished($0) } ?? .next(token)
            }
        } else if tokenizer.isEndOfGeneration(TokenID(token)) {
            return .finished(.stop)
        }
        if let n = logprobCount {
            let entry = TokenLogprobs(logits: logits, chosen: token, top: n)
            pendingLogprobs.append(
                ServingTokenLogprob(chosen: candidate(token, entry.chosen), top: entry.top.map { candidate($0.id, $0.logprob) }))
        }
        var callClosed = false
        if let c = constraint {
            guard c.matcher.accept(bytes: c.masks.vocabulary.tokens[token]) else {
                throw .engineFailure("internal error: the constraint rejected a token its mask allowed")
            }
            // A finished call block ends the reply, or hands it back to the model.
            if c.isCallBlock, !c.matcher.canContinue {
                constraint = nil
                callClosed = true
            }
        }
        sampler.accept(token)
        generated += 1
        let delta = detokenizer.append(TokenID(token))
        callBan?.accept(token)
        if !callClosed, constraint == nil, let opening = callOpening, callOpening?.opened(by: token, delta: delta) == true {
            constraint = GrammarConstraint(matcher: GrammarMatcher(grammar: opening.grammar), masks: opening.masks, isCallBlock: true)
        }
        release(output.feed(stops.feed(delta)), emit)
        if stops.stopped { return .finished(.stop) }
        if callClosed, !continuesAfterToolCalls { return .finished(.toolCalls) }
        return limitReached.map { .finished($0) } ?? .next(token)
    }

    /// Flushes the text held back (by the detokenizer, the stop strings and the output
    /// splitter) and returns how the completion ended: `reason`, or `.toolCalls` for a
    /// reply that stopped after calling tools. Not for a cancelled completion.
    mutating func finish(_ reason: ServingFinishReason, emit: (ServingEvent) -> Void) -> ServingFinishReason {
        if let spoken = speech {
            let tail = spoken.finish()
            if !tail.isEmpty { emit(.audio(samples: tail, sampleRate: AudioDetokenizer.sampleRate)) }
        }
        if !stops.stopped {
            let tail = stops.feed(detokenizer.finish())
            release(output.feed(tail + stops.finish()), emit)
        }
        release(output.finish(), emit)
        if !pendingLogprobs.isEmpty {
            emit(.text("", logprobs: pendingLogprobs))
            pendingLogprobs = []
        }
        return calledTools && reason == .stop ? .toolCalls : reason
    }

    /// A spoken reply's audio step: a frame from the backbone's hidden state, its samples
    /// streamed, its embedding fed back.
    private mutating func audioStep(_ hiddenState: UnsafeBufferPointer<Float>, emit: (ServingEvent) -> Void) throws(ServingError)
        -> Step
    {
        guard var spoken = speech else { return .finished(.stop) }
        let (frame, samples, embedding) = try spoken.frame(from: hiddenState)
        speech = spoken
        generated += 1
        emit(.speechStep(.frame(frame.codes)))
        if !samples.isEmpty { emit(.audio(samples: samples, sampleRate: AudioDetokenizer.sampleRate)) }
        if let reason = limitReached { return .finished(reason) }
        return .nextEmbedding(embedding, key: SpeechGeneration.key(frame))
    }

    /// Frames generated by a spoken reply (end-of-audio frames included).
    var audioFrames: Int { speech?.frames ?? 0 }

    /// Whether the next step reads the text logits: not when a spoken reply's schedule
    /// says the next step is an audio frame (made from the hidden state alone), so the
    /// step that feeds this one's token or frame can skip the output head.
    var nextStepReadsLogits: Bool { speech?.schedule.next != .audio }

    /// The token drawn from `logits` through every mask in force; nil when none is allowed.
    private mutating func sample(_ logits: UnsafeBufferPointer<Float>) throws(ServingError) -> Int? {
        let ban = callBan, ends = maskedEndTokens
        let permitted: ((Int) -> Bool)? =
            ban == nil && ends.isEmpty ? nil : { id in (ban?.allows(id) ?? true) && !ends.contains(id) }
        guard let c = constraint else { return sampler.sample(logits, allowed: permitted) }
        let mask = c.masks.mask(for: c.matcher)
        guard mask.allowedCount > 0 else {
            throw .engineFailure("the constraint allows no token after \(generated) generated tokens")
        }
        if let permitted { return sampler.sample(logits, allowed: { mask[$0] && permitted($0) }) }
        return sampler.sample(logits, allowed: { mask[$0] })
    }

    /// Passes the output splitter's events on, the pending log-probabilities with the
    /// first text.
    private mutating func release(_ events: [ServingEvent], _ emit: (ServingEvent) -> Void) {
        for event in events {
            switch event {
            case .text(let text, _):
                emit(.text(text, logprobs: pendingLogprobs))
                pendingLogprobs = []
            case .toolCalls:
                calledTools = true
                emit(event)
            default: emit(event)
            }
        }
    }

    private func candidate(_ id: Int, _ logprob: Float) -> ServingTokenLogprob.Candidate {
        ServingTokenLogprob.Candidate(
            id: id, token: tokenizer.piece(for: TokenID(id), renderSpecial: true),
            bytes: tokenizer.tokenBytes(TokenID(id), renderSpecial: true), logprob: logprob)
    }
}

/// What constrains a sequence's output from its first token: a grammar (the whole
/// reply's JSON Schema, or a call block required from the start), a call block the model
/// may open, or a ban on the call syntax.
struct ActiveConstraints {
    var grammar: GrammarConstraint?
    var callOpening: CallOpening?
    var callBan: CallMarkerBan?
}

/// A grammar being enforced on the output: a JSON Schema for the whole reply, or one
/// call block.
struct GrammarConstraint {
    let matcher: GrammarMatcher
    let masks: TokenMaskComputer
    /// A call block (it hands the reply back when it closes) rather than the whole reply.
    let isCallBlock: Bool
}

/// Watches the output for the model opening a call block (tool_choice auto).
struct CallOpening {
    let grammar: Grammar
    let masks: TokenMaskComputer
    let marker: String
    /// The marker's token when it is a single token.
    let tokenID: Int?
    /// The end of the output, as long as the marker (when the marker spans several tokens).
    private var tail = ""

    init(grammar: Grammar, masks: TokenMaskComputer, marker: String, tokenID: Int?) {
        self.grammar = grammar
        self.masks = masks
        self.marker = marker
        self.tokenID = tokenID
    }

    /// Whether `token` (whose text is `delta`) completes the call-start marker.
    mutating func opened(by token: Int, delta: String) -> Bool {
        if let id = tokenID { return token == id }
        tail += delta
        if tail.count > marker.count { tail = String(tail.suffix(marker.count)) }
        return tail.hasSuffix(marker)
    }
}

/// Forbids the call syntax while sampling (tool_choice none): no token may complete the
/// call-start marker, whether it is the marker's single token (`<|tool_call_start|>`) or
/// the last piece of the marker spelled over several tokens (`<tool_call>`).
struct CallMarkerBan {
    let tokens: CallMarkerTokens
    /// The output's last bytes, fewer than the marker's.
    private var tail: [UInt8] = []

    init(_ tokens: CallMarkerTokens) { self.tokens = tokens }

    /// Whether `id` may come next.
    func allows(_ id: Int) -> Bool {
        guard id >= 0, id < tokens.mayComplete.count, tokens.mayComplete[id] else { return true }
        return !(tail + tokens.bytes(id)).contains(subsequence: tokens.marker)
    }

    /// Records `id` as output.
    mutating func accept(_ id: Int) {
        tail += tokens.bytes(id)
        if tail.count >= tokens.marker.count { tail.removeFirst(tail.count - tokens.marker.count + 1) }
    }
}

/// The tokens that may complete a call-start marker, found once per marker and
/// vocabulary: those whose text (special tokens rendered, as the output shows them)
/// holds the marker's last byte.
final class CallMarkerTokens: Sendable {
    let marker: [UInt8]
    let mayComplete: [Bool]
    private let tokenizer: Tokenizer

    init(marker: String, tokenizer: Tokenizer) {
        self.marker = Array(marker.utf8)
        self.tokenizer = tokenizer
        let last = self.marker.last
        mayComplete = (0..<tokenizer.vocabularySize).map { id in
            last.map { tokenizer.tokenBytes(TokenID(id), renderSpecial: true).contains($0) } ?? false
        }
    }

    func bytes(_ id: Int) -> [UInt8] { tokenizer.tokenBytes(TokenID(id), renderSpecial: true) }
}

extension Array where Element == UInt8 {
    /// Whether `needle` occurs in the array.
    fileprivate func contains(subsequence needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return needle.isEmpty }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if self[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}
