import Dispatch
import Foundation
import Kernels
import LeapJSON
import Models
import Sampling

/// `leap-ref bench --speech`: speech out timed part by part, on a language model, its
/// vocoder (the depthformer and the audio-code embeddings) and its audio detokenizer.
/// One run is a sequential (TTS) reply's audio, in the order the generation step does the
/// work:
///
/// ```
/// prefill   the prompt's P tokens (fixed pseudo-random ids), one batch
/// frame     depthformer(h) -> 8 codes   (h: the backbone's last hidden state)
///           detokenizer stream <- frame  (the samples that became final)
///           backbone <- Σ audio-code embeddings of the frame (one position)
///           ... N frames ...
/// finish    the inverse STFT's last overlap
/// ```
///
/// Codes are sampled as the reference's sequential mode samples them (temperature 0.8,
/// top-k 64, seeded). An end-of-audio frame would end a reply; the run counts them but
/// goes on, so that every run times N frames (the real-shape preset's end-of-audio code
/// never wins). The time to the first sample is the prefill, the first frame and its
/// detokenization: the first samples the SDK's `.audioSample` would carry.
struct SpeechBenchResult {
    var promptTokens = 0
    var frames = 0
    var threads = 1
    /// Frames whose codebook 0 chose the end-of-audio code (counted, not stopped at).
    var endOfAudioFrames = 0
    var samples = 0
    var prefillSeconds = 0.0
    /// Per frame: the backbone's step on the frame's embedding.
    var backboneSeconds = 0.0
    /// Per frame: the depthformer (8 codebooks).
    var depthformerSeconds = 0.0
    /// Per frame: the detokenizer's stream (its backbone, the projection and inverse STFT).
    var detokenizerSeconds = 0.0
    var firstSampleSeconds = 0.0
    var totalSeconds = 0.0

    /// Seconds of speech produced.
    var audioSeconds: Double { Double(samples) / Double(AudioDetokenizer.sampleRate) }
    /// Compute seconds per second of speech.
    var realTimeFactor: Double { totalSeconds / max(audioSeconds, 1e-9) }

    func json() -> JSONValue {
        .object(
            JSONObject([
                ("engine", .string("leap-ref")), ("prompt_tokens", .integer(promptTokens)), ("frames", .integer(frames)),
                ("threads", .integer(threads)), ("end_of_audio_frames", .integer(endOfAudioFrames)),
                ("samples", .integer(samples)), ("audio_seconds", .double(audioSeconds)),
                ("prefill_seconds", .double(prefillSeconds)),
                ("backbone_seconds_per_frame", .double(backboneSeconds / Double(max(frames, 1)))),
                ("depthformer_seconds_per_frame", .double(depthformerSeconds / Double(max(frames, 1)))),
                ("detokenizer_seconds_per_frame", .double(detokenizerSeconds / Double(max(frames, 1)))),
                ("first_sample_seconds", .double(firstSampleSeconds)), ("total_seconds", .double(totalSeconds)),
                ("real_time_factor", .double(realTimeFactor))
            ]))
    }

    /// One timed reply: `prompt` evaluated, then `frames` frames generated and decoded.
    static func measure(
        session: InferenceSession, depthformer: Depthformer, detokenizer: AudioDetokenizer, prompt: [Int], frames: Int, seed: UInt64
    ) throws -> SpeechBenchResult {
        var result = SpeechBenchResult(promptTokens: prompt.count, frames: frames)
        var sampler = Sampler(.audioCodes(temperature: 0.8, topK: 64, seed: seed))
        let stream = detokenizer.makeStream()
        let vocoder = depthformer.vocoder
        func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
        func seconds(since t: UInt64) -> Double { Double(now() - t) / 1e9 }
        session.reset()
        let start = now()
        try session.evaluate(prompt)
        result.prefillSeconds = seconds(since: start)
        for _ in 0..<frames {
            var t = now()
            let step = try depthformer.step(hiddenState: session.hiddenState, sampler: &sampler)
            result.depthformerSeconds += seconds(since: t)
            if step.isEndOfAudio { result.endOfAudioFrames += 1 }
            t = now()
            let samples = try stream.append([step.frame])
            result.detokenizerSeconds += seconds(since: t)
            if result.samples == 0, !samples.isEmpty { result.firstSampleSeconds = seconds(since: start) }
            result.samples += samples.count
            t = now()
            // The next step is another frame: the hidden state is all it reads.
            try session.evaluate(embeddings: vocoder.frameEmbedding(step.frame), needsLogits: false)
            result.backboneSeconds += seconds(since: t)
        }
        result.samples += stream.finish().count
        result.totalSeconds = seconds(since: start)
        return result
    }
}

