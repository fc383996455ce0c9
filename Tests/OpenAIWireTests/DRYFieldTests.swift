import LeapJSON
import OpenAIWire
import Testing

/// llama-server's DRY fields in chat and text completion requests.
@Suite struct DRYFieldTests {
    let chatBase = #"{"messages": [{"role": "user", "content": "x"}], "#
    let textBase = #"{"prompt": "x", "#

    func sampling(_ body: String) throws -> (chat: SamplingFields, text: SamplingFields) {
        (
            try ChatCompletionRequest(json: try JSONValue.parse(chatBase + body)).sampling,
            try TextCompletionRequest(json: try JSONValue.parse(textBase + body)).sampling
        )
    }

    @Test func decodesTheFieldsInBothEndpoints() throws {
        let (chat, text) = try sampling(
            #""dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": -1, "dry_sequence_breakers": ["\n", ":"]}"#
        )
        for s in [chat, text] {
            #expect(s.dryMultiplier == 0.8 && s.dryBase == 1.75)
            #expect(s.dryAllowedLength == 2 && s.dryPenaltyLastN == -1)
            #expect(s.drySequenceBreakers == ["\n", ":"])
        }
        // Absent or null: nil (the server's or the model's defaults).
        let (plain, _) = try sampling(#""dry_multiplier": null}"#)
        #expect(plain.dryMultiplier == nil && plain.dryBase == nil && plain.drySequenceBreakers == nil)
        // Integers are numbers; 0 turns DRY off, 0 is a valid window.
        let (zero, _) = try sampling(#""dry_multiplier": 0, "dry_base": 2, "dry_penalty_last_n": 0, "dry_allowed_length": 0}"#)
        #expect(zero.dryMultiplier == 0 && zero.dryBase == 2 && zero.dryPenaltyLastN == 0 && zero.dryAllowedLength == 0)
    }

    @Test(
        arguments: [
            (#""dry_multiplier": -0.5}"#, "'dry_multiplier' must be between 0 and 100, not -0.5", "dry_multiplier"),
            (#""dry_multiplier": "high"}"#, "'dry_multiplier' must be a number, not a string", "dry_multiplier"),
            (#""dry_base": 0.5}"#, "'dry_base' must be between 1 and 100, not 0.5", "dry_base"),
            (#""dry_base": 101}"#, "'dry_base' must be between 1 and 100, not 101", "dry_base"),
            (#""dry_allowed_length": -1}"#, "'dry_allowed_length' must be at least 0, not -1", "dry_allowed_length"),
            (#""dry_allowed_length": 2.5}"#, "'dry_allowed_length' must be an integer, not a number", "dry_allowed_length"),
            (#""dry_penalty_last_n": -2}"#, "'dry_penalty_last_n' must be at least -1, not -2", "dry_penalty_last_n"),
            (#""dry_penalty_last_n": true}"#, "'dry_penalty_last_n' must be an integer, not a boolean", "dry_penalty_last_n"),
            (
                #""dry_sequence_breakers": []}"#, "'dry_sequence_breakers' must be a non-empty array of strings",
                "dry_sequence_breakers"
            ),
            (
                #""dry_sequence_breakers": "\n"}"#, "'dry_sequence_breakers' must be an array, not a string",
                "dry_sequence_breakers"
            ),
            (
                #""dry_sequence_breakers": ["\n", 3]}"#, "'dry_sequence_breakers[1]' must be a string, not an integer",
                "dry_sequence_breakers[1]"
            ),
            (#""dry_sequence_breakers": [""]}"#, "'dry_sequence_breakers[0]' must not be empty", "dry_sequence_breakers[0]"),
            (
                #""dry_sequence_breakers": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}"#,
                "'dry_sequence_breakers' may hold at most 16 strings, not 17", "dry_sequence_breakers"
            )
        ] as [(String, String, String?)])
    func rejectsBadValuesWithTheirField(body: String, message: String, param: String?) {
        for base in [chatBase, textBase] {
            do {
                let json = try JSONValue.parse(base + body)
                if base == chatBase { _ = try ChatCompletionRequest(json: json) } else { _ = try TextCompletionRequest(json: json) }
                Issue.record("accepted \(body)")
            } catch let e as WireError {
                #expect(e.message == message)
                #expect(e.param == param)
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}
