import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plugin that provides the LEAP SDK's `@Generatable` and `@Guide` macros.
@main
struct LeapSDKMacrosPlugin: CompilerPlugin {
    let providingMacros: [Macro.Type] = [GeneratableMacro.self, GuideMacro.self]
}
