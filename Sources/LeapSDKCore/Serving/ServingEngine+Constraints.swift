import Grammar
import LeapJSON

/// The grammars a request is constrained by, compiled at submission (so that a schema the
/// compiler rejects is an error before anything runs).
struct ConstraintPlan {
    /// The whole reply (response_format json_schema).
    var schema: Grammar?
    /// A call block from the first token (tool_choice required or a named function).
    var toolsWithStart: Grammar?
    /// A call block once the model opens one (tool_choice auto).
    var toolsAfterStart: Grammar?
    /// tool_choice none: the tokens that would complete the call-start marker.
    var forbiddenCallMarker: CallMarkerTokens?
}

extension ServingEngine {
    /// The call-block grammar syntax of `parser`: JSON for Hermes, Pythonic for LFM2's;
    /// nil for another parser, whose syntax leap-ref does not know (its calls are parsed,
    /// not constrained).
    static func callSyntax(of parser: any LeapFunctionCallParserProtocol) -> ToolCallSyntax? {
        switch parser {
        case is HermesFunctionCallParser: return .json(start: parser.callStartMarker, end: parser.callEndMarker)
        case is LFMFunctionCallParser: return .pythonic(start: parser.callStartMarker, end: parser.callEndMarker)
        default: return nil
        }
    }

    /// Compiles the request's grammars (cached by schema text), so that a schema the
    /// compiler cannot enforce is an `.invalidRequest` with the compiler's message.
    /// `parser` is how the reply's calls are written (nil: calls are not parsed, so not
    /// constrained either).
    func constraintPlan(_ request: ServingRequest, parser: (any LeapFunctionCallParserProtocol)?) throws(ServingError)
        -> ConstraintPlan
    {
        var plan = ConstraintPlan()
        if case .jsonSchema(let schema) = request.constraint {
            let order = request.schemaPropertyOrder
            let key = (order == .schema ? "schema:" : "schema-\(order.rawValue):") + schema.serialized()
            plan.schema = try grammar(key: key) { () throws(SchemaError) -> Grammar in
                var options = LoadedModel.generationSchemaOptions(limits: configuration.schemaLimits)
                options.propertyOrder = order == .any ? .any : .schema
                return try JSONSchemaCompiler.compile(schema, options: options)
            } describe: {
                "the JSON Schema cannot be enforced: \($0)"
            }
        }
        let tools: [ServingTool]
        if case .chat(_, let t) = request.prompt { tools = t } else { tools = [] }
        switch request.toolChoice {
        case .required where tools.isEmpty: throw .invalidRequest("tool_choice 'required' needs at least one tool")
        case .function(let name) where tools.isEmpty: throw .invalidRequest("tool_choice names '\(name)' but no tools were given")
        case .none:
            // The tools stay in the prompt; the call syntax is masked out while sampling.
            if !tools.isEmpty, let parser { plan.forbiddenCallMarker = callMarkerTokens(parser.callStartMarker) }
            return plan
        default: break
        }
        guard !tools.isEmpty, let parser, let callSyntax = Self.callSyntax(of: parser) else { return plan }
        guard plan.schema == nil else {
            throw .invalidRequest("response_format json_schema and tools cannot be combined; send one or the other")
        }
        var chosen = tools
        if case .function(let name) = request.toolChoice {
            chosen = tools.filter { $0.name == name }
            guard !chosen.isEmpty else {
                throw .invalidRequest(
                    "tool_choice names '\(name)', which is not among the tools (\(tools.map(\.name).joined(separator: ", ")))")
            }
        }
        let list = chosen.map { (name: $0.name, parameters: $0.parameters) }
        let key = "\(callSyntax)" + JSONValue.array(list.map { ["name": .string($0.name), "parameters": $0.parameters] }).serialized()
        var toolOptions = ToolCallGrammar.defaultOptions
        toolOptions.limits = configuration.schemaLimits
        let includeStart = request.toolChoice != .auto
        let built = try grammar(key: (includeStart ? "with:" : "after:") + key) { () throws(SchemaError) -> Grammar in
            try ToolCallGrammar.build(functions: list, syntax: callSyntax, includeStartMarker: includeStart, options: toolOptions)
        } describe: {
            "the tools cannot be turned into a call grammar: \($0)"
        }
        if includeStart { plan.toolsWithStart = built } else { plan.toolsAfterStart = built }
        return plan
    }

    /// Compiled grammars, at most this many kept.
    static let grammarCacheLimit = 64

    private func grammar(
        key: String, _ build: () throws(SchemaError) -> Grammar, describe: (SchemaError) -> String
    ) throws(ServingError) -> Grammar {
        if let g = lock.withLock({ grammars[key] }) { return g }
        let g: Grammar
        do { g = try build() } catch { throw .invalidRequest(describe(error)) }
        lock.withLock {
            if grammars.count >= Self.grammarCacheLimit { grammars.removeAll() }
            grammars[key] = g
        }
        return g
    }

    /// The tokens that may complete `marker`, found once per marker.
    private func callMarkerTokens(_ marker: String) -> CallMarkerTokens {
        if let found = lock.withLock({ callMarkers[marker] }) { return found }
        let made = CallMarkerTokens(marker: marker, tokenizer: loaded.tokenizer)
        lock.withLock { callMarkers[marker] = made }
        return made
    }

    /// What constrains the job's output from its first token, with the token masks made
    /// on the queue (the engine's mask computers are not thread-safe). Call on the queue.
    func activeConstraints(_ job: ServingJob) -> ActiveConstraints {
        var active = ActiveConstraints()
        let plan = job.plan
        if let g = plan.schema {
            active.grammar = GrammarConstraint(
                matcher: GrammarMatcher(grammar: g), masks: loaded.maskComputer(literalSpecials: []), isCallBlock: false)
        }
        if let marker = plan.forbiddenCallMarker { active.callBan = CallMarkerBan(marker) }
        guard let parser = job.callParser, plan.toolsWithStart != nil || plan.toolsAfterStart != nil else { return active }
        let startID = loaded.singleTokenID(parser.callStartMarker)
        let masks = loaded.maskComputer(literalSpecials: [startID, loaded.singleTokenID(parser.callEndMarker)].compactMap { $0 })
        if let g = plan.toolsWithStart {
            active.grammar = GrammarConstraint(matcher: GrammarMatcher(grammar: g), masks: masks, isCallBlock: true)
        }
        if let g = plan.toolsAfterStart {
            active.callOpening = CallOpening(grammar: g, masks: masks, marker: parser.callStartMarker, tokenID: startID)
        }
        return active
    }
}
