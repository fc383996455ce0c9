import Dispatch
import Models
import Sampling

/// A submitted completion: its events, and a way to cancel it.
public struct ServingCompletion: Sendable {
    /// `.started`, text/reasoning/tool-call events, then `.finished`; throws a
    /// `ServingError` if the completion fails. Dropping the stream cancels the completion.
    public let events: AsyncThrowingStream<ServingEvent, any Error>
    let cancelFlag: CancellationFlag

    init(events: AsyncThrowingStream<ServingEvent, any Error>, cancel: CancellationFlag) {
        self.events = events
        self.cancelFlag = cancel
    }

    /// Stops the completion within one token (it finishes with `.cancelled`).
    public func cancel() { cancelFlag.cancel() }
}

/// A request from submission to its end.
final class ServingJob: @unchecked Sendable {
    let id: UInt64
    let request: ServingRequest
    /// The prompt: tokens and media chunks.
    let prompt: PromptSequence
    /// The prompt-cache keys of its positions (token ids; media rows have negative keys).
    var tokens: [Int] { prompt.keys }
    /// Tokens the sequence may hold, prompt included (the context, or the request's
    /// `contextLimit`).
    let lengthLimit: Int
    let sampling: SamplingParameters
    let plan: ConstraintPlan
    /// How the reply's calls are written, parsed and constrained (nil: they are not).
    let callParser: (any LeapFunctionCallParserProtocol)?
    let continuation: AsyncThrowingStream<ServingEvent, any Error>.Continuation
    let cancel = CancellationFlag()
    let submitted = DispatchTime.now().uptimeNanoseconds

    init(
        id: UInt64, request: ServingRequest, prompt: PromptSequence, lengthLimit: Int, sampling: SamplingParameters, plan: ConstraintPlan,
        callParser: (any LeapFunctionCallParserProtocol)?, continuation: AsyncThrowingStream<ServingEvent, any Error>.Continuation
    ) {
        self.id = id
        self.request = request
        self.prompt = prompt
        self.lengthLimit = lengthLimit
        self.sampling = sampling
        self.plan = plan
        self.callParser = callParser
        self.continuation = continuation
    }

    var isChat: Bool {
        if case .chat = request.prompt { return true }
        return false
    }
}

/// One of a `ServingEngine`'s sequences. Touched only on the engine's queue.
final class ServingSlot {
    let index: Int
    let cache: CachedSequence
    /// The slot's sequence in the engine's batched session (open for the slot's lifetime).
    let handle: BatchedSession.Sequence
    /// When the slot last finished a request (uptime nanoseconds), for least-recently-used routing.
    var lastUsed: UInt64 = 0
    /// The request running in this slot.
    var sequence: SlotSequence?

    init(index: Int, caches: BatchedSequenceCaches) {
        self.index = index
        cache = CachedSequence(caches: caches)
        handle = caches.sequence
    }
}

/// The generation state of the request a slot is running. Touched only on the queue.
final class SlotSequence {
    let job: ServingJob
    let admitted: UInt64
    /// The prompt's tokens before this index are in the caches.
    var promptOffset = 0
    /// The whole prompt is in the caches: the sequence generates.
    var prefilled: Bool { promptOffset == job.tokens.count }
    /// Events held for a request that takes them at its end
    /// (`ServingRequest.deliversEventsAsGenerated` false).
    private var heldEvents: [ServingEvent] = []

    /// When the reply's first audio samples were made (uptime nanoseconds).
    var firstAudio: UInt64?

    /// Delivers `event` to the request now, or holds it until the reply ends.
    func deliver(_ event: ServingEvent) {
        if firstAudio == nil, case .audio = event { firstAudio = DispatchTime.now().uptimeNanoseconds }
        if job.request.deliversEventsAsGenerated { job.continuation.yield(event) } else { heldEvents.append(event) }
    }

    /// Delivers the events held so far.
    func deliverHeldEvents() {
        for event in heldEvents { job.continuation.yield(event) }
        heldEvents = []
    }
    var promptStart: UInt64?
    var promptEnd: UInt64?
    var cachedTokens = 0
    /// The generation, once the prompt is in the caches.
    var generation: SequenceGeneration?

    init(job: ServingJob, admitted: UInt64) {
        self.job = job
        self.admitted = admitted
    }
}
