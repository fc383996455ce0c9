import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One HTTP request run to its end on the calling thread (it blocks: call it off the main
/// thread and off Swift's cooperative threads, as `LeapModelLibrary` does). The body goes
/// to memory or is appended to a file descriptor as it arrives.
final class HTTPTransfer: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// Where the body goes.
    enum Sink {
        /// Kept in `body`, at most this many bytes (more is an error).
        case memory(limit: Int)
        /// Written to the descriptor at its current offset.
        case file(Int32)
    }

    /// The final response's status (0: none arrived).
    private(set) var status = 0
    /// The final response's headers, names lowercased.
    private(set) var headers: [String: String] = [:]
    /// The headers of each redirect response on the way (Hugging Face states a file's
    /// sha256 as the `X-Linked-Etag` of its redirect).
    private(set) var redirectHeaders: [[String: String]] = []
    /// The body, for a memory sink.
    private(set) var body = Data()
    /// Body bytes received.
    private(set) var received: Int64 = 0
    /// The transport error (nil: the exchange completed), not counting a cancellation
    /// this transfer made itself.
    private(set) var error: URLError?
    /// The `errno` of a failed write to the file sink.
    private(set) var writeErrno: Int32?
    /// Whether the memory sink's limit was passed.
    private(set) var overLimit = false
    /// Whether the caller's cancellation stopped the request.
    private(set) var cancelled = false

    private let sink: Sink
    private let accept: (Int, [String: String]) -> Bool
    private let onData: (Data) -> Void
    private let finished = DispatchSemaphore(value: 0)
    private var cancelledByUs = false

    private init(sink: Sink, accept: @escaping (Int, [String: String]) -> Bool, onData: @escaping (Data) -> Void) {
        self.sink = sink
        self.accept = accept
        self.onData = onData
    }

    /// Runs `request` and waits for its end. `accept` sees the status and headers before
    /// the body and returns false to stop there; `onData` is given each chunk after it is
    /// stored.
    /// With a `cancel` flag, a cancellation stops the request within 0.1 s (`cancelled`).
    static func run(
        _ request: URLRequest, sink: Sink, timeout: TimeInterval, cancel: CancellationFlag? = nil,
        accept: @escaping (Int, [String: String]) -> Bool = { _, _ in true }, onData: @escaping (Data) -> Void = { _ in }
    ) -> HTTPTransfer {
        let transfer = HTTPTransfer(sink: sink, accept: accept, onData: onData)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpAdditionalHeaders = ["User-Agent": "leap-ref", "Accept-Encoding": "identity"]
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: configuration, delegate: transfer, delegateQueue: queue)
        var request = request
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        let task = session.dataTask(with: request)
        task.resume()
        while transfer.finished.wait(timeout: .now() + 0.1) == .timedOut {
            if cancel?.isCancelled == true, !transfer.cancelled {
                transfer.cancelled = true
                task.cancel()
            }
        }
        session.finishTasksAndInvalidate()
        return transfer
    }

    static func lowercased(_ fields: [AnyHashable: Any]) -> [String: String] {
        var out: [String: String] = [:]
        for (key, value) in fields { out[String(describing: key).lowercased()] = String(describing: value) }
        return out
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        if let http = response as? HTTPURLResponse {
            status = http.statusCode
            headers = Self.lowercased(http.allHeaderFields)
        }
        if accept(status, headers) {
            completionHandler(.allow)
        } else {
            cancelledByUs = true
            completionHandler(.cancel)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard !cancelledByUs else { return }
        switch sink {
        case .memory(let limit):
            guard body.count + data.count <= limit else {
                overLimit = true
                cancelledByUs = true
                dataTask.cancel()
                return
            }
            body.append(data)
        case .file(let fd):
            if let failure = Self.write(data, to: fd) {
                writeErrno = failure
                cancelledByUs = true
                dataTask.cancel()
                return
            }
        }
        received += Int64(data.count)
        onData(data)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        redirectHeaders.append(Self.lowercased(response.allHeaderFields))
        completionHandler(request)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if let error, !cancelledByUs, !cancelled {
            self.error = (error as? URLError) ?? URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "\(error)"])
        }
        finished.signal()
    }

    /// Writes all of `data` to `fd`; the `errno` of a failure, nil on success.
    static func write(_ data: Data, to fd: Int32) -> Int32? {
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Int32? in
            guard var p = raw.baseAddress else { return nil }
            var left = raw.count
            while left > 0 {
                #if canImport(Glibc)
                let n = Glibc.write(fd, p, left)
                #else
                let n = Darwin.write(fd, p, left)
                #endif
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                p += n
                left -= n
            }
            return nil
        }
    }
}
