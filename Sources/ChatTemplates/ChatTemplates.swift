// The ChatTemplates module; see docs/architecture.md.
