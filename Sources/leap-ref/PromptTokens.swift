import GGUF
import Tokenizers

/// Tokenizes prompt text with the model's tokenizer: special tokens parsed (so
/// `<|im_start|>` is one token) and no BOS added, the golden files' convention.
func tokenizePrompt(_ text: String, file: GGUFFile) throws -> [Int] {
    let tokenizer = try Tokenizer(gguf: file)
    return tokenizer.encode(text, addSpecial: false, parseSpecial: true).map(Int.init)
}
