import LeapJSON
import OpenAIWire

/// A chat completion body decoded, as the request decoding suites read one.
func chat(_ text: String) throws -> ChatCompletionRequest {
    try ChatCompletionRequest(json: try JSONValue.parse(text))
}

/// The error a chat request body gets (nil: it decodes).
func chatError(_ text: String) -> WireError? {
    do {
        _ = try ChatCompletionRequest(json: try JSONValue.parse(text))
        return nil
    } catch let e as WireError {
        return e
    } catch {
        return WireError("unexpected \(error)")
    }
}
