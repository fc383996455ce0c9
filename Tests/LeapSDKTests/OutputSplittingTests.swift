import GGUF
import Testing

@testable import LeapSDKCore

@Suite struct OutputSplittingTests {
    /// Feeds `text` in pieces cut at every position and checks the split is the same.
    @Test func reasoningIsSplitWhereverTheMarkersAreCut() {
        let text = "<think>step 1, then <b>2</b></think>The answer is 4.<think>more</think> Done."
        for cut in 0...text.count {
            var s = ReasoningSplitter()
            let i = text.index(text.startIndex, offsetBy: cut)
            let pieces = s.feed(String(text[..<i])) + s.feed(String(text[i...])) + s.finish()
            let reasoning = pieces.compactMap { if case .reasoning(let r) = $0 { return r } else { return nil } }.joined()
            let reply = pieces.compactMap { if case .reply(let r) = $0 { return r } else { return nil } }.joined()
            #expect(reasoning == "step 1, then <b>2</b>more", "cut at \(cut)")
            #expect(reply == "The answer is 4. Done.", "cut at \(cut)")
        }
    }

    @Test func assemblerSeparatesReasoningCallsAndText() {
        var a = OutputAssembler(parser: LFMFunctionCallParser())
        var events: [ServingEvent] = []
        for piece in ["<thi", "nk>plan</th", "ink>Checking. <|tool_call_", "start|>[get_weather(city=\"Paris\")]<|tool_call_end|>", " ok"] {
            events += a.feed(piece)
        }
        events += a.finish()
        var reply = ServingReply()
        for event in events { reply.add(event) }
        #expect(reply.reasoning == "plan")
        #expect(reply.text == "Checking.  ok")
        #expect(reply.toolCalls.map(\.name) == ["get_weather"])
        #expect(reply.toolCalls.first?.arguments["city"] as? String == "Paris")
        let message = reply.message
        #expect(message.reasoningContent == "plan")
        #expect(message.textContent == "Checking.  ok")
        #expect(message.functionCalls?.count == 1)
    }

    @Test func withoutAParserCallTextIsPlainText() {
        var a = OutputAssembler(parser: nil)
        let raw = "<|tool_call_start|>[f()]<|tool_call_end|>"
        var reply = ServingReply()
        for event in a.feed(raw) + a.finish() { reply.add(event) }
        #expect(reply.text == raw)
        #expect(reply.message.functionCalls == nil && reply.message.reasoningContent == nil)
    }

    @Test func malformedCallTextIsPassedThroughWithAWarning() {
        var a = OutputAssembler(parser: LFMFunctionCallParser())
        let raw = "<|tool_call_start|>[f(1, 2]<|tool_call_end|>"
        var reply = ServingReply()
        for event in a.feed(raw) + a.finish() { reply.add(event) }
        #expect(reply.message.textContent == raw)
        #expect(reply.message.functionCalls == nil)
        #expect(a.warnings.count == 1)
    }

    @Test func samplingDefaultsComeFromTheModelWhenPresent() {
        var m = GGUFMetadata()
        #expect(LoadedModel.samplingDefaults(m).temperature == 0.8)
        m.set("general.sampling.temp", .float32(0.3))
        m.set("general.sampling.top_k", .int32(20))
        m.set("general.sampling.min_p", .float32(0.15))
        m.set("general.sampling.penalty_repeat", .float32(1.05))
        let p = LoadedModel.samplingDefaults(m)
        #expect(p.temperature == 0.3)
        #expect(p.topK == 20)
        #expect(abs(p.minP - 0.15) < 1e-6)
        #expect(abs(p.repetitionPenalty - 1.05) < 1e-6)
        #expect(p.topP == 0.95)
    }
}
