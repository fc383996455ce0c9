// The Kernels module; see docs/architecture.md.
