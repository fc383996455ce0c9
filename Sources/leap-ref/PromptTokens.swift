import GGUF

/// Tokenizes prompt text with the model's tokenizer (special tokens parsed, no BOS).
func tokenizePrompt(_ text: String, file: GGUFFile) throws -> [Int] {
    throw CLIError("text prompts need the tokenizer, which is not built yet; pass --tokens")
}
