import Dispatch
import Foundation
import Models

// The round scheduler of `ServingEngine`: admission of queued requests into slots, and
// the rounds that step every running sequence together. Everything here runs on the
// engine's queue.

extension ServingEngine {
    /// What a slot evaluates in a round's shared step.
    enum StepWork {
        /// The token it just sampled.
        case token(Int)
        /// A spoken reply's audio frame, fed back as an embedding row (its prompt-cache key).
        case frame(key: Int)
        /// Its prompt's tokens up to this index.
        case prompt(end: Int)
    }

    /// Runs a round on the queue soon, unless one is already scheduled.
    func scheduleRound() {
        let schedule = lock.withLock { () -> Bool in
            if roundScheduled { return false }
            roundScheduled = true
            return true
        }
        if schedule { loaded.queue.async { self.runRound() } }
    }

    /// One round: admits waiting requests into idle slots, samples the next token of every
    /// generating sequence, adds the next chunk of every prompt being processed (oldest
    /// request first, while the step has room), and evaluates all of it in one forward
    /// pass of the batched session, which reads the weights once for every sequence.
    func runRound() {
        dispatchPrecondition(condition: .onQueue(loaded.queue))
        lock.withLock { roundScheduled = false }
        admit()
        // The round's step, in buffers kept from round to round (emptied after the step, so
        // that they hold no finished request).
        defer {
            stepInputs.removeAll(keepingCapacity: true)
            stepWork.removeAll(keepingCapacity: true)
        }
        var room = batch.maxStepTokens
        for slot in slots {
            guard let seq = slot.sequence, seq.prefilled else { continue }
            if seq.job.cancel.isCancelled {
                finish(slot, .cancelled)
                continue
            }
            switch sampleNext(slot, seq) {
            case .next(let token)?:
                var input = BatchedSession.Input(slot.handle, [token])
                input.needsLogits = seq.generation?.nextStepReadsLogits ?? true
                stepInputs.append(input)
                stepWork.append((slot, seq, .token(token)))
            case .nextEmbedding(let row, let key)?:
                stepInputs.append(.init(slot.handle, embeddings: row, needsLogits: seq.generation?.nextStepReadsLogits ?? true))
                stepWork.append((slot, seq, .frame(key: key)))
            case .finished?, nil: continue
            }
            room -= 1
        }
        // Prompts in progress, oldest request first.
        let prompts = slots.filter { $0.sequence.map { !$0.prefilled } ?? false }.sorted {
            $0.sequence!.job.id < $1.sequence!.job.id
        }
        var olderPrompt = false
        for slot in prompts {
            guard let seq = slot.sequence else { continue }
            if seq.job.cancel.isCancelled {
                finish(slot, .cancelled)
                continue
            }
            // A media chunk still to encode waits while an older prompt is in progress. The
            // encoder runs inside the round, so the round's step (and every sequence in it)
            // waits for it: encoding several requests' images in one round would give each
            // its first token only after all of them. One at a time, oldest first, the first
            // request answers after its own image alone. Token chunks go on meanwhile.
            if olderPrompt, needsEncoder(seq) { continue }
            olderPrompt = true
            let end = chunkEnd(seq)
            guard end - seq.promptOffset <= room else { break }
            do {
                stepInputs.append(try promptInput(seq, end: end, slot: slot))
            } catch {
                fail(slot, error)
                continue
            }
            stepWork.append((slot, seq, .prompt(end: end)))
            room -= end - seq.promptOffset
        }
        if !stepInputs.isEmpty { evaluate(stepInputs, stepWork) }
        let more = lock.withLock { !waiting.isEmpty && busy.contains(false) } || slots.contains { $0.sequence != nil }
        if more {
            scheduleRound()
        } else if !idleWaiters.isEmpty && lock.withLock({ waiting.isEmpty }) {
            let waiters = idleWaiters
            idleWaiters = []
            for w in waiters { w() }
        }
    }

    /// Where the prompt chunk that starts at `seq.promptOffset` ends: `prefillChunk`
    /// positions, never across a boundary between tokens and a media chunk (a step input is
    /// tokens or embedding rows), and cut so that the last chunk has at least two (the
    /// prompt's last token goes through the batch path, as in `CachedSequence`). A prompt
    /// is cut the same way whatever else runs, so its results do not depend on the other
    /// sequences.
    private func chunkEnd(_ seq: SlotSequence) -> Int {
        let prompt = seq.job.prompt, count = prompt.count, start = seq.promptOffset
        let (piece, pieceStart) = prompt.piece(at: start)
        let pieceEnd = pieceStart + piece.count
        var end = min(pieceEnd, start + prefillChunk)
        if pieceEnd == count, end == count - 1, end - 1 > start { end -= 1 }
        return end
    }

