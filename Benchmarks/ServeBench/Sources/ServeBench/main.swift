// ServeBench: load an OpenAI-compatible server (leap-ref serve, llama-server) with C
// concurrent clients for N streamed chat completions and report aggregate generated
// tokens per second, time to first token and latency (p50/p95/p99). The same client measures
// any server, so that two servers are compared under identical load.
//
//   swift run -c release ServeBench --url http://127.0.0.1:8080 -c 4 -n 32 --max-tokens 64
//
// Each request asks for exactly --max-tokens tokens (`ignore_eos`, which leap-ref and
// llama-server both honour) with a distinct prompt, and streams. Every request is checked:
// status 200, every event a JSON chunk (an error event fails the run), content chunks
// counted, a finish reason, the final usage chunk's completion_tokens equal to
// --max-tokens, and `data: [DONE]`. Any failed check stops the run with exit status 1.
//
// Connections: by default every request goes on a fresh connection (`Connection: close`).
// llama-server (cpp-httplib) closes the connection after every streamed response while
// its headers announce keep-alive, so a pooled connection is reused just as the server
// closes it, and the next request fails with `HTTPClientError.remoteConnectionClosed`
// before any byte of its response arrives. `--keep-alive` reuses pooled connections
// instead; a request whose connection closes before its response head arrived is then
// sent again (at most 3 times), and the retries are counted and printed. A failure after
// the response head is never retried. See docs/performance.md ("Serving") and
// scripts/bench-serve.sh.

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
    var keepAlive = false
    var json = false
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ServeBench: \(message)\n".utf8))
    exit(2)
}

func parseOptions() -> Options {
    var o = Options()
    var args = CommandLine.arguments.dropFirst()
    func value(_ flag: String) -> String {
        guard let v = args.popFirst() else { fail("\(flag) needs a value") }
        return v
    }
    func int(_ flag: String) -> Int {
        let v = value(flag)
        guard let i = Int(v), i >= 0 else { fail("\(flag) must be a non-negative integer, not \(v)") }
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
        case "--keep-alive": o.keepAlive = true
        case "--json": o.json = true
        case "-h", "--help":
            print(
                """
                usage: ServeBench [--url URL] [-c CONCURRENCY] [-n REQUESTS] [--max-tokens N] [--prompt-words N]
                                  [--api-key KEY] [--warmup N] [--keep-alive] [--json]
                  --keep-alive  reuse pooled connections (default: a fresh connection per request)
                  --json        print one JSON object instead of the Markdown table
                """)
            exit(0)
        default: fail("unknown argument \(arg) (see --help)")
        }
    }
    return o
}

