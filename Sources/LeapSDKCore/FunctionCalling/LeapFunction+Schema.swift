import LeapJSON

extension LeapFunction {
    /// The function as the tool description chat templates put into the prompt (LFM2's
    /// template writes each tool with `tojson`):
    ///
    ///     {"name": ..., "description": ..., "parameters": {"type": "object", "properties": {...}, "required": [...]}}
    public var toolJSON: JSONValue {
        .object(
            JSONObject([
                ("name", .string(name)),
                ("description", .string(description)),
                ("parameters", parametersSchema)
            ]))
    }

    /// The JSON Schema of the arguments: `{"type": "object", "properties": {...},
    /// "required": [...]}`, properties in parameter order, `required` listing the
    /// parameters that are not optional (always present, possibly empty).
    ///
    /// Each property's `description` is the parameter's description (left out when empty);
    /// the description of a type used directly as a parameter's type is ignored, as the LEAP
    /// SDK documents. See `LeapFunctionParameterType.jsonSchema`.
    public var parametersSchema: JSONValue {
        var properties = JSONObject()
        for parameter in parameters {
            properties[parameter.name] = parameter.type.schema(description: parameter.description.isEmpty ? nil : parameter.description)
        }
        let required = parameters.filter { !$0.optional }.map { JSONValue.string($0.name) }
        return .object(
            JSONObject([
                ("type", "object"),
                ("properties", .object(properties)),
                ("required", .array(required))
            ]))
    }

    /// The `tools` list for a chat template: each function's `toolJSON`, in order.
    public static func toolsJSON(_ functions: [LeapFunction]) -> JSONValue {
        .array(functions.map(\.toolJSON))
    }
}

extension LeapFunctionParameterType {
    /// The JSON Schema of this type as it appears nested (as an array's `items` or an
    /// object's property), with the type's own description.
    ///
    /// Keys come in this order: `type`, then `enum` (strings, numbers, integers), `items`
    /// (arrays), `properties` and `required` (objects; properties in sorted key order, since
    /// a Swift dictionary has no order; `required` always present), then `description` when
    /// there is one. The null type is `{"type": "null"}`.
    public var jsonSchema: JSONValue { schema(description: ownDescription) }

    /// The type's own description (nil for the null type).
    public var ownDescription: String? {
        switch self {
        case .string(let t): return t.description
        case .number(let t): return t.description
        case .integer(let t): return t.description
        case .boolean(let t): return t.description
        case .array(let t): return t.description
        case .object(let t): return t.description
        case .null: return nil
        }
    }

    /// The schema with `description` in place of the type's own one.
    func schema(description: String?) -> JSONValue {
        var schema = JSONObject()
        switch self {
        case .string(let t):
            schema["type"] = "string"
            if let values = t.enumValues { schema["enum"] = .array(values.map { .string($0) }) }
        case .number(let t):
            schema["type"] = "number"
            if let values = t.enumValues { schema["enum"] = .array(values.map { .double($0) }) }
        case .integer(let t):
            schema["type"] = "integer"
            if let values = t.enumValues { schema["enum"] = .array(values.map { .integer($0) }) }
        case .boolean:
            schema["type"] = "boolean"
        case .array(let t):
            schema["type"] = "array"
            schema["items"] = t.itemType.jsonSchema
        case .object(let t):
            schema["type"] = "object"
            var properties = JSONObject()
            for key in t.properties.keys.sorted() { properties[key] = t.properties[key]!.jsonSchema }
            schema["properties"] = .object(properties)
            schema["required"] = .array(t.required.map { .string($0) })
        case .null:
            schema["type"] = "null"
        }
        if let description { schema["description"] = .string(description) }
        return .object(schema)
    }
}
