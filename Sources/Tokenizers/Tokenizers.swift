// The Tokenizers module; see docs/architecture.md.
