import Hummingbird
import LeapServer
import Logging
import NIOCore
import NIOEmbedded
import Synchronization

/// A request's response as the in-process client returns it: the head and the whole body.
struct TestResponse: Sendable {
    let head: HTTPResponse
    let body: ByteBuffer
    var status: HTTPResponse.Status { head.status }
    var headers: HTTPFields { head.headerFields }
}

/// Sends requests straight to the server's router, in process, with no socket: what
/// HummingbirdTesting's router mode does. HummingbirdTesting itself is not used because
/// its live-server clients bring AsyncHTTPClient, swift-nio-ssl and BoringSSL into every
/// build of the tests.
struct InProcessClient: Sendable {
    let responder: RouterResponder<ServerContext>
    let logger = Logger(label: "LeapServerTests")

    /// The response to one request; a thrown error becomes a 500, as in a live server
    /// without an error middleware.
    func execute(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil) async throws
        -> TestResponse
    {
        var fields = headers
        if let body { fields[.contentLength] = String(body.readableBytes) }
        let request = Request(
            head: HTTPRequest(method: method, scheme: "http", authority: "localhost", path: uri, headerFields: fields),
            body: RequestBody(buffer: body ?? ByteBuffer()))
        let context = ServerContext(source: ApplicationRequestContextSource(channel: NIOAsyncTestingChannel(), logger: logger))
        let response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            response = Response(status: .internalServerError)
        }
        let head = response.head
        let collected = CollectedBody()
        try await response.body.write(CollectingWriter(collected: collected))
        return TestResponse(head: head, body: collected.buffer.withLock { $0 })
    }
}

/// The response body written so far.
final class CollectedBody: Sendable {
    let buffer = Mutex(ByteBuffer())
}

/// A response body writer that appends every part to `collected`.
struct CollectingWriter: ResponseBodyWriter {
    let collected: CollectedBody

    func write(_ part: ByteBuffer) async throws {
        collected.buffer.withLock { $0.writeImmutableBuffer(part) }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
