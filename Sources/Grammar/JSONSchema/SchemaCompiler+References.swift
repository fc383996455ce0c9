import LeapJSON

/// `$id`, `$anchor` and `$ref`: resources and anchors of one document, and reference
/// resolution (local references only: remote ones are a compile error).
extension SchemaCompiler {
    /// A resolved reference: the target subschema, the base URI its own references resolve
    /// against, and its place in the document (for error messages).
    struct RefTarget {
        let schema: JSONValue
        let base: String
        let pointer: String
    }

    /// Records every `$id` resource and `$anchor` of the document (iteratively: the document
    /// may be as deep as the JSON parser allows).
    func indexResources(_ document: JSONValue, base: String) throws(SchemaError) {
        var stack: [(JSONValue, String)] = [(document, base)]
        var isDocument = true
        while let (s, base) = stack.popLast() {
            defer { isDocument = false }
            switch s {
            case .array(let a): for x in a { stack.append((x, base)) }
            case .object(let o):
                var here = base
                if case .string(let id)? = o["$id"] {
                    here = withoutFragment(resolveURI(base: base, ref: id))
                    resources[here] = s
                    if isDocument { rootBase = here }
                } else if base.isEmpty && resources[""] == nil {
                    resources[""] = s
                }
                if case .string(let a)? = o["$anchor"] { anchors[here + "#" + a] = s }
                if case .string(let a)? = o["$dynamicAnchor"], anchors[here + "#" + a] == nil { anchors[here + "#" + a] = s }
                for (k, v) in o where k != "enum" && k != "const" && k != "default" && k != "examples" { stack.append((v, here)) }
            default: continue
            }
        }
    }

    func withoutFragment(_ uri: String) -> String {
        guard let hash = uri.firstIndex(of: "#") else { return uri }
        return String(uri[..<hash])
    }

    /// `ref` resolved against `base` (RFC 3986, for the forms schemas use).
    func resolveURI(base: String, ref: String) -> String {
        if ref.contains("://") || ref.hasPrefix("urn:") { return ref }
        if ref.hasPrefix("#") { return base + ref }
        if base.isEmpty { return ref }
        let b = withoutFragment(base)
        if ref.hasPrefix("/") {
            if let r = schemeEnd(b), let slash = b[r...].firstIndex(of: "/") { return String(b[..<slash]) + ref }
            return ref
        }
        if let slash = b.lastIndex(of: "/") { return String(b[...slash]) + ref }
        return ref
    }

    func schemeEnd(_ s: String) -> String.Index? {
        var i = s.startIndex
        while i < s.endIndex {
            if s[i...].hasPrefix("://") { return s.index(i, offsetBy: 3) }
            i = s.index(after: i)
        }
        return nil
    }

    func percentDecoded(_ s: String) -> String {
        var out: [UInt8] = []
        let u = Array(s.utf8)
        var i = 0
        while i < u.count {
            if u[i] == 0x25, i + 2 < u.count, let h = StringLexer.hexValue(u[i + 1]), let l = StringLexer.hexValue(u[i + 2]) {
                out.append(UInt8(h * 16 + l))
                i += 3
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    func unescapePointer(_ s: String) -> String {
        var out = ""
        var it = s.makeIterator()
        while let c = it.next() {
            if c == "~" {
                let n = it.next()
                out.append(n == "1" ? "/" : n == "0" ? "~" : "~\(n.map(String.init) ?? "")")
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// The subschema a `$ref` names: a JSON Pointer or an anchor, in this document or in one of
    /// its `$id` resources.
    func resolveRef(_ ref: String, base: String) throws(SchemaError) -> RefTarget {
        let full = resolveURI(base: base, ref: ref)
        var doc = full, frag = ""
        if let hash = full.firstIndex(of: "#") {
            doc = String(full[..<hash])
            frag = String(full[full.index(after: hash)...])
        }
        guard let resource = resources[doc] ?? (doc.isEmpty ? Optional(root) : nil) else {
            throw .unsupported("$ref", "reference '\(ref)' is not local to the schema (remote references are not supported)")
        }
        frag = percentDecoded(frag)
        let prefix = doc.isEmpty || doc == rootBase ? "" : doc + "#"
        if frag.isEmpty { return RefTarget(schema: resource, base: doc, pointer: prefix) }
        if !frag.hasPrefix("/") {
            guard let s = anchors[doc + "#" + frag] else { throw .invalid("unresolvable $ref '\(ref)'") }
            return RefTarget(schema: s, base: doc, pointer: (prefix.isEmpty ? "#" : prefix) + frag)
        }
        var cur = resource
        for raw in frag.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            let token = unescapePointer(String(raw))
            switch cur {
            case .object(let o):
                guard let next = o[token] else { throw .invalid("unresolvable $ref '\(ref)'") }
                cur = next
            case .array(let a):
                guard let i = Int(token), i >= 0, i < a.count else { throw .invalid("unresolvable $ref '\(ref)'") }
                cur = a[i]
            default: throw .invalid("unresolvable $ref '\(ref)'")
            }
        }
        return RefTarget(schema: cur, base: doc, pointer: prefix + frag)
    }

    /// The base URI of a subschema: its `$id` (or the base a rebased part carries).
    func idBase(_ schema: JSONValue, _ base: String) -> String {
        if case .string(let b)? = schema[NormalKey.base] { return b }
        if case .string(let id)? = schema["$id"] { return withoutFragment(resolveURI(base: base, ref: id)) }
        return base
    }
}
