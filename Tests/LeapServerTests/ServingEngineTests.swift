import Foundation
import Grammar
import LeapJSON
import LeapSDKCore
import Synchronization
import TestSupport
import Testing

/// What a completion produced.
struct CompletionResult {
    var text = ""
    var reasoning = ""
    var calls: [LeapFunctionCall] = []
    var logprobs: [ServingTokenLogprob] = []
    var reason: ServingFinishReason?
    var usage: ServingUsage?
    var started = 0
}

/// Loads lfm2-tiny (the committed fixture) into a serving engine.
func tinyEngine(
    slots: Int = 1, contextSize: Int = 512, queueLimit: Int = 8, schemaLimits: JSONSchemaCompiler.Limits = .init(),
    onFinish: (@Sendable (ServingFinishReason, ServingUsage?) -> Void)? = nil
) async throws -> ServingEngine {
    let runner = try await Leap.load(
        path: TestFixtures.path("models/lfm2-tiny.gguf"),
        options: LiquidInferenceEngineOptions(cpuThreads: 2, contextSize: contextSize))
    return try ServingEngine(
        runner: runner,
        configuration: .init(
            slots: slots, contextSize: contextSize, queueLimit: queueLimit, onFinish: onFinish, schemaLimits: schemaLimits))
}

func collect(_ completion: ServingCompletion) async throws -> CompletionResult {
    var r = CompletionResult()
    for try await event in completion.events {
        switch event {
        case .started: r.started += 1
        case .text(let t, let lp):
            r.text += t
            r.logprobs += lp
        case .reasoning(let t): r.reasoning += t
        case .toolCalls(let c): r.calls += c
        case .finished(let reason, let usage):
            r.reason = reason
            r.usage = usage
        case .audio, .speechStep: Issue.record("a text model spoke")
        }
    }
    return r
}

func greedyChat(_ text: String, maxTokens: Int = 12, stop: [String] = []) -> ServingRequest {
    ServingRequest(
        prompt: .chat(messages: [ChatMessage(role: .user, textContent: text)], tools: []),
        sampling: SamplingOverrides(temperature: 0), maxTokens: maxTokens, stop: stop)
}

@Suite struct StopStringMatcherTests {
    func run(_ pieces: [String], stops: [String]) -> (String, Bool) {
        var m = StopStringMatcher(stops: stops)
        var out = ""
        for p in pieces { out += m.feed(p) }
        out += m.finish()
        return (out, m.stopped)
    }

    @Test func stopsBeforeTheFirstStopStringAcrossPieces() {
        #expect(run(["Hello wo", "rld. Bye"], stops: ["world"]) == ("Hello ", true))
        #expect(run(["a", "b", "<", "/", "s", ">", "c"], stops: ["</s>"]) == ("ab", true))
        // The earliest of several stop strings wins.
        #expect(run(["xx END yy STOP"], stops: ["STOP", "END"]) == ("xx ", true))
        // A held-back prefix that turns out not to be a stop string is released.
        #expect(run(["ab<", "/x"], stops: ["</s>"]) == ("ab</x", false))
        #expect(run(["tail <"], stops: ["</s>"]) == ("tail <", false))
        #expect(run(["no stops"], stops: []) == ("no stops", false))
        #expect(run(["é", "t", "é"], stops: ["té"]) == ("é", true))
    }

    @Test func holdsBackOnlyWhatCouldStartAStopString() {
        var m = StopStringMatcher(stops: ["###"])
        #expect(m.feed("one #") == "one ")
        #expect(m.feed("#") == "")
        #expect(m.feed(" two") == "## two")
    }
}

