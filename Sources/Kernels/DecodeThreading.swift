// Whether a decode step runs on the pool's threads or on the calling thread alone.
//
// A decode step is a hundred or more parallel loops of tens of microseconds, and each ends
// when its slowest thread does. On a quiet machine two threads decode about 1.5 times as
// fast as one. When another process keeps the cores busy, the kernel gives each of our
// threads a share of a core in slices of milliseconds, and a loop whose worker was
// descheduled in the middle of its last chunk waits for that worker's next slice: on the
// 2-core development machine, under `stress-ng --cpu 2`, two threads decoded SmolLM2 at
// 108-226 t/s from run to run and one thread alone at 156-164 (docs/performance.md,
// "Sharing the CPU"). Which is faster depends on the moment, so the session measures it:
// every step's time is recorded, and now and then a trial runs the other way; when it is
// clearly faster than the recent steps were, the session switches.
//
// A trial is two steps (the faster counts: the first may still pay for the change, workers
// going to sleep or waking up) and costs them in the slower way; after a trial that does
// not switch, the next waits twice as long (up to `longestPeriod` steps), so a quiet
// machine pays about two slower steps in 256, and a change of conditions is noticed
// within that many steps. Steps are compared only with steps of the same number of rows
// (a batched session's steps of three sequences take longer than those of two); a change
// of row count starts over.
// Results never depend on the choice: every kernel gives the same bits on any number of
// threads.

/// Chooses, step by step, whether a decode step runs on all the pool's threads or on the
/// calling thread alone, from the measured times of the steps (see the file header).
public struct DecodeThreading: Sendable {
    /// Steps in one way before the first trial of the other.
    public static let shortestPeriod = 16
    /// The most steps between two trials.
    public static let longestPeriod = 256
    /// How much faster (as a fraction of the recent step time) a trial step must be for the
    /// session to switch: a noisy step that is merely as fast does not.
    public static let requiredGain = 0.1
    /// Steps in one trial; the faster counts (the first step of a change may still pay for
    /// it: workers going to sleep or waking up).
    public static let trialSteps = 2

    /// Whether the next step should run on the calling thread alone.
    public private(set) var alone = false
    /// Whether the next step is a trial of the other way.
    public private(set) var trying = false
    /// Steps between trials now.
    public private(set) var period = DecodeThreading.shortestPeriod
    /// Steps recorded since the last trial (or start).
    private var steps = 0
    /// The recent step time in the current way, smoothed (seconds).
    private var typical: Double?
    /// The trial's steps so far, and the fastest of them.
    private var trialStepsDone = 0
    private var trialBest = Double.infinity
    /// The rows of the steps compared (nil before the first step).
    private var rows: Int?

    public init() {}

    /// Records a step of `rows` rows that took `seconds`, run as `alone` says, and
    /// decides the next one.
    public mutating func record(seconds: Double, rows: Int) {
        guard seconds.isFinite, seconds >= 0 else { return }
        if let known = self.rows, rows != known {
            // Not comparable with what came before: go on in the current way, from scratch.
            if trying { alone.toggle() }
            trying = false
            self.rows = rows
            typical = nil
            steps = 0
            return
        }
        self.rows = rows
        if trying {
            trialStepsDone += 1
            trialBest = min(trialBest, seconds)
            if trialStepsDone < Self.trialSteps { return }
            trying = false
            steps = 0
            if let typical, trialBest < typical * (1 - Self.requiredGain) {
                // The other way is faster: keep it, and look back soon.
                self.typical = trialBest
                period = Self.shortestPeriod
            } else {
                alone.toggle()
                period = min(2 * period, Self.longestPeriod)
            }
            return
        }
        typical = typical.map { 0.75 * $0 + 0.25 * seconds } ?? seconds
        steps += 1
        if steps >= period {
            alone.toggle()
            trying = true
            trialStepsDone = 0
            trialBest = .infinity
        }
    }
}
