import LeapJSON
import LeapSDK
import Testing

/// The events of one stream, reduced to comparable text.
private func describe(_ events: [FunctionCallStreamSplitter.Event]) -> [String] {
    events.map { event in
        switch event {
        case .text(let t): return "text:" + t
        case .calls(let calls, let raw):
            return "calls:" + calls.map { $0.name + JSONValue.object($0.argumentsJSON).serialized() }.joined(separator: ";") + "|raw:" + raw
        case .malformed(let raw, let error): return "malformed:" + raw + "|" + error
        }
    }
}

/// Joins consecutive text events (how text is cut into events depends on the deltas).
private func mergeText(_ events: [FunctionCallStreamSplitter.Event]) -> [String] {
    var merged: [FunctionCallStreamSplitter.Event] = []
    for event in events {
        if case .text(let t) = event, case .text(let previous)? = merged.last {
            merged[merged.count - 1] = .text(previous + t)
        } else {
            merged.append(event)
        }
    }
    return describe(merged)
}

private func run(_ parser: some LeapFunctionCallParserProtocol, _ deltas: [String]) -> [FunctionCallStreamSplitter.Event] {
    var splitter = FunctionCallStreamSplitter(parser: parser)
    var events: [FunctionCallStreamSplitter.Event] = []
    for d in deltas { events += splitter.feed(d) }
    return events + splitter.finish()
}

/// A parser with no markers: everything is text.
private struct NoMarkerParser: LeapFunctionCallParserProtocol {
    var callStartMarker: String { "" }
    var callEndMarker: String { "" }
    func parseCalls(_ body: String) throws -> [LeapFunctionCall] { [] }
    func formatCalls(_ calls: [LeapFunctionCall]) -> String { "" }
}

@Suite struct FunctionCallingSplitterTests {
    static let lfmStream =
        "Sure — é👩‍👩‍👧 <|tool_call_start|>[get_weather(city=\"NYC\")]<|tool_call_end|> and <|tool_call_start|>[broken(<|tool_call_end|>done <|"
    static let lfmExpected = [
        "text:Sure — é👩‍👩‍👧 ",
        #"calls:get_weather{"city":"NYC"}|raw:<|tool_call_start|>[get_weather(city="NYC")]<|tool_call_end|>"#,
        "text: and ",
        "malformed:<|tool_call_start|>[broken(<|tool_call_end|>|invalid function call at byte 8: unterminated call to 'broken': missing ')' for the '(' at byte 7",
        "text:done <|"
    ]

    @Test func wholeStreamInOneDelta() {
        #expect(mergeText(run(LFMFunctionCallParser(), [Self.lfmStream])) == Self.lfmExpected)
    }

    @Test func everySplitIntoTwoDeltas() {
        let scalars = Array(Self.lfmStream.unicodeScalars)
        for i in 0...scalars.count {
            let a = String(String.UnicodeScalarView(scalars[..<i])), b = String(String.UnicodeScalarView(scalars[i...]))
            let got = mergeText((run(LFMFunctionCallParser(), [a, b])))
            #expect(got == Self.lfmExpected, "split at \(i)")
        }
    }

