import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Generatable("description")` on a struct: adds an extension conforming the struct to
/// `LeapSDK.GeneratableType` whose `generatableSchema` describes the struct's stored
/// properties (in declaration order) for constrained generation.
///
/// Each stored property's declared type is read from the syntax:
/// - `String`; `Int`, `Int8`…`Int64`, `UInt`…`UInt64`; `Double`, `Float`; `Bool` map to
///   the JSON Schema types string, integer, number, boolean;
/// - `[T]` / `Array<T>` maps to an array of `T`;
/// - `T?` / `Optional<T>` maps to `T`'s schema, and the property is left out of `required`
///   (inside an array, an optional element is `T` or `null`);
/// - any other named type is assumed to conform to `GeneratableType` (another
///   `@Generatable` struct) and its schema is inlined; if it does not conform the type
///   checker reports that.
///
/// Dictionaries, tuples, function types, `some`/`any` types, other generic types and a few
/// known non-generatable Foundation types are rejected with a diagnostic naming the
/// property. Static, computed and `lazy` properties and `let` constants with an initial value
/// (which `Decodable` does not decode) are skipped.
public struct GeneratableMacro: ExtensionMacro {
    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard let structDecl = declaration.as(StructDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: GeneratableDiagnostic.notAStruct(kind: declarationKind(declaration))))
            return []
        }
        guard let description = descriptionArgument(of: node, in: context) else { return [] }

        // A custom CodingKeys enum renames the JSON keys, which the schema cannot see.
        for member in structDecl.memberBlock.members {
            if let nested = member.decl.as(EnumDeclSyntax.self), nested.name.text == "CodingKeys" {
                context.diagnose(Diagnostic(node: nested.name, message: GeneratableDiagnostic.customCodingKeys))
                return []
            }
        }

        var propertyExpressions: [String] = []
        var failed = false
        for member in structDecl.memberBlock.members {
            guard let variable = member.decl.as(VariableDeclSyntax.self) else { continue }
            guard let properties = storedProperties(of: variable, in: context) else {
                failed = true
                continue
            }
            for property in properties {
                switch schemaExpression(for: property.type) {
                case .success(let schema):
                    let guide = guideDescription(of: variable, in: context)
                    propertyExpressions.append(
                        "LeapSDK.GeneratableSchema.Property(name: \"\(property.name)\", schema: \(schema.expression), "
                            + "description: \(guide ?? "nil"), isRequired: \(schema.isOptional ? "false" : "true"))"
                    )
                case .failure(let problem):
                    context.diagnose(
                        Diagnostic(
                            node: property.type,
                            message: GeneratableDiagnostic.unsupportedType(property: property.name, reason: problem.reason)
                        ))
                    failed = true
                }
            }
        }
        if failed { return [] }

        let access = accessModifier(of: structDecl)
        let propertyList =
            propertyExpressions.isEmpty
            ? "[]"
            : "[\n" + propertyExpressions.map { "            " + $0 }.joined(separator: ",\n") + ",\n        ]"
        let source: DeclSyntax = """
            extension \(type.trimmed): LeapSDK.GeneratableType {
                \(raw: access)static var generatableSchema: LeapSDK.GeneratableSchema {
                    LeapSDK.GeneratableSchema.object(
                        description: \(raw: description),
                        properties: \(raw: propertyList)
                    )
                }
            }
            """
        guard let extensionDecl = source.as(ExtensionDeclSyntax.self) else { return [] }
        return [extensionDecl]
    }

    // MARK: - Reading the declaration

    /// A stored property: its JSON key and declared type.
    struct StoredProperty {
        let name: String
        let type: TypeSyntax
    }

    /// The stored, decodable properties a variable declaration introduces, or nil (after a
    /// diagnostic) when one of them has no type annotation.
    static func storedProperties(of variable: VariableDeclSyntax, in context: some MacroExpansionContext) -> [StoredProperty]? {
        let skippedModifiers: Set<String> = ["static", "class", "lazy"]
        if variable.modifiers.contains(where: { skippedModifiers.contains($0.name.text) }) { return [] }
        let isLet = variable.bindingSpecifier.tokenKind == .keyword(.let)

        // In `let a, b: String` the annotation of `b` applies to `a` as well: walk backwards.
        var result: [StoredProperty] = []
        var trailingType: TypeSyntax?
        var missingType = false
        for binding in variable.bindings.reversed() {
            if let annotation = binding.typeAnnotation { trailingType = annotation.type }
            if let accessors = binding.accessorBlock, isComputed(accessors) { continue }
            if isLet && binding.initializer != nil { continue }
            guard let pattern = binding.pattern.as(IdentifierPatternSyntax.self) else {
                context.diagnose(Diagnostic(node: binding.pattern, message: GeneratableDiagnostic.unsupportedPattern))
                missingType = true
                continue
            }
            let name = pattern.identifier.text.filter { $0 != "`" }
            guard let type = binding.typeAnnotation?.type ?? (binding.initializer == nil ? trailingType : nil) else {
                context.diagnose(Diagnostic(node: pattern, message: GeneratableDiagnostic.missingTypeAnnotation(property: name)))
                missingType = true
                continue
            }
            result.append(StoredProperty(name: name, type: type))
        }
        return missingType ? nil : result.reversed()
    }

    /// Whether an accessor block makes a property computed (a getter), as opposed to
    /// stored with `willSet`/`didSet` observers.
    static func isComputed(_ block: AccessorBlockSyntax) -> Bool {
        switch block.accessors {
        case .getter:
            return true
        case .accessors(let list):
            return list.contains { accessor in
                let kind = accessor.accessorSpecifier.tokenKind
                return kind != .keyword(.willSet) && kind != .keyword(.didSet)
            }
        }
    }

    /// The source of the `@Guide("…")` description on a variable declaration, if any.
    static func guideDescription(of variable: VariableDeclSyntax, in context: some MacroExpansionContext) -> String? {
        for element in variable.attributes {
            guard let attribute = element.as(AttributeSyntax.self),
                attribute.attributeName.trimmedDescription == "Guide"
                    || attribute.attributeName.trimmedDescription == "LeapSDK.Guide"
            else { continue }
            return descriptionArgument(of: attribute, in: context)
        }
        return nil
    }

    /// The source text of a macro attribute's single description argument, or nil after a
    /// diagnostic when it is missing.
    static func descriptionArgument(of attribute: AttributeSyntax, in context: some MacroExpansionContext) -> String? {
        guard case .argumentList(let arguments) = attribute.arguments, let first = arguments.first else {
            context.diagnose(Diagnostic(node: attribute, message: GeneratableDiagnostic.missingDescription))
            return nil
        }
        return first.expression.trimmedDescription
    }

    /// `public` or `package` when the struct has that access level, so the conformance's
    /// requirement is as visible as the type; otherwise nothing (the default).
    static func accessModifier(of decl: StructDeclSyntax) -> String {
        for modifier in decl.modifiers {
            switch modifier.name.tokenKind {
            case .keyword(.public), .keyword(.open): return "public "
            case .keyword(.package): return "package "
            default: continue
            }
        }
        return ""
    }

    static func declarationKind(_ decl: some DeclGroupSyntax) -> String {
        if decl.is(ClassDeclSyntax.self) { return "a class" }
        if decl.is(EnumDeclSyntax.self) { return "an enum" }
        if decl.is(ActorDeclSyntax.self) { return "an actor" }
        if decl.is(ProtocolDeclSyntax.self) { return "a protocol" }
        if decl.is(ExtensionDeclSyntax.self) { return "an extension" }
        return "this declaration"
    }

    // MARK: - Types to schema expressions

    /// The schema expression of a property type and whether the property is optional.
    struct SchemaSource {
        let expression: String
        let isOptional: Bool
    }

    struct UnsupportedType: Error {
        let reason: String
    }

    static let integerTypes: Set<String> = ["Int", "Int8", "Int16", "Int32", "Int64", "UInt", "UInt8", "UInt16", "UInt32", "UInt64"]
    static let numberTypes: Set<String> = ["Double", "Float"]
    /// Common types that are Codable but have no JSON Schema mapping here.
    static let knownUnsupported: [String: String] = [
        "Dictionary": "dictionaries are not supported (use a @Generatable struct)",
        "Set": "sets are not supported (use an array)",
        "Date": "Date is not supported (use a String or a number)",
        "Data": "Data is not supported (use a String)",
        "URL": "URL is not supported (use a String)",
        "UUID": "UUID is not supported (use a String)",
        "Decimal": "Decimal is not supported (use Double)",
        "Character": "Character is not supported (use a String)",
        "Float16": "Float16 is not supported (use Float or Double)",
        "Any": "Any is not supported",
        "AnyObject": "AnyObject is not supported"
    ]

    /// The schema of a property's declared type: a top-level optional makes the property
    /// optional; everything else goes through `elementSchema`.
    static func schemaExpression(for type: TypeSyntax) -> Result<SchemaSource, UnsupportedType> {
        if let wrapped = optionalWrapped(type) {
            return elementSchema(for: wrapped).map { SchemaSource(expression: $0, isOptional: true) }
        }
        return elementSchema(for: type).map { SchemaSource(expression: $0, isOptional: false) }
    }

    /// The type inside `T?`, `T!` or `Optional<T>`, or nil when `type` is not optional.
    static func optionalWrapped(_ type: TypeSyntax) -> TypeSyntax? {
        if let optional = type.as(OptionalTypeSyntax.self) { return optional.wrappedType }
        if let unwrapped = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) { return unwrapped.wrappedType }
        if let generic = genericArguments(of: type, named: "Optional"), generic.count == 1 { return generic[0] }
        return nil
    }

    /// The generic argument types when `type` is `name<…>` (or `Swift.name<…>`).
    static func genericArguments(of type: TypeSyntax, named name: String) -> [TypeSyntax]? {
        let baseName: String
        let clause: GenericArgumentClauseSyntax?
        if let identifier = type.as(IdentifierTypeSyntax.self) {
            baseName = identifier.name.text
            clause = identifier.genericArgumentClause
        } else if let member = type.as(MemberTypeSyntax.self), member.baseType.trimmedDescription == "Swift" {
            baseName = member.name.text
            clause = member.genericArgumentClause
        } else {
            return nil
        }
        guard baseName == name, let clause else { return nil }
        return clause.arguments.compactMap { argument in
            argument.argument.as(TypeSyntax.self)
        }
    }

    /// The schema expression of a type appearing as a value (a property's non-optional type
    /// or an array element).
    static func elementSchema(for type: TypeSyntax) -> Result<String, UnsupportedType> {
        if let attributed = type.as(AttributedTypeSyntax.self) { return elementSchema(for: attributed.baseType) }
        if let wrapped = optionalWrapped(type) {
            return elementSchema(for: wrapped).map { "LeapSDK.GeneratableSchema.nullable(\($0))" }
        }
        if let array = type.as(ArrayTypeSyntax.self) {
            return elementSchema(for: array.element).map { "LeapSDK.GeneratableSchema.array(of: \($0))" }
        }
        if let arguments = genericArguments(of: type, named: "Array"), arguments.count == 1 {
            return elementSchema(for: arguments[0]).map { "LeapSDK.GeneratableSchema.array(of: \($0))" }
        }
        if type.is(DictionaryTypeSyntax.self) {
            return .failure(UnsupportedType(reason: knownUnsupported["Dictionary"]!))
        }
        if type.is(TupleTypeSyntax.self) {
            return .failure(UnsupportedType(reason: "tuples are not supported (use a @Generatable struct)"))
        }
        if type.is(FunctionTypeSyntax.self) {
            return .failure(UnsupportedType(reason: "function types are not supported"))
        }
        if type.is(SomeOrAnyTypeSyntax.self) || type.is(CompositionTypeSyntax.self) {
            return .failure(UnsupportedType(reason: "existential and opaque types are not supported; name a concrete type"))
        }
        if type.is(MetatypeTypeSyntax.self) {
            return .failure(UnsupportedType(reason: "metatypes are not supported"))
        }

        let name: String
        let hasGenericArguments: Bool
        if let identifier = type.as(IdentifierTypeSyntax.self) {
            name = identifier.name.text
            hasGenericArguments = identifier.genericArgumentClause != nil
        } else if let member = type.as(MemberTypeSyntax.self) {
            let qualified = member.baseType.trimmedDescription
            name = (qualified == "Swift" || qualified == "Foundation") ? member.name.text : member.trimmedDescription
            hasGenericArguments = member.genericArgumentClause != nil
        } else {
            return .failure(UnsupportedType(reason: "the type '\(type.trimmedDescription)' is not supported"))
        }
        if let reason = knownUnsupported[name] { return .failure(UnsupportedType(reason: reason)) }
        if hasGenericArguments {
            return .failure(UnsupportedType(reason: "generic type '\(type.trimmedDescription)' is not supported"))
        }
        switch name {
        case "String": return .success("LeapSDK.GeneratableSchema.string")
        case "Bool": return .success("LeapSDK.GeneratableSchema.boolean")
        case _ where integerTypes.contains(name): return .success("LeapSDK.GeneratableSchema.integer")
        case _ where numberTypes.contains(name): return .success("LeapSDK.GeneratableSchema.number")
        default:
            // Assumed to be another GeneratableType; the type checker rejects it otherwise.
            return .success("LeapSDK.GeneratableSchema.generatable(\(type.trimmedDescription).self)")
        }
    }
}