@Suite(.serialized) struct ServingEngineTests {
    @Test func greedyTextIsTheSameAloneAndAlongsideAnotherStream() async throws {
        let engine = try await tinyEngine(slots: 2)
        let a = try await collect(try engine.submit(greedyChat("Tell me about the sea.")))
        let b = try await collect(try engine.submit(greedyChat("List three colors, please.")))
        #expect(a.reason == .length && a.usage?.completionTokens == 12)
        #expect(!a.text.isEmpty && a.started == 1)
        // Both at once, in two slots stepped in turn, with cold caches (cache_prompt off).
        var ra = greedyChat("Tell me about the sea."), rb = greedyChat("List three colors, please.")
        ra.cachePrompt = false
        rb.cachePrompt = false
        let ca = try engine.submit(ra), cb = try engine.submit(rb)
        async let x = collect(ca)
        async let y = collect(cb)
        let (a2, b2) = try await (x, y)
        #expect(a2.text == a.text && b2.text == b.text)
        #expect(Set([a2.usage!.slot, b2.usage!.slot]) == [0, 1])
    }

    /// A request that takes its events at the end (`deliversEventsAsGenerated` false, the
    /// server's non-streamed completions) gets the events a streamed one gets, in the same
    /// order, and none of its text before the engine has finished the sequence (its
    /// `onFinish` has run).
    @Test func heldEventsAreTheStreamedOnesDeliveredAtTheEnd() async throws {
        final class Count: Sendable { let value = Atomic<Int>(0) }
        let finished = Count()
        let engine = try await tinyEngine(onFinish: { _, _ in finished.value.add(1, ordering: .sequentiallyConsistent) })
        func events(_ asGenerated: Bool) async throws -> (pieces: [String], finishedAtFirstText: Int?) {
            var request = greedyChat("Tell me about the sea.", maxTokens: 20)
            request.cachePrompt = false
            request.logprobs = 2
            request.deliversEventsAsGenerated = asGenerated
            let before = finished.value.load(ordering: .sequentiallyConsistent)
            var pieces: [String] = [], finishedAtFirstText: Int?
            for try await event in try engine.submit(request).events {
                switch event {
                case .started: pieces.append("started")
                case .text(let t, let lp):
                    if finishedAtFirstText == nil { finishedAtFirstText = finished.value.load(ordering: .sequentiallyConsistent) - before }
                    pieces.append("text \(t) \(lp.map(\.chosen.token))")
                case .reasoning(let t): pieces.append("reasoning \(t)")
                case .toolCalls(let c): pieces.append("calls \(c.count)")
                case .finished(let reason, let usage): pieces.append("finished \(reason) \(usage.completionTokens)")
                case .audio, .speechStep: pieces.append("speech")
                }
            }
            return (pieces, finishedAtFirstText)
        }
        let held = try await events(false), streamed = try await events(true)
        #expect(held.pieces == streamed.pieces)
        #expect(held.pieces.count > 4 && held.pieces.first == "started" && held.pieces.last == "finished length 20")
        #expect(held.finishedAtFirstText == 1, "held text arrives after the sequence finished")
    }

    @Test func aRepeatedPromptIsServedFromTheCacheWithTheSameText() async throws {
        let engine = try await tinyEngine()
        let first = try await collect(try engine.submit(greedyChat("What is a prompt cache?")))
        let second = try await collect(try engine.submit(greedyChat("What is a prompt cache?")))
        #expect(first.usage?.cachedTokens == 0)
        #expect(second.usage?.cachedTokens == second.usage?.promptTokens)
        #expect(second.text == first.text)
        // The next turn reuses the whole first prompt.
        let turn = ServingRequest(
            prompt: .chat(
                messages: [
                    ChatMessage(role: .user, textContent: "What is a prompt cache?"),
                    ChatMessage(role: .assistant, textContent: first.text),
                    ChatMessage(role: .user, textContent: "And why?")
                ], tools: []), sampling: SamplingOverrides(temperature: 0), maxTokens: 4)
        let third = try await collect(try engine.submit(turn))
        #expect(third.usage!.cachedTokens >= first.usage!.promptTokens - 2)
    }

