import Foundation
import Grammar
import LeapJSON
import LeapSDK
import Testing

// Test types, declared the way an SDK user would.

@Generatable("A fact about a city")
struct CityFact: Equatable {
    @Guide("The city's name")
    let name: String
    @Guide("Country")
    let country: String
    let population: Int
    let landmarks: [String]
    let nickname: String?
}

@Generatable("A point on a map")
struct GeoPoint: Equatable {
    @Guide("Latitude in degrees")
    let latitude: Double
    let longitude: Float
}

@Generatable("A trip plan")
struct TripPlan: Equatable {
    @Guide("Where the trip starts")
    let start: GeoPoint
    let stops: [GeoPoint]
    let days: UInt8
    var confirmed: Bool
    let budget: Double?
    let notes: [String?]
    /// Computed: not part of the schema.
    var stopCount: Int { stops.count }
    static let maximumDays = 30
}

@Generatable("A public record")
public struct PublicRecord: Equatable {
    public let identifier: Int64
    public let matrix: [[Int]]
}

@Generatable("A node of a tree")
struct TreeNode {
    let label: String
    let children: [TreeNode]
}

@Generatable("Mixed declarations")
struct MixedDeclarations: Equatable {
    static let version = 2
    let first, second: Swift.String
    var count: Int = 0
    var note: String = "" {
        didSet { count += 1 }
    }
    var doubled: Int { count * 2 }
    let tags: [Int?]
    let ratio: Swift.Double?
}

@Generatable("Nothing at all")
struct EmptyThing: Equatable {}

private let expectedCityFactSchema = """
    {"type":"object","description":"A fact about a city","properties":{\
    "name":{"type":"string","description":"The city's name"},\
    "country":{"type":"string","description":"Country"},\
    "population":{"type":"integer"},\
    "landmarks":{"type":"array","items":{"type":"string"}},\
    "nickname":{"type":"string"}},\
    "required":["name","country","population","landmarks"],"additionalProperties":false}
    """

private let expectedTripPlanSchema = """
    {"type":"object","description":"A trip plan","properties":{\
    "start":{"type":"object","description":"Where the trip starts","properties":{\
    "latitude":{"type":"number","description":"Latitude in degrees"},"longitude":{"type":"number"}},\
    "required":["latitude","longitude"],"additionalProperties":false},\
    "stops":{"type":"array","items":{"type":"object","description":"A point on a map","properties":{\
    "latitude":{"type":"number","description":"Latitude in degrees"},"longitude":{"type":"number"}},\
    "required":["latitude","longitude"],"additionalProperties":false}},\
    "days":{"type":"integer"},\
    "confirmed":{"type":"boolean"},\
    "budget":{"type":"number"},\
    "notes":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"null"}]}}},\
    "required":["start","stops","days","confirmed","notes"],"additionalProperties":false}
    """

/// Whether the grammar compiled from `schema` accepts `instance` as a complete document.
private func grammarAccepts(schema: String, instance: String) throws -> Bool {
    let matcher = GrammarMatcher(grammar: try JSONSchemaCompiler.compile(schema))
    return matcher.accept(instance) && matcher.canAcceptEnd
}

private func completion(_ text: String) -> MessageCompletion {
    MessageCompletion(message: ChatMessage(role: .assistant, textContent: text), finishReason: .stop, stats: nil)
}

/// The message of a `LeapError.serializationFailure`, or nil for any other outcome.
private func serializationFailureMessage(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch LeapError.serializationFailure(let message) {
        return message
    } catch {
        return nil
    }
}

@Suite("Generatable types: schemas")
struct GeneratableSchemaTests {
    @Test("CityFact: properties in declaration order, guides as descriptions, optional not required")
    func cityFactSchema() throws {
        #expect(try JSONSchemaGenerator.getJSONSchema(for: CityFact.self) == expectedCityFactSchema)
    }

    @Test("nested types are inlined with the property's guide replacing the type description")
    func nestedSchema() throws {
        #expect(try JSONSchemaGenerator.getJSONSchema(for: TripPlan.self) == expectedTripPlanSchema)
    }