extension Bench {
    /// `--speech`: one warm-up reply, then `repetitions` timed ones; each run's
    /// measurements, and their medians.
    func runSpeech() throws {
        guard repetitions >= 1, n >= 1, prompt >= 1 else { throw CLIError("--speech needs -p >= 1 prompt tokens, -n >= 1 frames, -r >= 1") }
        guard parallel == nil, depth == 0, image == nil, audio == nil else {
            throw CLIError("--parallel, -d, --image and --audio do not apply to --speech")
        }
        let path = try ModelCache.resolve(model)
        let (vocoderPath, tokenizerPath) = try Speak.speechFiles(
            vocoder: vocoder, audioTokenizer: audioTokenizer, model: path, for: "--speech")
        let threadCount = max(1, threads ?? ThreadPool.defaultThreads)
        BLAS.setThreads(threadCount)
        let lm = try TransformerModel(path: path, threads: threadCount)
        // On the language model's threads, as the engine loads them (SpeechParts).
        let vocoder = try SpeechVocoder(path: vocoderPath, pool: lm.pool, weights: try SpeechVocoder.WeightStorage(flag: vocoderWeights))
        try vocoder.checkLanguageModelWidth(lm.hyperparameters.embeddingLength, languageModel: path)
        let detokenizer = try AudioDetokenizer(path: tokenizerPath, vocoder: vocoder, maxFrames: n)
        let depthformer = Depthformer(vocoder: vocoder)
        let session = InferenceSession(model: lm, contextLength: prompt + n + 1, kvCacheType: cacheType)
        var rng = SplitMix64(seed: 42)
        let tokens = (0..<prompt).map { _ in Int(rng.next() % UInt64(lm.hyperparameters.vocabularySize)) }
        var runs: [SpeechBenchResult] = []
        for rep in 0...repetitions {
            var run = try SpeechBenchResult.measure(
                session: session, depthformer: depthformer, detokenizer: detokenizer, prompt: tokens, frames: n, seed: UInt64(rep))
            run.threads = threadCount
            if rep > 0 { runs.append(run) }
        }
        let median = { (key: (SpeechBenchResult) -> Double) in MediaBenchResult.median(runs.map(key)) }
        // The weights a frame streams, part by part, against the read ceiling measured now.
        let backboneBytes = lm.weightBytesPerToken - lm.outputHeadByteCount
        let depthformerBytes = vocoder.depthformerFrameByteCount
        let detokenizerBytes = detokenizer.backbone.weightBytesPerToken - detokenizer.backbone.outputHeadByteCount
        let ceiling = MemoryBandwidth.measureRead(pool: lm.pool)
        let frameMilliseconds = 1000 * (median(\.backboneSeconds) + median(\.depthformerSeconds) + median(\.detokenizerSeconds)) / Double(n)
        let frameBytes = Double(backboneBytes + depthformerBytes + detokenizerBytes)
        let roofMilliseconds = 1000 * frameBytes / ceiling
        if json {
            let object: JSONValue = .object(
                JSONObject([
                    ("runs", .array(runs.map { $0.json() })), ("vocoder_weights", .string(vocoderWeights)),
                    ("median_total_seconds", .double(median(\.totalSeconds))),
                    ("median_first_sample_seconds", .double(median(\.firstSampleSeconds))),
                    ("median_real_time_factor", .double(median(\.realTimeFactor))),
                    ("backbone_bytes_per_frame", .integer(backboneBytes)), ("depthformer_bytes_per_frame", .integer(depthformerBytes)),
                    ("detokenizer_bytes_per_frame", .integer(detokenizerBytes)), ("read_ceiling_bytes_per_second", .double(ceiling)),
                    ("frame_milliseconds", .double(frameMilliseconds)), ("roof_frame_milliseconds", .double(roofMilliseconds))
                ]))
            writeOut(object.serialized(.python) + "\n")
            return
        }
        let first = runs[0]
        print(
            "| threads | prompt | frames | speech s | prefill s | backbone ms/frame | depthformer ms/frame | detokenizer ms/frame | first sample s | total s | RTF |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        let f = Double(n)
        print(
            String(
                format: "| %d | %d | %d | %.2f | %.3f | %.1f | %.1f | %.1f | %.3f | %.2f | %.3f |", threadCount, prompt, n,
                first.audioSeconds,
                median(\.prefillSeconds), 1000 * median(\.backboneSeconds) / f, 1000 * median(\.depthformerSeconds) / f,
                1000 * median(\.detokenizerSeconds) / f, median(\.firstSampleSeconds), median(\.totalSeconds), median(\.realTimeFactor)))
        print(
            "\nweights streamed per frame: backbone \(formatBytes(backboneBytes)), depthformer \(formatBytes(depthformerBytes)) "
                + "(8 passes), detokenizer \(formatBytes(detokenizerBytes)); at the read ceiling measured now on "
                + "\(threadCount) threads (\(String(format: "%.2f", ceiling / 1e9)) GB/s) that is "
                + "\(String(format: "%.1f", roofMilliseconds)) ms a frame, against \(String(format: "%.1f", frameMilliseconds)) ms measured "
                + "(\(String(format: "%.0f", 100 * roofMilliseconds / max(frameMilliseconds, 1e-9)))% of the roof)")
        print("\nmedians of \(repetitions) runs after a warm-up; vocoder weights \(vocoderWeights); kernels: \(KernelBuild.description)")
        if runs.contains(where: { $0.endOfAudioFrames > 0 }) {
            print("note: some frames chose the end-of-audio code (timed as frames all the same)")
        }
    }
}