    /// Whether the prompt's next chunk is a media chunk whose encoder has not run yet.
    private func needsEncoder(_ seq: SlotSequence) -> Bool {
        if case .media(let chunk) = seq.job.prompt.piece(at: seq.promptOffset).piece { return !chunk.isEncoded }
        return false
    }

    /// The step input of the prompt's positions `seq.promptOffset ..< end`: its tokens, or
    /// its media chunk's rows (the encoder runs here the first time a chunk is needed).
    private func promptInput(_ seq: SlotSequence, end: Int, slot: ServingSlot) throws(ServingError) -> BatchedSession.Input {
        let start = seq.promptOffset
        let (piece, pieceStart) = seq.job.prompt.piece(at: start)
        switch piece {
        case .tokens(let ids):
            return .init(slot.handle, Array(ids[(start - pieceStart)..<(end - pieceStart)]))
        case .media(let chunk):
            let rows = try chunk.embeddings()
            let width = rows.count / max(1, chunk.positions)
            let input = BatchedSession.Input(
                slot.handle, embeddings: Array(rows[((start - pieceStart) * width)..<((end - pieceStart) * width)]))
            // The chunk's last rows: its embeddings are no longer needed.
            if end == pieceStart + chunk.positions { chunk.release() }
            return input
        }
    }

    /// Runs one shared step and records what it evaluated in each slot's prompt cache.
    private func evaluate(_ inputs: [BatchedSession.Input], _ work: [(ServingSlot, SlotSequence, StepWork)]) {
        lock.withLock {
            passCount += 1
            sequenceStepCount += inputs.count
        }
        do {
            try batch.step(inputs)
        } catch {
            for (slot, _, _) in work {
                slot.cache.reset()
                fail(slot, .engineFailure("\(error)"))
            }
            return
        }
        for (slot, seq, item) in work {
            switch item {
            case .token(let t):
                slot.cache.tokenEvaluated(t)
            case .frame(let key):
                slot.cache.tokenEvaluated(key)
            case .prompt(let end):
                seq.promptOffset = end
                if end == seq.job.tokens.count {
                    slot.cache.promptEvaluated(seq.job.tokens)
                    beginGeneration(slot, seq)
                }
            }
        }
    }

    private func admit() {
        let now = DispatchTime.now().uptimeNanoseconds
        var admitted: [ServingSlot] = []
        lock.withLock {
            while !waiting.isEmpty, let slot = bestSlot(for: waiting[0].tokens) {
                let job = waiting.removeFirst()
                busy[slot.index] = true
                slot.lastUsed = now
                slot.sequence = SlotSequence(job: job, admitted: now)
                admitted.append(slot)
            }
        }
        for slot in admitted { beginPrompt(slot) }
    }

    /// The idle slot sharing the longest prefix with `tokens`, if that prefix is at least a
    /// tenth of the prompt (as llama-server's default `slot_prompt_similarity`); otherwise
    /// the least recently used idle slot, so that a short shared start (the chat
    /// template's first tokens) does not evict another client's cache. Call on the queue,
    /// under the lock.
    private func bestSlot(for tokens: [Int]) -> ServingSlot? {
        let idle = slots.filter { !busy[$0.index] }
        guard let leastRecent = idle.min(by: { $0.lastUsed < $1.lastUsed }) else { return nil }
        var best = leastRecent
        var bestShared = 0
        for slot in idle {
            let shared = slot.cache.sharedPrefix(with: tokens)
            if shared > bestShared {
                best = slot
                bestShared = shared
            }
        }
        return bestShared * 10 >= tokens.count ? best : leastRecent
    }

    /// Keeps the slot's reusable prefix of the new request's prompt; the rest is evaluated
    /// chunk by chunk in the following rounds (or nothing, when the whole prompt is cached).
    private func beginPrompt(_ slot: ServingSlot) {
        guard let seq = slot.sequence else { return }
        let job = seq.job
        seq.promptStart = DispatchTime.now().uptimeNanoseconds
        seq.cachedTokens = slot.cache.startPrompt(job.tokens, reuseCache: job.request.cachePrompt)
        seq.promptOffset = seq.cachedTokens
        if seq.promptOffset == job.tokens.count { beginGeneration(slot, seq) }
    }

