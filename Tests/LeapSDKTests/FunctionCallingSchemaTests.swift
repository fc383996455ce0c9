import Foundation
import LeapJSON
import LeapSDK
import Testing

@Suite struct FunctionCallingSchemaTests {
    static let expectedWeather =
        #"{"name": "get_weather", "description": "Query the weather of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city to query weather for"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit (celsius or fahrenheit)"}}, "required": ["city", "unit"]}}"#

    @Test func seed000Spelling() {
        let function = LeapFunction(
            name: "get_weather",
            description: "Query the weather of a city",
            parameters: [
                LeapFunctionParameter(
                    name: "city", type: LeapFunctionParameterType.string(StringType()),
                    description: "The city to query weather for"),
                LeapFunctionParameter(
                    name: "unit", type: LeapFunctionParameterType.string(StringType(enumValues: ["celsius", "fahrenheit"])),
                    description: "Temperature unit (celsius or fahrenheit)")
            ]
        )
        #expect(function.toolJSON.serialized(.python) == Self.expectedWeather)
        #expect(function.toolJSON["parameters"] == function.parametersSchema)
    }

    @Test func seed001Spelling() {
        let function = LeapFunction(
            name: "get_weather",
            functionDescription: "Query the weather of a city",
            parameters: [
                LeapFunctionParameter(
                    name: "city", type: LeapFunctionParameterType.LeapStr(enumValues: nil, description: nil),
                    parameterDescription: "The city to query weather for", optional: false),
                LeapFunctionParameter(
                    name: "unit", type: LeapFunctionParameterType.LeapStr(enumValues: ["celsius", "fahrenheit"], description: nil),
                    parameterDescription: "Temperature unit (celsius or fahrenheit)", optional: false)
            ]
        )
        #expect(function.toolJSON.serialized(.python) == Self.expectedWeather)
    }

    @Test func parameterDescriptionOverridesTheTypesOwnAtTopLevel() {
        let function = LeapFunction(
            name: "f", description: "d",
            parameters: [
                LeapFunctionParameter(name: "s", type: .LeapStr(description: "type's own"), description: "the parameter's"),
                LeapFunctionParameter(
                    name: "o",
                    type: .LeapObj(properties: ["k": .LeapInt(description: "nested k")], required: ["k"], description: "object's own"),
                    description: "param o")
            ])
        #expect(
            function.parametersSchema.serialized()
                == #"{"type":"object","properties":{"s":{"type":"string","description":"the parameter's"},"o":{"type":"object","properties":{"k":{"type":"integer","description":"nested k"}},"required":["k"],"description":"param o"}},"required":["s","o"]}"#
        )
    }

    @Test func nestedDescriptionsAreUsedInItemsAndProperties() {
        let function = LeapFunction(
            name: "get_weather", description: "Query the weather of cities",
            parameters: [
                LeapFunctionParameter(
                    name: "cities",
                    type: .array(ArrayType(itemType: .string(StringType(description: "A city name")), description: "ignored")),
                    description: "Names of the cities to query weather for"),
                LeapFunctionParameter(
                    name: "options",
                    type: .object(
                        ObjectType(
                            properties: [
                                "z_flag": .boolean(BooleanType(description: "A flag")),
                                "a_list": .array(ArrayType(itemType: .integer(IntegerType()), description: "Some integers")),
                                "m_none": .null(NullType())
                            ], required: ["z_flag"])),
                    description: "Options", optional: true)
            ])
        #expect(
            function.parametersSchema.serialized()
                == #"{"type":"object","properties":{"cities":{"type":"array","items":{"type":"string","description":"A city name"},"description":"Names of the cities to query weather for"},"options":{"type":"object","properties":{"a_list":{"type":"array","items":{"type":"integer"},"description":"Some integers"},"m_none":{"type":"null"},"z_flag":{"type":"boolean","description":"A flag"}},"required":["z_flag"],"description":"Options"}},"required":["cities"]}"#
        )
    }

    @Test func bothSpellingsGiveTheSameSchemaForEveryType() {
        let pairs: [(LeapFunctionParameterType, LeapFunctionParameterType)] = [
            (.string(StringType(enumValues: ["a"], description: "s")), .LeapStr(enumValues: ["a"], description: "s")),
            (.number(NumberType(enumValues: [1.5, 2], description: "n")), .LeapNum(enumValues: [1.5, 2], description: "n")),
            (.integer(IntegerType(enumValues: [1, 2], description: "i")), .LeapInt(enumValues: [1, 2], description: "i")),
            (.boolean(BooleanType(description: "b")), .LeapBool(description: "b")),
            (.array(ArrayType(itemType: .null(NullType()), description: "a")), .LeapArr(itemType: .LeapNull(), description: "a")),
            (
                .object(ObjectType(properties: ["x": .boolean(BooleanType())], required: ["x"], description: "o")),
                .LeapObj(properties: ["x": .LeapBool()], required: ["x"], description: "o")
            ),
            (.null(NullType()), .LeapNull())
        ]
        for (native, bridged) in pairs {
            #expect(native == bridged)
            #expect(native.jsonSchema == bridged.jsonSchema)
        }
        #expect(LeapFunctionParameterType.LeapNum(enumValues: [1.5, 2]).jsonSchema.serialized() == #"{"type":"number","enum":[1.5,2.0]}"#)
        #expect(LeapFunctionParameterType.LeapInt(enumValues: [1, 2]).jsonSchema.serialized() == #"{"type":"integer","enum":[1,2]}"#)
        #expect(LeapFunctionParameterType.LeapNull().jsonSchema.serialized() == #"{"type":"null"}"#)
        #expect(LeapFunctionParameterType.LeapBool(description: "b").jsonSchema.serialized() == #"{"type":"boolean","description":"b"}"#)
        #expect(
            LeapFunctionParameterType.LeapObj(properties: [:]).jsonSchema.serialized()
                == #"{"type":"object","properties":{},"required":[]}"#)
    }

    @Test func requiredListsNonOptionalParametersInOrderAndEmptyDescriptionsAreLeftOut() {
        let function = LeapFunction(
            name: "f", description: "",
            parameters: [
                LeapFunctionParameter(name: "c", type: .LeapStr(), description: "", optional: true),
                LeapFunctionParameter(name: "b", type: .LeapStr(), description: ""),
                LeapFunctionParameter(name: "a", type: .LeapStr(), description: "x")
            ])
        #expect(
            function.toolJSON.serialized()
                == #"{"name":"f","description":"","parameters":{"type":"object","properties":{"c":{"type":"string"},"b":{"type":"string"},"a":{"type":"string","description":"x"}},"required":["b","a"]}}"#
        )
        let none = LeapFunction(name: "g", description: "no parameters", parameters: [])
        #expect(none.parametersSchema.serialized() == #"{"type":"object","properties":{},"required":[]}"#)
    }

    @Test func toolsList() {
        let functions = [
            LeapFunction(name: "a", description: "1", parameters: []), LeapFunction(name: "b", description: "2", parameters: [])
        ]
        #expect(LeapFunction.toolsJSON(functions) == .array(functions.map(\.toolJSON)))
        #expect(LeapFunction.toolsJSON(functions).arrayValue?.compactMap { $0["name"]?.stringValue } == ["a", "b"])
    }
}