    @Test func requestsGoToTheSlotHoldingTheirPrefix() async throws {
        let engine = try await tinyEngine(slots: 2)
        let long = String(repeating: "The quick brown fox jumps over the lazy dog. ", count: 8)
        let a = try await collect(try engine.submit(greedyChat("A: " + long, maxTokens: 2)))
        let b = try await collect(try engine.submit(greedyChat("B: " + long.uppercased(), maxTokens: 2)))
        #expect(a.usage?.slot == 0)
        #expect(b.usage?.slot == 1)  // a short shared start does not evict slot 0's cache
        let again = try await collect(try engine.submit(greedyChat("A: " + long + "More?", maxTokens: 2)))
        #expect(again.usage?.slot == 0)
        #expect(again.usage!.cachedTokens > a.usage!.promptTokens / 2)
        let bAgain = try await collect(try engine.submit(greedyChat("B: " + long.uppercased() + "More?", maxTokens: 2)))
        #expect(bAgain.usage?.slot == 1)
    }

    @Test func cancellingStopsWithinATokenAndFreesTheSlot() async throws {
        let engine = try await tinyEngine(contextSize: 4096)
        let completion = try engine.submit(greedyChat("Go on forever.", maxTokens: 4000))
        var events = 0
        var reason: ServingFinishReason?
        var generated = 0
        for try await event in completion.events {
            events += 1
            if events == 3 { completion.cancel() }
            if case .finished(let r, let usage) = event {
                reason = r
                generated = usage.completionTokens
            }
        }
        #expect(reason == .cancelled)
        #expect(generated < 10)
        #expect(engine.status.busySlots == 0)
        // Dropping the stream cancels too: the consuming task is cancelled mid-stream.
        let dropped = try engine.submit(greedyChat("Go on forever.", maxTokens: 4000))
        let reader = Task {
            var n = 0
            for try await _ in dropped.events { n += 1 }
            return n
        }
        reader.cancel()
        _ = try? await reader.value
        await engine.idle()
        #expect(engine.status.cancelledCompletions == 2)
        #expect(engine.status.busySlots == 0)
        let after = try await collect(try engine.submit(greedyChat("Still there?", maxTokens: 3)))
        #expect(after.reason == .length)
    }

    @Test func theQueueIsBounded() async throws {
        let engine = try await tinyEngine(slots: 1, contextSize: 4096, queueLimit: 1)
        let running = try engine.submit(greedyChat("one", maxTokens: 4000))
        let waiting = try engine.submit(greedyChat("two", maxTokens: 2))
        #expect(throws: ServingError.queueFull(limit: 1)) { try engine.submit(greedyChat("three", maxTokens: 2)) }
        running.cancel()
        let w = try await collect(waiting)
        #expect(w.reason == .length)
        _ = try await collect(running)
        await engine.shutdown(cancelRunning: true)
        #expect(throws: ServingError.shuttingDown) { try engine.submit(greedyChat("four")) }
    }

    /// A prompt over the context is counted exactly up to `promptCountingFactor` times the
    /// context, chat and raw text alike; a longer one only until that is known, and its
    /// error says "more than" that many tokens.
    @Test func overlongPromptsAreCountedUpToTheFactor() async throws {
        let engine = try await tinyEngine(contextSize: 64)
        let counted = 64 * LeapError.promptCountingFactor
        func refusal(_ request: ServingRequest) -> (tokens: Int, limit: Int, message: String)? {
            do {
                _ = try engine.submit(request)
            } catch {
                if case .promptTooLong(let tokens, let limit) = error { return (tokens, limit, error.description) }
            }
            return nil
        }
        // Twice the context: the exact count, as the prompt's own tokenization gives it.
        let twice = greedyChat(String(repeating: "word ", count: 100))
        let exact = try engine.promptTokens(twice.prompt).count
        #expect(exact > 64 && exact <= counted)
        let refused = try #require(refusal(twice))
        #expect(refused.tokens == exact && refused.limit == 64)
        #expect(refused.message == "the prompt has \(exact) tokens, which does not fit in the context of 64 tokens")
        // A long word and many words, far past the factor: counting stops, so the count is
        // a lower bound under the real one, and the message says "more than".
        for text in [String(repeating: "a", count: 200_000), String(repeating: "word ", count: 20_000)] {
            for prompt in [ServingPrompt.chat(messages: [ChatMessage(role: .user, textContent: text)], tools: []), .text(text)] {
                let request = ServingRequest(prompt: prompt, sampling: SamplingOverrides(temperature: 0), maxTokens: 4)
                let refused = try #require(refusal(request))
                let real = try engine.promptTokens(prompt).count
                #expect(refused.tokens > counted && refused.tokens < real)
                #expect(refused.message == "the prompt has more than \(counted) tokens, which does not fit in the context of 64 tokens")
            }
        }
        // Within the context, nothing changes.
        _ = try await collect(try engine.submit(greedyChat("hello")))
        await engine.shutdown(cancelRunning: true)
    }