    @Test("public struct, 64-bit integers, arrays of arrays, empty struct")
    func otherSchemas() throws {
        #expect(
            try JSONSchemaGenerator.getJSONSchema(for: PublicRecord.self) == """
                {"type":"object","description":"A public record","properties":{\
                "identifier":{"type":"integer"},\
                "matrix":{"type":"array","items":{"type":"array","items":{"type":"integer"}}}},\
                "required":["identifier","matrix"],"additionalProperties":false}
                """)
        #expect(
            try JSONSchemaGenerator.getJSONSchema(for: EmptyThing.self)
                == #"{"type":"object","description":"Nothing at all","properties":{},"additionalProperties":false}"#)
    }

    @Test("multi-binding declarations, initial values, observers, qualified and generic spellings; static and computed skipped")
    func mixedDeclarations() throws {
        let schema = try JSONSchemaGenerator.getJSONSchema(for: MixedDeclarations.self)
        #expect(
            schema == """
                {"type":"object","description":"Mixed declarations","properties":{\
                "first":{"type":"string"},"second":{"type":"string"},"count":{"type":"integer"},"note":{"type":"string"},\
                "tags":{"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"ratio":{"type":"number"}},\
                "required":["first","second","count","note","tags"],"additionalProperties":false}
                """)
        #expect(
            try grammarAccepts(
                schema: schema,
                instance:
                    #"{"first":"a","second":"b","count":2,"note":"n","tags":[1,null,3],"ratio":0.5}"#))
        let decoded = try completion(#"{"first":"a","second":"b","count":2,"note":"n","tags":[null]}"#).decode(MixedDeclarations.self)
        #expect(decoded.second == "b" && decoded.tags == [nil] && decoded.ratio == nil && decoded.doubled == 4)
    }

    @Test("jsonSchema() is the parsed form of getJSONSchema")
    func jsonValueMatchesText() throws {
        let value = try CityFact.jsonSchema()
        #expect(value == (try JSONValue.parse(expectedCityFactSchema)))
        #expect(value["properties"]?.objectValue?.keys == ["name", "country", "population", "landmarks", "nickname"])
    }

    @Test("a type that contains itself is a serializationFailure naming it, not a crash")
    func recursiveTypeFails() {
        let message = serializationFailureMessage { _ = try JSONSchemaGenerator.getJSONSchema(for: TreeNode.self) }
        #expect(message?.contains("TreeNode contains itself") == true)
    }

    @Test("hand-written schemas with duplicate or empty property names are rejected")
    func malformedSchemas() {
        let duplicate = GeneratableSchema.object(properties: [
            .init(name: "a", schema: .string), .init(name: "a", schema: .integer)
        ])
        #expect(serializationFailureMessage { _ = try duplicate.jsonValue() }?.contains("two properties named 'a'") == true)
        let empty = GeneratableSchema.object(properties: [.init(name: "", schema: .string)])
        #expect(serializationFailureMessage { _ = try empty.jsonValue() }?.contains("empty name") == true)
    }
}

