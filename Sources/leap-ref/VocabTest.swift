import Tokenizers

/// llama.cpp's tokenizer test format (`test-tokenizer-0`): an `.inp` file holds test
/// strings separated by `\n__ggml_vocab_test__\n` (with a trailing separator), and the
/// matching `.out` file has one line per string: each id preceded by a space. Strings are
/// tokenized without BOS/EOS and without special-token parsing. `leap-ref tokenize
/// --vocab-test` reads and writes it; the tokenizer tests read their fixtures with it.
enum VocabTest {
    /// The separator between test strings in an `.inp` file.
    static let separator = "\n__ggml_vocab_test__\n"

    /// The test strings of an `.inp` file.
    static func inputs(_ inp: String) -> [String] {
        var parts = inp.split(separator: separator, omittingEmptySubsequences: false).map(String.init)
        // The file ends with a separator, which leaves an empty last component.
        if parts.last == "" { parts.removeLast() }
        return parts
    }

    /// One `.out` line (without the newline): ` 1 2 3`.
    static func outputLine(_ ids: [TokenID]) -> String {
        ids.map { " \($0)" }.joined()
    }

    /// The expected ids of an `.out` file, one array per line.
    static func expectedIDs(_ out: String) -> [[TokenID]] {
        var lines = out.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last == "" { lines.removeLast() }
        return lines.map { $0.split(separator: " ").compactMap { TokenID($0) } }
    }

    /// The whole `.out` text for an `.inp` text: what `leap-ref tokenize --vocab-test` prints.
    static func run(_ tokenizer: Tokenizer, inp: String) -> String {
        inputs(inp).map { outputLine(tokenizer.encode($0, addSpecial: false, parseSpecial: false)) + "\n" }.joined()
    }
}
