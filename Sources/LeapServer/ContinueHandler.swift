import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers `Expect: 100-continue` (HTTP/1.1, RFC 9110 section 10.1.1): a client that asks
/// it (curl does for bodies over 1 MiB: an image in a chat request) holds its body back until
/// the server says `100 Continue`, or for a second when none comes. Hummingbird sends no
/// such answer, so every such request waited that second. This handler, in each
/// connection's pipeline after the HTTP decoder, sends it as the request head passes, unless
/// the declared body is over `maxBodyBytes`: then the head goes on with its `Expect`, and
/// the route answers 413 at once without waiting for a body the client will not send.
final class ContinueHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    let maxBodyBytes: Int

    init(maxBodyBytes: Int) { self.maxBodyBytes = maxBodyBytes }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var request) = unwrapInboundIn(data),
            request.headerFields[.expect]?.lowercased() == "100-continue"
        else {
            context.fireChannelRead(data)
            return
        }
        if let length = request.headerFields[.contentLength].flatMap(Int.init), length > maxBodyBytes {
            context.fireChannelRead(data)
            return
        }
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
        request.headerFields[.expect] = nil
        context.fireChannelRead(wrapInboundOut(.head(request)))
    }
}