/// One checked request.
struct Sample {
    var ttft: Double
    var latency: Double
    /// `usage.completion_tokens` of the final chunk.
    var tokens: Int
    /// Stream chunks that carried content.
    var contentChunks: Int
    /// Times the request was sent again because its connection closed before the response head.
    var retries: Int
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

/// Whether `error`, thrown before the response head arrived, means the connection was
/// closed under the request (so the server never answered it and it may be sent again).
func closedBeforeResponse(_ error: Error) -> Bool {
    if let e = error as? HTTPClientError, e == .remoteConnectionClosed { return true }
    if let e = error as? ChannelError, [.ioOnClosedChannel, .outputClosed, .eof, .alreadyClosed].contains(e) { return true }
    if let e = error as? IOError, [ECONNRESET, EPIPE].contains(e.errnoCode) { return true }
    return false
}

/// Sends `request` until its response head arrives: again (at most 3 times) when its
/// connection closes before that. Returns the response and the number of retries.
func send(_ request: HTTPClientRequest, index: Int, client: HTTPClient) async throws -> (HTTPClientResponse, Int) {
    var retries = 0
    while true {
        do {
            return (try await client.execute(request, timeout: .seconds(600)), retries)
        } catch {
            guard closedBeforeResponse(error), retries < 3 else {
                throw BenchError(description: "request \(index): no response (after \(retries) retries): \(error)")
            }
            retries += 1
        }
    }
}

/// Sends request `index`, reads its whole stream and checks it.
func run(_ o: Options, index: Int, client: HTTPClient) async throws -> Sample {
    var request = HTTPClientRequest(url: o.url + "/v1/chat/completions")
    request.method = .POST
    request.headers.add(name: "Content-Type", value: "application/json")
    if !o.keepAlive { request.headers.add(name: "Connection", value: "close") }
    if let key = o.apiKey { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
    let body: JSONValue = [
        "model": "bench", "messages": [["role": "user", "content": .string(prompt(index, words: o.promptWords))]],
        "max_tokens": .integer(o.maxTokens), "temperature": 0, "ignore_eos": true, "stream": true,
        "stream_options": ["include_usage": true]
    ]
    request.body = .bytes(ByteBuffer(string: body.serialized()))
    let start = DispatchTime.now().uptimeNanoseconds
    let (response, retries) = try await send(request, index: index, client: client)
    guard response.status == .ok else {
        let text = String(buffer: try await response.body.collect(upTo: 1 << 20))
        throw BenchError(description: "request \(index): HTTP \(response.status.code): \(text)")
    }
    var firstToken: UInt64?
    var tokens: Int?
    var chunks = 0
    var finishReason: String?
    var done = false
    var pending = ""
    do {
        for try await buffer in response.body {
            pending += String(buffer: buffer)
            while let end = pending.range(of: "\n\n") {
                let event = String(pending[..<end.lowerBound]).trimmingCharacters(in: .whitespacesAndNewlines)
                pending = String(pending[end.upperBound...])
                if event.isEmpty || event.hasPrefix(":") { continue }
                guard event.hasPrefix("data: "), !done else {
                    throw BenchError(description: "request \(index): unexpected event \(event.prefix(300))")
                }
                if event == "data: [DONE]" {
                    done = true
                    continue
                }
                let json = try JSONValue.parse(String(event.dropFirst(6)))
                if let error = json["error"] { throw BenchError(description: "request \(index): error event \(error.serialized())") }
                let choice = json["choices"]?.arrayValue?.first
                if let content = choice?["delta"]?["content"]?.stringValue, !content.isEmpty {
                    chunks += 1
                    if firstToken == nil { firstToken = DispatchTime.now().uptimeNanoseconds }
                }
                if let reason = choice?["finish_reason"]?.stringValue { finishReason = reason }
                if let n = json["usage"]?["completion_tokens"]?.intValue { tokens = n }
            }
        }
    } catch let error as BenchError {
        throw error
    } catch {
        throw BenchError(description: "request \(index): the stream broke after \(chunks) content chunks: \(error)")
    }
    let end = DispatchTime.now().uptimeNanoseconds
    guard done else { throw BenchError(description: "request \(index): the stream ended without data: [DONE]") }
    guard finishReason != nil else { throw BenchError(description: "request \(index): no chunk had a finish_reason") }
    guard let tokens else { throw BenchError(description: "request \(index): no usage chunk with completion_tokens") }
    guard tokens == o.maxTokens else {
        throw BenchError(description: "request \(index): \(tokens) completion tokens, not --max-tokens \(o.maxTokens)")
    }
    guard let firstToken else { throw BenchError(description: "request \(index): no content chunk") }
    return Sample(
        ttft: Double(firstToken - start) / 1e9, latency: Double(end - start) / 1e9, tokens: tokens, contentChunks: chunks,
        retries: retries)
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
var configuration = HTTPClient.Configuration()
// Idle pooled connections are dropped after a second, before servers with a short
// keep-alive (cpp-httplib's is 5 s) close them.
configuration.connectionPool = .init(idleTimeout: .seconds(1))
let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
do {
    var warmupRetries = 0
    for i in 0..<options.warmup { warmupRetries += try await run(options, index: 100_000 + i, client: client).retries }
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
    let chunks = samples.map(\.contentChunks).reduce(0, +)
    let retries = samples.map(\.retries).reduce(0, +)
    func ms(_ s: Double) -> Double { (s * 1000).rounded() }
    if options.json {
        let result: JSONValue = [
            "url": .string(options.url), "concurrency": .integer(options.concurrency), "requests": .integer(samples.count),
            "tokens": .integer(tokens), "content_chunks": .integer(chunks), "wall_s": .double(wall),
            "aggregate_tps": .double(Double(tokens) / wall),
            "ttft_p50_ms": .double(ms(percentile(samples.map(\.ttft), 50))),
            "ttft_p95_ms": .double(ms(percentile(samples.map(\.ttft), 95))),
            "ttft_p99_ms": .double(ms(percentile(samples.map(\.ttft), 99))),
            "latency_p50_ms": .double(ms(percentile(samples.map(\.latency), 50))),
            "latency_p95_ms": .double(ms(percentile(samples.map(\.latency), 95))),
            "latency_p99_ms": .double(ms(percentile(samples.map(\.latency), 99))),
            "retries": .integer(retries), "warmup_retries": .integer(warmupRetries),
            "connections": .string(options.keepAlive ? "keep-alive" : "fresh")
        ]
        print(result.serialized())
    } else {
        func f0(_ s: Double) -> String { String(format: "%.0f", s * 1000) }
        print(
            "| url | C | requests | tokens | content chunks | wall s | aggregate t/s | TTFT p50 ms | TTFT p99 ms | latency p50 ms | latency p95 ms | latency p99 ms | retries |"
        )
        print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        print(
            "| \(options.url) | \(options.concurrency) | \(samples.count) | \(tokens) | \(chunks) | \(String(format: "%.2f", wall)) | "
                + "\(String(format: "%.2f", Double(tokens) / wall)) | \(f0(percentile(samples.map(\.ttft), 50))) | "
                + "\(f0(percentile(samples.map(\.ttft), 99))) | \(f0(percentile(samples.map(\.latency), 50))) | "
                + "\(f0(percentile(samples.map(\.latency), 95))) | "
                + "\(f0(percentile(samples.map(\.latency), 99))) | \(retries) |")
    }
    if retries + warmupRetries > 0 {
        FileHandle.standardError.write(
            Data(
                "ServeBench: \(retries + warmupRetries) requests were sent again after their connection closed before the response head\n"
                    .utf8))
    }
} catch {
    FileHandle.standardError.write(Data("ServeBench: \(error)\n".utf8))
    await close(client)
    exit(1)
}
await close(client)