    @Test func requestErrorsAreThrownBeforeQueueing() async throws {
        let engine = try await tinyEngine(contextSize: 64)
        let long = String(repeating: "word ", count: 200)
        #expect(throws: ServingError.self) { try engine.submit(greedyChat(long)) }
        do {
            _ = try engine.submit(greedyChat(long))
        } catch {
            guard case .promptTooLong(let tokens, let limit) = error else { throw error }
            #expect(tokens > 64 && limit == 64)
        }
        #expect(throws: ServingError.invalidRequest("prompt token id 999999 is outside the vocabulary (0..<\(engine.vocabularySize))")) {
            try engine.submit(ServingRequest(prompt: .tokens([1, 999_999])))
        }
        var bad = greedyChat("x")
        bad.constraint = .jsonSchema(["type": "object", "properties": ["a": ["$ref": "#/$defs/missing"]]])
        #expect(throws: ServingError.self) { try engine.submit(bad) }
        #expect(engine.status.busySlots == 0 && engine.status.queuedRequests == 0)
    }

    @Test func stopStringsLogprobsAndPenalties() async throws {
        let engine = try await tinyEngine()
        let plain = try await collect(try engine.submit(greedyChat("Say something.", maxTokens: 16)))
        let text = plain.text
        #expect(text.count > 4)
        // Stop at a piece from the middle of the greedy text.
        let cut = text.index(text.startIndex, offsetBy: text.count / 2)
        let stop = String(text[cut...].prefix(2))
        let stopped = try await collect(try engine.submit(greedyChat("Say something.", maxTokens: 16, stop: [stop])))
        #expect(stopped.reason == .stop)
        #expect(stopped.text == String(text[..<text.range(of: stop)!.lowerBound]))

        var withLogprobs = greedyChat("Say something.", maxTokens: 6)
        withLogprobs.logprobs = 3
        let lp = try await collect(try engine.submit(withLogprobs))
        #expect(lp.text == String(text.prefix(lp.text.count)))
        #expect(lp.logprobs.count == 6)
        for entry in lp.logprobs {
            #expect(entry.top.count == 3)
            #expect(entry.top[0].token == entry.chosen.token)  // greedy: the chosen token is the most likely
            #expect(entry.chosen.logprob <= 0 && entry.top[1].logprob <= entry.top[0].logprob)
        }
        #expect(lp.logprobs.map(\.chosen.token).joined() == lp.text)

        // Penalties act on the prompt's tokens too (llama.cpp's window of 64): a strongly
        // negative frequency penalty makes the most frequent prompt token the greedy choice,
        // a negative presence penalty any prompt token.
        let a = engine.tokenize(" river", addSpecial: false, parseSpecial: false)
        let b = engine.tokenize(" stone", addSpecial: false, parseSpecial: false)
        #expect(a.count == 1 && b.count == 1)
        func firstToken(frequency: Float, presence: Float) async throws -> String? {
            var r = ServingRequest(prompt: .tokens(a + a + a + b), sampling: SamplingOverrides(temperature: 0), maxTokens: 1)
            r.sampling.frequencyPenalty = frequency
            r.sampling.presencePenalty = presence
            r.logprobs = 0
            return try await collect(try engine.submit(r)).logprobs.first?.chosen.token
        }
        #expect(try await firstToken(frequency: -100, presence: 0) == engine.tokenPiece(a[0]))
        #expect([engine.tokenPiece(a[0]), engine.tokenPiece(b[0])].contains(try await firstToken(frequency: 0, presence: -100)))
        #expect(try await firstToken(frequency: 0, presence: 0) != nil)
    }
}
