import Foundation
import Hummingbird
import NIOCore

/// The chat page served at `/` (plain HTML, CSS and JavaScript shipped as this module's
/// resources, in `WebUI/`): `index.html` at `/`, the other files under `/webui/`.
///
/// Responses carry a strict Content-Security-Policy (scripts, styles and requests from the
/// server itself only; images and audio also from `data:` URLs, the attachments the page
/// reads from local files; no inline code, no frames), `nosniff`, and an ETag
/// (`If-None-Match` gets 304). The page names its files with `?v=` and their content hash,
/// so those are cached for a year; the page itself is revalidated every time.
///
/// The script is ES modules (`chat.js` and the modules it imports, no build step). A module
/// names another as `"./NAME.js"` (double quotes, the only form allowed); the server
/// rewrites each such name to `"./NAME.js?v=HASH"`, the imported file's hash as served, and
/// hashes a module after rewriting its imports, so a change to any module changes the
/// versions of every module that imports it, directly or not, and of the page: a browser
/// never mixes a cached old module with new ones. A module that names a file not in
/// `assetTypes`, or modules that import each other in a cycle, stop the page from loading
/// (the server warns at start and `/` answers 500).
public struct WebUIAssets: Sendable {
    /// One file as served.
    struct Asset: Sendable {
        let bytes: [UInt8]
        let contentType: String
        /// FNV-1a hash of the bytes, 16 hex digits.
        let hash: String
        var etag: String { "\"\(hash)\"" }
    }

    /// The files by name (`index.html`, `chat.js`, ...).
    let files: [String: Asset]

    /// The files under `/webui/`, with their content types: every file the page loads is
    /// listed here (nothing else in the directory is served).
    static let assetTypes: [String: String] = {
        var types = ["chat.css": "text/css; charset=utf-8", "icon.svg": "image/svg+xml"]
        for module in modules { types[module] = "text/javascript; charset=utf-8" }
        return types
    }()

    /// The page's JavaScript modules: `chat.js` (the one the page loads) and those it imports.
    static let modules = [
        "chat.js", "api.js", "attachments.js", "dom.js", "markup.js", "messages.js", "settings.js", "speech.js",
        "storage.js"
    ]

    /// The Content-Security-Policy of every page response.
    public static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src data:; connect-src 'self'; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// Reads the files from `directory`, and points the page's references and the modules'
    /// imports at the files' current versions (`/webui/chat.js?v=HASH`, `"./dom.js?v=HASH"`).
    public init(directory: URL) throws {
        var files: [String: Asset] = [:]
        var sources: [String: String] = [:]
        for (name, type) in Self.assetTypes {
            let data = try Data(contentsOf: directory.appendingPathComponent(name))
            if Self.modules.contains(name) {
                guard let text = String(data: data, encoding: .utf8) else { throw WebUIError("\(name) is not UTF-8 text") }
                sources[name] = text
            } else {
                let bytes = [UInt8](data)
                files[name] = Asset(bytes: bytes, contentType: type, hash: Self.hash(bytes))
            }
        }
        for (name, bytes) in try Self.versionImports(sources) {
            files[name] = Asset(bytes: bytes, contentType: "text/javascript; charset=utf-8", hash: Self.hash(bytes))
        }
        var page = try String(contentsOf: directory.appendingPathComponent("index.html"), encoding: .utf8)
        for (name, asset) in files {
            page = page.replacingOccurrences(of: "\"/webui/\(name)\"", with: "\"/webui/\(name)?v=\(asset.hash)\"")
        }
        let bytes = Array(page.utf8)
        files["index.html"] = Asset(bytes: bytes, contentType: "text/html; charset=utf-8", hash: Self.hash(bytes))
        self.files = files
    }

    /// The page shipped with leap-ref (the module's resource bundle, next to the binary),
    /// or why it cannot be read.
    public static let bundled: Result<WebUIAssets, WebUIError> = {
        guard let directory = bundledDirectory() else {
            return .failure(
                WebUIError(
                    "the chat page's files are missing: the directory \(bundleName).resources (or .bundle) must sit next "
                        + "to the leap-ref binary, as the build leaves it; start with --no-webui to serve the API alone"))
        }
        do {
            return .success(try WebUIAssets(directory: directory))
        } catch {
            return .failure(WebUIError("the chat page's files cannot be read from \(directory.path): \(error)"))
        }
    }()

    /// SwiftPM's name for this module's resource bundle.
    static let bundleName = "leap-ref_LeapServer"

