// The module apps import: the LEAP SDK API (module LeapSDKCore, re-exported) plus the
// `@Generatable` / `@Guide` macros and `GeneratableType`.
//
// The macros live here, apart from the rest of the API, because building a macro means
// building swift-syntax (minutes in a release build): the `leap-ref` CLI and the
// `RunAnywhere` module depend on LeapSDKCore only, so `swift run -c release leap-ref chat`
// does not pay for it. See docs/architecture.md. The macros are expanded by the compiler
// plugin LeapSDKMacrosPlugin; the library LeapSDKMacros (the product LEAP SDK v0.10 apps
// import for them) re-exports this module.
@_exported import LeapSDKCore