    /// The prompt is in the caches: sets up the sequence's generation (sampler,
    /// constraints, output) and reports `.started`.
    private func beginGeneration(_ slot: ServingSlot, _ seq: SlotSequence) {
        let job = seq.job
        lock.withLock { cachedPromptCounts[slot.index] = slot.cache.cachedTokens.count }
        seq.promptEnd = DispatchTime.now().uptimeNanoseconds
        // Under tool_choice none, text is never parsed as a call.
        let outputParser = job.isChat && job.request.toolChoice != .none ? job.callParser : nil
        seq.generation = SequenceGeneration(
            tokenizer: loaded.tokenizer, sampling: job.sampling, prompt: job.tokens, constraints: activeConstraints(job),
            callParser: outputParser, splitsReasoning: job.isChat, stops: job.request.stop, maxTokens: job.request.maxTokens,
            lengthLimit: job.lengthLimit,
            logprobs: job.request.logprobs, ignoresEndOfGeneration: job.request.ignoreEndOfGeneration,
            continuesAfterToolCalls: job.request.continuesAfterToolCalls,
            speech: job.request.speech.flatMap { request in
                loaded.speech.map {
                    SpeechGeneration(parts: $0, request: request, textTemperature: job.sampling.temperature, seed: job.sampling.seed)
                }
            })
        job.continuation.yield(.started(promptTokens: job.tokens.count, cachedTokens: seq.cachedTokens, slot: slot.index))
    }

    /// The sequence's next input, from its logits (and hidden state) through its
    /// generation step (its text and audio streamed to the client): a token, or a spoken
    /// reply's frame embedding; nil when the completion ended (then it is finished and the
    /// slot free).
    private func sampleNext(_ slot: ServingSlot, _ seq: SlotSequence) -> SequenceGeneration.Step? {
        // Taken out while it steps, so that its sampler's buffers (the candidates: 16 bytes
        // a vocabulary entry, 4 MiB for Gemma 3) are not shared with the copy left behind
        // and copied on every token; put back below.
        guard var generation = seq.generation.take() else { return nil }
        let step: SequenceGeneration.Step
        do {
            step = try slot.cache.withNextLogits { logits, hiddenState throws(ServingError) in
                try generation.next(logits, hiddenState: hiddenState) { seq.deliver($0) }
            }
        } catch {
            seq.generation = generation
            fail(slot, error)
            return nil
        }
        seq.generation = generation
        switch step {
        case .next, .nextEmbedding:
            if seq.job.cancel.isCancelled {
                finish(slot, .cancelled)
                return nil
            }
            return step
        case .finished(let reason):
            finish(slot, reason)
            return nil
        }
    }

    /// Ends the slot's completion with `error` and frees the slot.
    private func fail(_ slot: ServingSlot, _ error: ServingError) {
        guard let seq = slot.sequence else { return }
        release(slot)
        seq.deliverHeldEvents()
        seq.job.continuation.finish(throwing: error)
    }

    /// Flushes the sequence's held-back text, reports how it ended and frees the slot.
    private func finish(_ slot: ServingSlot, _ reason: ServingFinishReason) {
        guard let seq = slot.sequence else { return }
        var reason = reason
        if reason != .cancelled, var generation = seq.generation.take() {
            reason = generation.finish(reason) { seq.deliver($0) }
            seq.generation = generation
        }
        let now = DispatchTime.now().uptimeNanoseconds
        let promptStart = seq.promptStart ?? now, promptEnd = seq.promptEnd ?? now
        var usage = ServingUsage(
            promptTokens: seq.job.tokens.count, cachedTokens: seq.cachedTokens, completionTokens: seq.generation?.generated ?? 0,
            queueSeconds: Double(promptStart - seq.job.submitted) / 1e9,
            promptSeconds: Double(promptEnd - promptStart) / 1e9,
            generationSeconds: Double(now - promptEnd) / 1e9, slot: slot.index)
        usage.audioFrames = seq.generation?.audioFrames ?? 0
        usage.firstAudioSeconds = seq.firstAudio.map { Double($0 - seq.job.submitted) / 1e9 }
        lock.withLock {
            finishedCount += 1
            if reason == .cancelled { cancelledCount += 1 }
        }
        // The slot is free before anyone hears of the end.
        release(slot)
        configuration.onFinish?(reason, usage)
        seq.deliverHeldEvents()
        seq.job.continuation.yield(.finished(reason, usage))
        seq.job.continuation.finish()
    }

    private func release(_ slot: ServingSlot) {
        slot.sequence = nil
        slot.lastUsed = DispatchTime.now().uptimeNanoseconds
        lock.withLock {
            busy[slot.index] = false
            cachedPromptCounts[slot.index] = slot.cache.cachedTokens.count
        }
    }
}
