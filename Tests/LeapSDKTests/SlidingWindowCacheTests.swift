import Foundation
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

/// The prompt cache on a model with sliding-window layers (Gemma 3 270M: a window of 512
/// positions, kept in rings of 511 + 513 positions, the runner's step being 513 tokens; the
/// context of 4096 is larger than a ring's two copies, so the layers do keep rings): a
/// cached prefix is reused while the rings still hold the window it needs; further back,
/// the rings have been overwritten, so nothing is reused and the whole prompt is evaluated
/// again, giving exactly the logits of a cold run.
@Suite struct SlidingWindowCacheTests {
    @Test func aPrefixWhoseWindowWasOverwrittenIsEvaluatedAgain() async throws {
        let path = try TestFixtures.require(TestFixtures.gemma3_270mQ4_K_M)
        let options = LiquidInferenceEngineOptions(contextSize: 4096, defaultRNGSeed: 1)
        let warm = try #require(try await Leap.load(path: path, options: options) as? LiquidInferenceEngineRunner)
        let cold = try #require(try await Leap.load(path: path, options: options) as? LiquidInferenceEngineRunner)
        let long = (0..<1040).map { 1000 + ($0 * 7919) % 50000 }
        let suffix = [506, 5279, 529]
        // After the 1040 tokens the rings hold positions 16 ... 1039.
        let (nearReused, farReused, warmLogits) = try warm.loaded.queue.sync { () throws -> (Int, Int, [Float]) in
            _ = try warm.sharedScheduler().evaluatePrompt(long, reuseCache: true)
            // Position 1000 sees 489 ... 1000: still there.
            let near = try warm.sharedScheduler().evaluatePrompt(Array(long[0..<1000]) + suffix, reuseCache: true)
            // Position 30 sees 0 ... 30: overwritten.
            let far = try warm.sharedScheduler().evaluatePrompt(Array(long[0..<30]) + suffix, reuseCache: true)
            return (near, far, try warm.sharedScheduler().currentLogits())
        }
        #expect(nearReused == 1000)
        #expect(farReused == 0)
        let coldLogits = try cold.loaded.queue.sync { () throws -> [Float] in
            _ = try cold.sharedScheduler().evaluatePrompt(Array(long[0..<30]) + suffix, reuseCache: false)
            return try cold.sharedScheduler().currentLogits()
        }
        // (Compared as one Bool: a failed comparison of two 262,144-float arrays would make
        // the test library diff them, which takes hours.)
        let identical = warmLogits == coldLogits
        #expect(identical, "max |diff| \(zip(warmLogits, coldLogits).map { abs($0 - $1) }.max() ?? 0)")
    }
}
