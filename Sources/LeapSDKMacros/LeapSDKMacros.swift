// The library LEAP SDK v0.10 apps import for constrained generation:
//
//     import LeapSDKMacros
//
//     @Generatable("Generate creative marketing slogans for a business")
//     struct SloganResponse: Codable {
//         @Guide("A short, catchy slogan for the business (max 10 words)")
//         let shortSlogan: String
//     }
//
// In Liquid's v0.10 package, `LeapSDKMacros` is the product that declares `@Generatable`,
// `@Guide`, `GeneratableType` and `JSONSchemaGenerator`. In leap-ref they are declared in
// LeapSDK (so `import LeapSDK` alone gives them, as the seeds' code expects) and expanded by
// the compiler plugin LeapSDKMacrosPlugin; this module re-exports LeapSDK, so
// `import LeapSDKMacros`, alone or beside `import LeapSDK`, names the very same declarations.
@_exported import LeapSDK
