import Hummingbird
import LeapJSON
import LeapSDKCore
import OpenAIWire

/// An error answered as an OpenAI error object with its HTTP status.
public struct APIError: Error, HTTPResponseError, Sendable {
    /// The error object sent as the body.
    public let body: WireErrorBody
    /// Seconds for a `Retry-After` header (503 when busy or loading).
    public let retryAfter: Int?

    public init(status: Int, message: String, param: String? = nil, retryAfter: Int? = nil) {
        body = WireErrorBody(status: status, message: message, param: param)
        self.retryAfter = retryAfter
    }

    /// The HTTP status (the body's `code`).
    public var status: HTTPResponse.Status { HTTPResponse.Status(code: body.status) }

    /// The JSON error response, with `Retry-After` when set.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body.json.serialized())))
    }

    /// A request the wire decoder rejected.
    init(_ error: WireError) {
        self.init(status: 400, message: error.message, param: error.param)
    }

    /// A request the serving engine rejected.
    init(_ error: ServingError) {
        switch error {
        case .invalidRequest(let m), .unsupportedContent(let m): self.init(status: 400, message: m)
        case .promptTooLong: self.init(status: 400, message: error.description, param: "messages")
        case .queueFull: self.init(status: 503, message: error.description, retryAfter: 1)
        case .shuttingDown: self.init(status: 503, message: error.description)
        case .engineFailure: self.init(status: 500, message: error.description)
        }
    }
}
