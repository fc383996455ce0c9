import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plugin that provides the LEAP SDK's `@Generatable` and `@Guide` macros
/// (module LeapSDKMacrosPlugin; the macros are declared in LeapSDK, and the library
/// LeapSDKMacros re-exports them).
@main
struct LeapSDKMacrosCompilerPlugin: CompilerPlugin {
    let providingMacros: [Macro.Type] = [GeneratableMacro.self, GuideMacro.self]
}
