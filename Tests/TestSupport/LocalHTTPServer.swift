import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP/1.1 server on 127.0.0.1 for the model library's tests (LeapSDKTests, CLITests): one thread per
/// connection, one request per connection (`Connection: close`), every request recorded.
/// A response can stop halfway through its body and drop the connection, as a network
/// failure does.
public final class LocalHTTPServer: @unchecked Sendable {
    public struct Request: Sendable {
        public var method: String
        /// The path without the query.
        public var path: String
        public var query: [String: String]
        /// Header names lowercased.
        public var headers: [String: String]
    }

    public struct Response {
        public var status: Int
        public var headers: [(String, String)] = []
        public var body = Data()
        /// Send only this many bytes of the body (with the whole body's Content-Length),
        /// then close the connection.
        public var dropAfter: Int?
        /// Pause between chunks of 64 KiB of the body, in seconds.
        public var chunkDelay: Double = 0

        public init(status: Int, headers: [(String, String)] = [], body: Data = Data()) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        public static func json(_ text: String) -> Response {
            Response(status: 200, headers: [("Content-Type", "application/json")], body: Data(text.utf8))
        }

        public static func status(_ code: Int) -> Response { Response(status: code, body: Data("status \(code)".utf8)) }

        /// `data` as a file: 200, or 206 for a `Range: bytes=N-` request; `etag` quoted.
        public static func file(_ data: Data, request: Request, etag: String?) -> Response {
            var headers: [(String, String)] = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes")]
            if let etag { headers.append(("ETag", "\"\(etag)\"")) }
            if let range = request.headers["range"], range.hasPrefix("bytes="), range.hasSuffix("-"),
                let start = Int(range.dropFirst(6).dropLast())
            {
                guard start < data.count else { return Response(status: 416, headers: headers) }
                headers.append(("Content-Range", "bytes \(start)-\(data.count - 1)/\(data.count)"))
                return Response(status: 206, headers: headers, body: data.subdata(in: start..<data.count))
            }
            return Response(status: 200, headers: headers, body: data)
        }
    }

    /// The port the server listens on.
    public let port: Int
    private let listener: Int32
    private let handler: @Sendable (Request) -> Response
    private let lock = NSLock()
    private var log: [Request] = []
    private var stopped = false

    /// `http://127.0.0.1:PORT`.
    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    public init(handler: @escaping @Sendable (Request) -> Response) throws {
        self.handler = handler
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        listener = fd
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// A port nothing listens on (bound, then closed): connecting to it is refused.
    public static func closedPort() throws -> Int {
        let server = try LocalHTTPServer { _ in .status(500) }
        server.stop()
        return server.port
    }

    /// The requests so far.
    public var requests: [Request] { lock.withLock { log } }

    /// How many requests of `method` for `path` arrived.
    public func count(_ path: String, method: String = "GET") -> Int {
        requests.filter { $0.path == path && $0.method == method }.count
    }

    /// Stops listening (once: a second call must not close a descriptor number that
    /// something else may hold by then).
    public func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            let thread = Thread { [self] in serve(client) }
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        var end: Int?
        while end == nil {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { return }
            buffer += chunk[0..<n]
            if buffer.count > 65536 { return }
            end = findHeaderEnd(buffer)
        }
        buffer = Array(buffer[0..<end!])
        let text = String(decoding: buffer, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n")
        let first = lines.removeFirst().split(separator: " ")
        guard first.count >= 2 else { return }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let target = String(first[1])
        let parts = URLComponents(string: target)
        var query: [String: String] = [:]
        for item in parts?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        let request = Request(method: String(first[0]), path: parts?.path ?? target, query: query, headers: headers)
        lock.withLock { log.append(request) }
        let response = handler(request)
        let reason = [200: "OK", 206: "Partial Content", 404: "Not Found", 416: "Range Not Satisfiable"][response.status] ?? "Status"
        var head = "HTTP/1.1 \(response.status) \(reason)\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        guard sendAll(fd, Data(head.utf8)) else { return }
        if request.method == "HEAD" { return }
        let limit = min(response.dropAfter ?? response.body.count, response.body.count)
        var offset = 0
        while offset < limit {
            let end = min(limit, offset + 65536)
            guard sendAll(fd, response.body.subdata(in: offset..<end)) else { return }
            offset = end
            if response.chunkDelay > 0 { Thread.sleep(forTimeInterval: response.chunkDelay) }
        }
        if response.dropAfter != nil { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func findHeaderEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }

    private func sendAll(_ fd: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { raw -> Bool in
            guard var p = raw.baseAddress else { return true }
            var left = raw.count
            while left > 0 {
                #if canImport(Glibc)
                let n = send(fd, p, left, Int32(MSG_NOSIGNAL))
                #else
                let n = send(fd, p, left, 0)
                #endif
                if n <= 0 { return false }
                p += n
                left -= n
            }
            return true
        }
    }
}
