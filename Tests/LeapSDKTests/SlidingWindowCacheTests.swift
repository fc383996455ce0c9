import Foundation
import TestSupport
import Testing

@testable import LeapSDK
@testable import LeapSDKCore

/// The prompt cache on a model with sliding-window layers (Gemma 3 270M: a window of 512
/// positions, kept in rings of 511 + 512 positions, the session's batch being 512): a
/// cached prefix is reused while the rings still hold the window it needs; further back,
/// the rings have been overwritten, so nothing is reused and the whole prompt is evaluated
/// again, giving exactly the logits of a cold run.
@Suite struct SlidingWindowCacheTests {
    @Test func aPrefixWhoseWindowWasOverwrittenIsEvaluatedAgain() async throws {
        let path = try TestFixtures.require(TestFixtures.gemma3_270mQ4_K_M)
        let options = LiquidInferenceEngineOptions(contextSize: 2048, defaultRNGSeed: 1)
        let warm = try #require(try await Leap.load(path: path, options: options) as? LiquidInferenceEngineRunner)
        let cold = try #require(try await Leap.load(path: path, options: options) as? LiquidInferenceEngineRunner)
        let long = (0..<1040).map { 1000 + ($0 * 7919) % 50000 }
        let suffix = [506, 5279, 529]
        // After the 1040 tokens the rings hold positions 17 ... 1039.
        let (nearReused, farReused, warmLogits) = try warm.engine.queue.sync { () throws -> (Int, Int, [Float]) in
            _ = try warm.engine.evaluatePrompt(long, reuseCache: true)
            // Position 1000 sees 489 ... 1000: still there.
            let near = try warm.engine.evaluatePrompt(Array(long[0..<1000]) + suffix, reuseCache: true)
            // Position 30 sees 0 ... 30: overwritten.
            let far = try warm.engine.evaluatePrompt(Array(long[0..<30]) + suffix, reuseCache: true)
            return (near, far, warm.engine.currentLogits())
        }
        #expect(nearReused == 1000)
        #expect(farReused == 0)
        let coldLogits = try cold.engine.queue.sync { () throws -> [Float] in
            _ = try cold.engine.evaluatePrompt(Array(long[0..<30]) + suffix, reuseCache: false)
            return cold.engine.currentLogits()
        }
        #expect(warmLogits == coldLogits)
    }
}