    /// The `WebUI` directory of the resource bundle, looked up without `Bundle.module`,
    /// whose accessor stops the process when the bundle is missing.
    static func bundledDirectory() -> URL? {
        var places = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            places.append(executable.deletingLastPathComponent())
        }
        places += Bundle.allBundles.map { $0.bundleURL.deletingLastPathComponent() }
        for place in places {
            for suffix in ["resources", "bundle"] {
                let path = place.appendingPathComponent("\(bundleName).\(suffix)").path
                guard let bundle = Bundle(path: path),
                    let url = bundle.url(forResource: "WebUI", withExtension: nil)
                else { continue }
                return url
            }
        }
        return nil
    }

    /// The modules as served: each `"./NAME.js"` in a module's text becomes
    /// `"./NAME.js?v=HASH"`, HASH being the hash of NAME.js as served (its own imports
    /// rewritten first). Throws for a name that is not a module, for `'./` (an import the
    /// rewriting would miss), and for a cycle of imports.
    static func versionImports(_ sources: [String: String]) throws -> [String: [UInt8]] {
        var served: [String: [UInt8]] = [:]
        func serve(_ name: String, importedBy chain: [String]) throws -> [UInt8] {
            if let bytes = served[name] { return bytes }
            if chain.contains(name) {
                throw WebUIError("the chat page's modules import each other in a cycle: \((chain + [name]).joined(separator: " -> "))")
            }
            guard let text = sources[name] else { throw WebUIError("the chat page's module \(name) is missing") }
            if text.contains("'./") {
                throw WebUIError("\(name) names a module as './…': write \"./NAME.js\", so that the server versions it")
            }
            let pieces = text.components(separatedBy: "\"./")
            var out = pieces[0]
            for piece in pieces.dropFirst() {
                guard let quote = piece.firstIndex(of: "\"") else { throw WebUIError("\(name): an unterminated \"./") }
                let imported = String(piece[..<quote])
                guard modules.contains(imported) else {
                    throw WebUIError("\(name) imports ./\(imported), which is not one of the served modules (WebUIAssets.modules)")
                }
                let version = hash(try serve(imported, importedBy: chain + [name]))
                out += "\"./\(imported)?v=\(version)" + piece[quote...]
            }
            let bytes = Array(out.utf8)
            served[name] = bytes
            return bytes
        }
        for name in sources.keys.sorted() { _ = try serve(name, importedBy: []) }
        return served
    }

    /// 64-bit FNV-1a of `bytes`, as 16 hex digits.
    static func hash(_ bytes: [UInt8]) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        let digits = String(h, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The response for `name` (`index.html` or a file under `/webui/`); nil for an
    /// unknown name. `version` is the request's `v` query parameter.
    func response(_ name: String, version: Substring?, ifNoneMatch: String?) -> Response? {
        guard let asset = files[name] else { return nil }
        var headers: HTTPFields = [
            .contentType: asset.contentType, .eTag: asset.etag, .xContentTypeOptions: "nosniff",
            .contentSecurityPolicy: Self.contentSecurityPolicy, .init("Referrer-Policy")!: "no-referrer",
            .init("X-Frame-Options")!: "DENY"
        ]
        // A versioned URL never changes content; anything else is checked each time.
        headers[.cacheControl] = version.map { $0 == asset.hash[...] } == true ? "public, max-age=31536000, immutable" : "no-cache"
        if let tags = ifNoneMatch, tags.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == asset.etag }) {
            headers[.contentType] = nil
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: asset.bytes)))
    }
}

/// Why the chat page cannot be served.
public struct WebUIError: Error, Sendable, CustomStringConvertible {
    /// What is wrong and what to do.
    public let description: String
    init(_ description: String) { self.description = description }
}

extension ServerRoutes {
    /// Adds the chat page's routes: `/` and `/webui/FILE`. With the files missing, they
    /// answer 500 with the reason.
    static func addWebUI(to router: Router<ServerContext>, assets: Result<WebUIAssets, WebUIError>) {
        let page: @Sendable (Request, String) throws -> Response = { request, name in
            let files: WebUIAssets
            switch assets {
            case .success(let a): files = a
            case .failure(let error): throw APIError(status: 500, message: error.description)
            }
            guard
                let response = files.response(
                    name, version: request.uri.queryParameters["v"], ifNoneMatch: request.headers[.ifNoneMatch])
            else { throw APIError(status: 404, message: "no route for \(request.method) \(request.uri.path)") }
            return response
        }
        router.get("/") { request, _ in try page(request, "index.html") }
        router.get("/webui/:file") { request, context in try page(request, context.parameters.get("file") ?? "") }
    }
}