@Suite("Generatable types: the schemas compile and constrain")
struct GeneratableGrammarTests {
    @Test("CityFact's schema accepts a full instance and one without the optional property")
    func cityFactGrammar() throws {
        let schema = try JSONSchemaGenerator.getJSONSchema(for: CityFact.self)
        #expect(
            try grammarAccepts(
                schema: schema,
                instance: """
                    {"name": "Paris", "country": "France", "population": 2102650, "landmarks": ["Eiffel Tower", "Louvre"], \
                    "nickname": "City of Light"}
                    """))
        #expect(try grammarAccepts(schema: schema, instance: #"{"name":"Oslo","country":"Norway","population":709037,"landmarks":[]}"#))
        // Missing a required property, an unknown property, a wrong type: rejected.
        #expect(try !grammarAccepts(schema: schema, instance: #"{"name":"Oslo","country":"Norway","landmarks":[]}"#))
        #expect(
            try !grammarAccepts(
                schema: schema,
                instance:
                    #"{"name":"Oslo","country":"Norway","population":1,"landmarks":[],"mayor":"x"}"#))
        #expect(
            try !grammarAccepts(
                schema: schema,
                instance:
                    #"{"name":"Oslo","country":"Norway","population":1.5,"landmarks":[]}"#))
    }

    @Test("TripPlan's schema accepts nested objects, nullable array elements and an absent optional")
    func tripPlanGrammar() throws {
        let schema = try JSONSchemaGenerator.getJSONSchema(for: TripPlan.self)
        let instance =
            #"{"start":{"latitude":48.85,"longitude":2.35},"stops":[{"latitude":-33.9,"longitude":151.2}],"#
            + #""days":5,"confirmed":true,"notes":["bring a coat",null]}"#
        #expect(try grammarAccepts(schema: schema, instance: instance))
        #expect(
            try grammarAccepts(
                schema: schema,
                instance: instance.replacingOccurrences(
                    of: #""confirmed":true,"#, with: #""confirmed":false,"budget":1200.5,"#)))
        #expect(
            try !grammarAccepts(
                schema: schema,
                instance: instance.replacingOccurrences(
                    of: #"{"latitude":48.85,"longitude":2.35}"#, with: #"{"latitude":48.85}"#)))
    }

    @Test("PublicRecord's and EmptyThing's schemas compile")
    func otherGrammars() throws {
        #expect(
            try grammarAccepts(
                schema: JSONSchemaGenerator.getJSONSchema(for: PublicRecord.self),
                instance: #"{"identifier":-9000000000,"matrix":[[1,2],[3]]}"#))
        #expect(try grammarAccepts(schema: JSONSchemaGenerator.getJSONSchema(for: EmptyThing.self), instance: "{}"))
    }
}

@Suite("Generatable types: response format and decoding")
struct GeneratableDecodingTests {
    @Test("setResponseFormat(type:) sets jsonSchemaConstraint to the type's schema")
    func setResponseFormat() throws {
        var options = GenerationOptions(temperature: 0.6, topP: 0.9)
        try options.setResponseFormat(type: CityFact.self)
        #expect(options.jsonSchemaConstraint == expectedCityFactSchema)
        #expect(options.temperature == 0.6)
    }

    @Test("setResponseFormat(type:) throws for a recursive type and leaves the options as they were")
    func setResponseFormatFailure() {
        var options = GenerationOptions(jsonSchemaConstraint: #"{"type":"string"}"#)
        #expect(throws: LeapError.self) { try options.setResponseFormat(type: TreeNode.self) }
        #expect(options.jsonSchemaConstraint == #"{"type":"string"}"#)
    }

    @Test("decode reads the completion's text into the type, optional present or absent")
    func decodeCityFact() throws {
        let paris = try completion(
            """
            {"name": "Paris", "country": "France", "population": 2102650, "landmarks": ["Eiffel Tower"], "nickname": "City of Light"}
            """
        ).decode(CityFact.self)
        #expect(
            paris
                == CityFact(
                    name: "Paris", country: "France", population: 2102650, landmarks: ["Eiffel Tower"],
                    nickname: "City of Light"))
        let oslo = try completion(#" {"name":"Oslo","country":"Norway","population":709037,"landmarks":[]} "#)
            .decode(CityFact.self)
        #expect(oslo.nickname == nil)
        #expect(oslo.landmarks.isEmpty)
    }

    @Test("decode handles nested types")
    func decodeTripPlan() throws {
        let plan = try completion(#"{"start":{"latitude":1.5,"longitude":2},"stops":[],"days":3,"confirmed":false,"notes":[null,"x"]}"#)
            .message.decode(TripPlan.self)
        #expect(
            plan
                == TripPlan(
                    start: GeoPoint(latitude: 1.5, longitude: 2), stops: [], days: 3, confirmed: false,
                    budget: nil, notes: [nil, "x"]))
    }

    @Test("a missing key, a wrong type, text that is not JSON and an empty reply are serializationFailures")
    func decodeFailures() {
        let missing = serializationFailureMessage {
            _ = try completion(#"{"name":"Oslo","country":"Norway","landmarks":[]}"#).decode(CityFact.self)
        }
        #expect(missing?.contains("CityFact") == true)
        #expect(missing?.contains("'population' is missing") == true)

        let wrongType = serializationFailureMessage {
            _ = try completion(#"{"name":"Oslo","country":"Norway","population":"many","landmarks":[]}"#).decode(CityFact.self)
        }
        #expect(wrongType?.contains("population") == true)

        let nested = serializationFailureMessage {
            _ = try completion(#"{"start":{"latitude":1},"stops":[],"days":3,"confirmed":false,"notes":[]}"#).decode(TripPlan.self)
        }
        #expect(nested?.contains("'longitude' is missing in start") == true)

        let outOfRange = serializationFailureMessage {
            _ = try completion(#"{"start":{"latitude":1,"longitude":1},"stops":[],"days":300,"confirmed":false,"notes":[]}"#)
                .decode(TripPlan.self)
        }
        #expect(outOfRange?.contains("does not fit its Swift type") == true, "\(outOfRange ?? "no error")")

        #expect(
            serializationFailureMessage { _ = try completion("The city is Paris.").decode(CityFact.self) }?
                .contains("the message text is not valid JSON (invalid JSON at byte 0") == true)
        #expect(
            serializationFailureMessage { _ = try completion("  ").decode(CityFact.self) }?
                .contains("no text") == true)
    }
}
