// ServeBench: load an OpenAI-compatible server (leap-ref serve, llama-server) with C
// concurrent clients for N streamed chat completions and report aggregate generated
// tokens per second, time to first token and latency (p50/p99). The same client measures
// any server, so that two servers are compared under identical load.
//
//   swift run -c release ServeBench --url http://127.0.0.1:8080 -c 4 -n 32 --max-tokens 64
//
// Each request asks for exactly --max-tokens tokens (`ignore_eos`, which leap-ref and
// llama-server both honour) with a distinct prompt, streams, and reads the token count
// from the final usage chunk. See docs/performance.md ("Serving") and scripts/bench-serve.sh.

import AsyncHTTPClient
import Foundation
import LeapJSON
import NIOCore

struct Options {
    var url = "http://127.0.0.1:8080"
    var concurrency = 4
    var requests = 32
    var maxTokens = 64
    var promptWords = 64
    var apiKey: String?
    var warmup = 2
}

func parseOptions() -> Options {
    var o = Options()
    var args = CommandLine.arguments.dropFirst()
    func value(_ flag: String) -> String {
        guard let v = args.popFirst() else {
            FileHandle.standardError.write(Data("ServeBench: \(flag) needs a value\n".utf8))
            exit(2)
        }
        return v
    }
    func int(_ flag: String) -> Int {
        let v = value(flag)
        guard let i = Int(v), i >= 0 else {
            FileHandle.standardError.write(Data("ServeBench: \(flag) must be a non-negative integer, not \(v)\n".utf8))
            exit(2)
        }
        return i
    }
    while let arg = args.popFirst() {
        switch arg {
        case "--url": o.url = value(arg)
        case "-c", "--concurrency": o.concurrency = max(1, int(arg))
        case "-n", "--requests": o.requests = max(1, int(arg))
        case "--max-tokens": o.maxTokens = max(1, int(arg))
        case "--prompt-words": o.promptWords = int(arg)
        case "--api-key": o.apiKey = value(arg)
        case "--warmup": o.warmup = int(arg)
        case "-h", "--help":
            print(
                "usage: ServeBench [--url URL] [-c CONCURRENCY] [-n REQUESTS] [--max-tokens N] [--prompt-words N] [--api-key KEY] [--warmup N]"
            )
            exit(0)
        default:
            FileHandle.standardError.write(Data("ServeBench: unknown argument \(arg) (see --help)\n".utf8))
            exit(2)
        }
    }
    return o
}

struct Sample {
    var ttft: Double
    var latency: Double
    var tokens: Int
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
}

/// A distinct prompt per request, so that no request is a full cache hit of another.
func prompt(_ i: Int, words: Int) -> String {
    let vocabulary = ["river", "mountain", "engine", "garden", "signal", "harbor", "lantern", "meadow", "orbit", "canyon"]
    var text = "Request \(i). Write a long story that uses these words:"
    for w in 0..<words { text += " " + vocabulary[(i * 7 + w * 3) % vocabulary.count] }
    return text + "."
}

func run(_ o: Options, index: Int, client: HTTPClient) async throws -> Sample {
    var request = HTTPClientRequest(url: o.url + "/v1/chat/completions")
    request.method = .POST
    request.headers.add(name: "Content-Type", value: "application/json")
    if let key = o.apiKey { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
    let body: JSONValue = [
        "model": "bench", "messages": [["role": "user", "content": .string(prompt(index, words: o.promptWords))]],
        "max_tokens": .integer(o.maxTokens), "temperature": 0, "ignore_eos": true, "stream": true,
        "stream_options": ["include_usage": true]
    ]
    request.body = .bytes(ByteBuffer(string: body.serialized()))
    let start = DispatchTime.now().uptimeNanoseconds
    let response: HTTPClientResponse
    do {
        response = try await client.execute(request, timeout: .seconds(600))
    } catch let error as ChannelError where error == .ioOnClosedChannel {
        // A pooled connection the server had just closed: nothing was answered; once more.
        response = try await client.execute(request, timeout: .seconds(600))
    }
    guard response.status == .ok else {
        let text = String(buffer: try await response.body.collect(upTo: 1 << 20))
        throw BenchError(description: "HTTP \(response.status.code): \(text)")
    }
    var firstToken: UInt64?
    var tokens = 0
    var pending = ""
    for try await buffer in response.body {
        pending += String(buffer: buffer)
        while let end = pending.range(of: "\n\n") {
            let event = String(pending[..<end.lowerBound])
            pending = String(pending[end.upperBound...])
            guard event.hasPrefix("data: "), event != "data: [DONE]" else { continue }
            let json = try JSONValue.parse(String(event.dropFirst(6)))
            if firstToken == nil, let content = json["choices"]?.arrayValue?.first?["delta"]?["content"]?.stringValue,
                !content.isEmpty
            {
                firstToken = DispatchTime.now().uptimeNanoseconds
            }
            if let n = json["usage"]?["completion_tokens"]?.intValue { tokens = n }
        }
    }
    let end = DispatchTime.now().uptimeNanoseconds
    return Sample(ttft: Double((firstToken ?? end) - start) / 1e9, latency: Double(end - start) / 1e9, tokens: tokens)
}

func close(_ client: HTTPClient) async {
    do { try await client.shutdown() } catch {}
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
    return sorted[max(0, min(sorted.count - 1, rank))]
}

let options = parseOptions()
// Idle pooled connections are dropped after a second, before servers with a short
// keep-alive (llama-server's is 5 s) close them under a request.
var configuration = HTTPClient.Configuration()
configuration.connectionPool = .init(idleTimeout: .seconds(1))
let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
do {
    for i in 0..<options.warmup { _ = try await run(options, index: 100_000 + i, client: client) }
    let start = DispatchTime.now().uptimeNanoseconds
    let samples = try await withThrowingTaskGroup(of: [Sample].self) { group in
        let perClient = (0..<options.concurrency).map { c in Array(stride(from: c, to: options.requests, by: options.concurrency)) }
        for indices in perClient {
            group.addTask {
                var out: [Sample] = []
                for i in indices { out.append(try await run(options, index: i, client: client)) }
                return out
            }
        }
        var all: [Sample] = []
        for try await s in group { all += s }
        return all
    }
    let wall = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    let tokens = samples.map(\.tokens).reduce(0, +)
    func ms(_ s: Double) -> String { String(format: "%.0f", s * 1000) }
    print("| url | C | requests | tokens | wall s | aggregate t/s | TTFT p50 ms | TTFT p99 ms | latency p50 ms | latency p99 ms |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    print(
        "| \(options.url) | \(options.concurrency) | \(samples.count) | \(tokens) | \(String(format: "%.2f", wall)) | "
            + "\(String(format: "%.2f", Double(tokens) / wall)) | \(ms(percentile(samples.map(\.ttft), 50))) | "
            + "\(ms(percentile(samples.map(\.ttft), 99))) | \(ms(percentile(samples.map(\.latency), 50))) | "
            + "\(ms(percentile(samples.map(\.latency), 99))) |")
    if samples.contains(where: { $0.tokens != options.maxTokens }) {
        FileHandle.standardError.write(Data("ServeBench: warning: some requests generated fewer than --max-tokens tokens\n".utf8))
    }
} catch {
    FileHandle.standardError.write(Data("ServeBench: \(error)\n".utf8))
    await close(client)
    exit(1)
}
await close(client)