    @Test func everySplitIntoThreeDeltas() {
        let stream = "a<|tool_call_start|>[f(x=1)]<|tool_call_end|>b<"
        let expected = ["text:a", #"calls:f{"x":1}|raw:<|tool_call_start|>[f(x=1)]<|tool_call_end|>"#, "text:b<"]
        let chars = Array(stream)
        for i in 0...chars.count {
            for j in i...chars.count {
                let deltas = [String(chars[..<i]), String(chars[i..<j]), String(chars[j...])]
                #expect(mergeText((run(LFMFunctionCallParser(), deltas))) == expected, "split at \(i), \(j)")
            }
        }
    }

    @Test func oneScalarAtATime() {
        let deltas = Self.lfmStream.unicodeScalars.map { String($0) }
        #expect(mergeText((run(LFMFunctionCallParser(), deltas))) == Self.lfmExpected)
    }

    @Test func textIsEmittedAsEarlyAsSafe() {
        var splitter = FunctionCallStreamSplitter(parser: LFMFunctionCallParser())
        #expect(describe(splitter.feed("Hello <|tool")) == ["text:Hello "])
        #expect(describe(splitter.feed("x")) == ["text:<|toolx"])
        #expect(describe(splitter.feed("a <")) == ["text:a "])
        #expect(describe(splitter.feed(" b")) == ["text:< b"])
        #expect(describe(splitter.feed("plain")) == ["text:plain"])
        #expect(describe(splitter.feed("<|tool_call_start|>[f(")) == [])
        #expect(splitter.isInsideCallBlock)
        #expect(describe(splitter.feed(")]<|tool_call_end")) == [])
        #expect(describe(splitter.feed("|>")) == ["calls:f{}|raw:<|tool_call_start|>[f()]<|tool_call_end|>"])
        #expect(!splitter.isInsideCallBlock)
        #expect(describe(splitter.finish()) == [])
    }

    @Test func textHeldBackIsReleasedByFinish() {
        var splitter = FunctionCallStreamSplitter(parser: LFMFunctionCallParser())
        #expect(describe(splitter.feed("end <|tool_call_st")) == ["text:end "])
        #expect(describe(splitter.finish()) == ["text:<|tool_call_st"])
    }

    @Test func unclosedBlockIsMalformedAtFinish() {
        var splitter = FunctionCallStreamSplitter(parser: LFMFunctionCallParser())
        #expect(describe(splitter.feed("x<|tool_call_start|>[f(a=1)]")) == ["text:x"])
        #expect(
            describe(splitter.finish()) == ["malformed:<|tool_call_start|>[f(a=1)]|the call block was not closed with <|tool_call_end|>"])
    }

    @Test func startMarkerInsideABlockIsBody() {
        let events = describe(run(LFMFunctionCallParser(), ["<|tool_call_start|>[f(s=\"<|tool_call_start|>\")]<|tool_call_end|>"]))
        #expect(events == [#"calls:f{"s":"<|tool_call_start|>"}|raw:<|tool_call_start|>[f(s="<|tool_call_start|>")]<|tool_call_end|>"#])
    }

    @Test func hermesSeveralBlocks() {
        let stream =
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": \"{}\"}\n</tool_call>"
        let expected = [
            "calls:f{\"a\":1}|raw:<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
            "text:\n",
            "calls:g{}|raw:<tool_call>\n{\"name\": \"g\", \"arguments\": \"{}\"}\n</tool_call>"
        ]
        let chars = Array(stream)
        for i in 0...chars.count {
            let got = mergeText((run(HermesFunctionCallParser(), [String(chars[..<i]), String(chars[i...])])))
            #expect(got == expected, "split at \(i)")
        }
    }

    @Test func hermesMalformedBlock() {
        let events = describe(run(HermesFunctionCallParser(), ["a<tool_call>{\"name\": 1}</tool_call>b"]))
        #expect(
            events == [
                "text:a",
                "malformed:<tool_call>{\"name\": 1}</tool_call>|invalid function call at byte 0: the call object's \"name\" must be a non-empty string",
                "text:b"
            ])
    }

    @Test func streamIsLosslessForRandomDeltas() {
        var rng = SplitMix64(seed: 11)
        let pieces = ["<|tool_call_start|>", "<|tool_call_end|>", "<|", "<", "|>", "[f(a=1)]", "text ", "é", "👩‍👩‍👧", "[", "(", "\""]
        for _ in 0..<300 {
            let stream = (0..<Int.random(in: 0...10, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            let scalars = Array(stream.unicodeScalars)
            var deltas: [String] = []
            var i = 0
            while i < scalars.count {
                let n = Int.random(in: 1...5, using: &rng)
                deltas.append(String(String.UnicodeScalarView(scalars[i..<min(i + n, scalars.count)])))
                i += n
            }
            var rebuilt = ""
            for event in run(LFMFunctionCallParser(), deltas) {
                switch event {
                case .text(let t): rebuilt += t
                case .calls(_, let raw): rebuilt += raw
                case .malformed(let raw, _): rebuilt += raw
                }
            }
            #expect(rebuilt == stream)
        }
    }

    @Test func emptyMarkersMeanAllText() {
        #expect(describe(run(NoMarkerParser(), ["a<|tool_call_start|>", "b"])) == ["text:a<|tool_call_start|>", "text:b"])
    }
}