@Suite struct FunctionCallingConversionTests {
    struct Opaque {}

    @Test func argumentValuesOfManySwiftTypes() throws {
        let optionalInt: Int? = 4
        let missing: Int? = nil
        let value: [String: Any] = [
            "i8": Int8(-3), "u": UInt16(7), "f": Float(0.5), "d": 2.25, "b": true, "s": "x", "sub": "abc".dropFirst(),
            "opt": optionalInt as Any, "missing": missing as Any, "arr": [1, 2], "nested": ["k": [true, nil] as [Any?]] as [String: Any],
            "json": JSONValue.array([1, "a"]), "nsTrue": NSNumber(value: true), "nsInt": NSNumber(value: 12),
            "nsDouble": NSNumber(value: 1.5)
        ]
        let json = try JSONValue(functionArgument: value)
        #expect(
            json.serialized()
                == #"{"arr":[1,2],"b":true,"d":2.25,"f":0.5,"i8":-3,"json":[1,"a"],"missing":null,"nested":{"k":[true,null]},"nsDouble":1.5,"nsInt":12,"nsTrue":true,"opt":4,"s":"x","sub":"bc","u":7}"#
        )
    }

    @Test func unsupportedTypeIsATypedErrorWithItsPath() {
        #expect(throws: FunctionArgumentConversionError(path: "arguments.outer[1]", typeName: "Opaque")) {
            try JSONValue(functionArgument: ["outer": [1, Opaque()] as [Any]] as [String: Any])
        }
        let call = LeapFunctionCall(name: "f", arguments: ["o": Opaque()])
        #expect(throws: FunctionArgumentConversionError.self) { try call.argumentsJSONObject() }
        #expect(call.argumentsJSON["o"] == .string("Opaque()"))
    }

    @Test func jsonObjectToArgumentsKeepsNullEntries() throws {
        let object = JSONObject([
            ("b", .null), ("a", .array([.null, .integer(1), .double(2), .bool(false), .object(JSONObject([("k", "v")]))]))
        ])
        let call = LeapFunctionCall(name: "f", argumentsJSON: object)
        #expect(call.arguments.count == 2)
        #expect(call.arguments.keys.contains("b"))
        #expect(call.arguments["a"].flatMap { $0 as? [Any?] }?.count == 5)
        #expect(call.argumentsJSON == JSONObject([("a", object["a"]!), ("b", .null)]))
        #expect(try call.argumentsJSONObject() == call.argumentsJSON)
    }

    @Test func openAIShape() {
        let call = LeapFunctionCall(name: "get_weather", arguments: ["unit": "celsius", "city": "NYC"])
        #expect(
            call.openAIToolCallJSON().serialized()
                == #"{"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"NYC\",\"unit\":\"celsius\"}"}}"#)
        #expect(call.openAIToolCallJSON(id: "call_0")["id"] == .string("call_0"))
        #expect(call.argumentsJSONString(.python) == #"{"city": "NYC", "unit": "celsius"}"#)
        // The arguments string reads back through the JSON parser to the same object.
        let text = call.openAIToolCallJSON()["function"]?["arguments"]?.stringValue ?? ""
        #expect((try? JSONValue.parse(text)) == .object(call.argumentsJSON))
    }
}
