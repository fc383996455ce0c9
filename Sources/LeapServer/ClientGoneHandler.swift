import NIOCore
import NIOHTTPTypes

/// Closes a connection when its client closes its side: a client that hangs up (FIN)
/// while its answer is being computed has gone, and the closed channel cancels the
/// request's completion (`Handlers.submit` cancels it when the channel closes).
///
/// Hummingbird allows TCP half-closure, so without this a hang-up is only an
/// `inputClosed` event, and the channel stays open until the answer is written: a
/// non-streamed chat completion or a speech request would run to its end for nobody. An
/// HTTP/1.1 client that half-closes and still waits for its answer (rare: `nc -N` does)
/// loses it, as with nginx, which also takes a client's FIN for an abort.
final class ClientGoneHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