/// `@Guide("description")` on a stored property of a `@Generatable` struct. It expands to
/// nothing: `@Generatable` reads its argument as the property's description.
public struct GuideMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        if !declaration.is(VariableDeclSyntax.self) {
            context.diagnose(Diagnostic(node: node, message: GeneratableDiagnostic.guideNotOnProperty))
        }
        return []
    }
}

/// The diagnostics of `@Generatable` and `@Guide`.
enum GeneratableDiagnostic: DiagnosticMessage {
    case notAStruct(kind: String)
    case missingDescription
    case customCodingKeys
    case unsupportedPattern
    case missingTypeAnnotation(property: String)
    case unsupportedType(property: String, reason: String)
    case guideNotOnProperty

    var message: String {
        switch self {
        case .notAStruct(let kind):
            return "@Generatable can only be applied to a struct, not \(kind)"
        case .missingDescription:
            return "expected a description string argument"
        case .customCodingKeys:
            return "@Generatable does not support a custom CodingKeys enum; the JSON keys are the property names"
        case .unsupportedPattern:
            return "@Generatable needs one named property per binding (tuple patterns are not supported)"
        case .missingTypeAnnotation(let property):
            return "property '\(property)' needs an explicit type annotation for @Generatable"
        case .unsupportedType(let property, let reason):
            return "property '\(property)' has a type @Generatable cannot describe: \(reason)"
        case .guideNotOnProperty:
            return "@Guide can only be applied to a stored property"
        }
    }

    var diagnosticID: MessageID {
        let id: String
        switch self {
        case .notAStruct: id = "notAStruct"
        case .missingDescription: id = "missingDescription"
        case .customCodingKeys: id = "customCodingKeys"
        case .unsupportedPattern: id = "unsupportedPattern"
        case .missingTypeAnnotation: id = "missingTypeAnnotation"
        case .unsupportedType: id = "unsupportedType"
        case .guideNotOnProperty: id = "guideNotOnProperty"
        }
        return MessageID(domain: "LeapSDKMacros", id: id)
    }

    var severity: DiagnosticSeverity { .error }
}
