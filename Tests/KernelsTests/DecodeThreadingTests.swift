import Kernels
import Testing

/// The choice between the pool's threads and the calling thread alone, fed step times.
@Suite struct DecodeThreadingTests {
    /// Feeds `steps` steps, each taking `threads` seconds on the pool and `alone` seconds on
    /// the calling thread; returns how many ran alone.
    static func run(_ choice: inout DecodeThreading, steps: Int, threads: Double, alone: Double, rows: Int = 1) -> Int {
        var stepsAlone = 0
        for _ in 0..<steps {
            if choice.alone { stepsAlone += 1 }
            choice.record(seconds: choice.alone ? alone : threads, rows: rows)
        }
        return stepsAlone
    }

    @Test func aQuietMachineStaysOnTheThreadsAndTriesAloneRarely() {
        var choice = DecodeThreading()
        // Two threads 1.5x as fast as one: every trial of one thread fails.
        let stepsAlone = Self.run(&choice, steps: 4096, threads: 2.6e-3, alone: 3.9e-3)
        #expect(!choice.alone)
        #expect(choice.period == DecodeThreading.longestPeriod)
        // Trials of 2 steps after 16, 32, 64, 128 steps (248 with the trials), then every
        // 256 (14 in the 3848 left): 18 trials.
        #expect(stepsAlone == 36, "\(stepsAlone) steps alone")
    }

    @Test func aBusyMachineGoesAloneAndComesBackWhenTheThreadsAreFasterAgain() {
        var choice = DecodeThreading()
        // Threads stalled by a descheduled worker: one thread is faster.
        _ = Self.run(&choice, steps: 20, threads: 9e-3, alone: 6e-3)
        #expect(choice.alone)
        let stepsAlone = Self.run(&choice, steps: 1000, threads: 9e-3, alone: 6e-3)
        #expect(stepsAlone >= 980, "\(stepsAlone) of 1000 steps alone")  // trials of 2 steps on the threads
        // The other process stops: the next trial of the threads wins, within a period.
        var steps = 0
        while choice.alone || choice.trying, steps <= DecodeThreading.longestPeriod + 1 {
            choice.record(seconds: choice.alone ? 3.9e-3 : 2.6e-3, rows: 1)
            steps += 1
        }
        #expect(!choice.alone && !choice.trying, "still alone after \(steps) steps")
        #expect(choice.period == DecodeThreading.shortestPeriod)
    }

    /// A step of a trial may pay for the change (workers going to sleep) or be preempted:
    /// the faster of the trial's two steps decides, whichever it is.
    @Test(arguments: [(12e-3, 5e-3), (5e-3, 12e-3)])
    func theFasterStepOfATrialDecides(_ trial: (Double, Double)) {
        var choice = DecodeThreading()
        _ = Self.run(&choice, steps: 16, threads: 8e-3, alone: 5e-3)
        #expect(choice.trying && choice.alone)
        choice.record(seconds: trial.0, rows: 1)
        choice.record(seconds: trial.1, rows: 1)
        #expect(choice.alone && !choice.trying)
    }

    @Test func aTrialMustBeClearlyFaster() {
        var choice = DecodeThreading()
        // One thread 5% faster: within the noise, so no switch.
        let stepsAlone = Self.run(&choice, steps: 2000, threads: 4.0e-3, alone: 3.8e-3)
        #expect(!choice.alone)
        #expect(stepsAlone <= 20)  // trials of 2 steps after 16, 32, 64, 128, then 256 steps
    }

    @Test func stepsOfAnotherRowCountStartOver() {
        var choice = DecodeThreading()
        // 15 steps of one row, then a step of two rows: no trial yet (the count restarts).
        _ = Self.run(&choice, steps: 15, threads: 2e-3, alone: 1e-3)
        choice.record(seconds: 4e-3, rows: 2)
        #expect(!choice.alone && !choice.trying)
        _ = Self.run(&choice, steps: 15, threads: 4e-3, alone: 2e-3, rows: 2)
        #expect(!choice.trying)
        _ = Self.run(&choice, steps: 1, threads: 4e-3, alone: 2e-3, rows: 2)
        #expect(choice.trying && choice.alone)
        // A trial interrupted by another row count goes back to the way before it.
        choice.record(seconds: 1e-3, rows: 3)
        #expect(!choice.alone && !choice.trying)
    }

    @Test func nonsenseTimesAreIgnored() {
        var choice = DecodeThreading()
        _ = Self.run(&choice, steps: 16, threads: 2e-3, alone: 1e-3)
        #expect(choice.trying)
        choice.record(seconds: .nan, rows: 1)
        choice.record(seconds: -1, rows: 1)
        #expect(choice.trying && choice.alone)
    }
}
