/// RFC 9113's rules for the header block of a request or of its trailers, as NIOHTTP2 applies
/// them when its header-block validation is on (`HPACKHeaders+Validation.swift`), checked in
/// the provider API's own single pass over the fields: provider connections turn NIOHTTP2's
/// validation off, which walked every field again (and every response the gateway writes),
/// ≈ 8 % of the gateway's CPU per request. A block that breaks a rule gets what NIOHTTP2
/// answers: `RST_STREAM` with `PROTOCOL_ERROR`.
///
/// - Field names: at least one `tchar`, no upper case; a pseudo-header is `:` and such a name.
/// - Pseudo-headers come before every regular field, each at most once, only the known ones
///   (`:protocol` is not: the gateway does not offer extended CONNECT); their values hold no
///   byte ≤ 0x20 and no DEL.
/// - Regular values hold no NUL, CR or LF; `connection`, `keep-alive`, `proxy-connection`,
///   `transfer-encoding` and `upgrade` are forbidden; `te` may only be `trailers`.
/// - A request has `:method`, `:scheme`, `:path` (non-empty) and maybe `:authority`; a CONNECT
///   request has exactly `:method` and `:authority`. Trailers have no pseudo-headers.
/// - `content-length` (RFC 9113 § 8.1.1), as NIOHTTP2's `ContentLengthVerifier` reads it when
///   its content-length validation is on (also off on provider connections): every
///   comma-separated value, trimmed of spaces and tabs, is the same text, a non-negative
///   decimal; a `HEAD` request has none. `contentLength` is what the body must then measure
///   (`ProviderConnectionHandler` counts the DATA bytes and resets the stream as NIOHTTP2 did).
struct HTTP2HeaderBlockRules {
    enum Block { case request, trailers }

    private struct Pseudo: OptionSet {
        var rawValue: UInt8
        static let path = Pseudo(rawValue: 1 << 0)
        static let method = Pseudo(rawValue: 1 << 1)
        static let scheme = Pseudo(rawValue: 1 << 2)
        static let authority = Pseudo(rawValue: 1 << 3)
        static let status = Pseudo(rawValue: 1 << 4)
    }

    private let block: Block
    private var regularFieldsBegun = false
    private var seen: Pseudo = []
    private var isConnect = false
    private var isHead = false
    /// The first `content-length` value's text; every other one must equal it.
    private var contentLengthText: String?
    /// False once a field broke a rule.
    private(set) var isValid = true

    init(_ block: Block) { self.block = block }

    mutating func add(name: String, value: String) {
        guard isValid else { return }
        var name = name, value = value
        let fieldOK = name.withUTF8 { n in
            value.withUTF8 { v in check(name: n, value: v) }
        }
        if !fieldOK { isValid = false }
    }

    /// The body's length in bytes the request announced (valid after `finish()` returned true).
    private(set) var contentLength: Int?

    /// Whether the whole block was valid (call after the last field).
    mutating func finish() -> Bool {
        guard isValid else { return false }
        switch block {
        case .trailers:
            return seen.isEmpty
        case .request:
            let allowed: Pseudo = isConnect ? [.method, .authority] : [.path, .method, .scheme, .authority]
            let mandatory: Pseudo = isConnect ? [.method, .authority] : [.path, .method, .scheme]
            guard allowed.isSuperset(of: seen) && mandatory.isSubset(of: seen) else { return false }
            if isHead {
                contentLength = 0
            } else if let text = contentLengthText {
                guard let length = Int(text, radix: 10), length >= 0 else { return false }
                contentLength = length
            }
            return true
        }
    }

    private mutating func check(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Bool {
        if name.first == UInt8(ascii: ":") {
            let base = UnsafeBufferPointer(rebasing: name[1...])
            guard !regularFieldsBegun, Self.isToken(base) else { return false }
            for byte in value where byte <= 0x20 || byte == 0x7F { return false }
            let kind: Pseudo
            switch base.count {
            case 4 where Self.equal(base, "path"): kind = .path
            case 6 where Self.equal(base, "method"): kind = .method
            case 6 where Self.equal(base, "scheme"): kind = .scheme
            case 6 where Self.equal(base, "status"): kind = .status
            case 9 where Self.equal(base, "authority"): kind = .authority
            default: return false  // unknown, or `:protocol` (no extended CONNECT here)
            }
            guard !seen.contains(kind) else { return false }
            seen.insert(kind)
            if block == .request {
                if kind == .method {
                    isConnect = Self.equal(value, "CONNECT")
                    isHead = Self.equal(value, "HEAD")
                }
                if kind == .path, value.isEmpty { return false }
            }
            return true
        }
        guard Self.isToken(name) else { return false }
        regularFieldsBegun = true
        for byte in value where byte == 0x00 || byte == 0x0A || byte == 0x0D { return false }
        switch name.count {
        case 2 where Self.equal(name, "te"):
            return block != .request || Self.equal(value, "trailers")
        case 14 where Self.equal(name, "content-length"):
            return block != .request || addContentLength(value)
        case 7 where Self.equal(name, "upgrade"): return false
        case 10 where Self.equal(name, "connection") || Self.equal(name, "keep-alive"): return false
        case 16 where Self.equal(name, "proxy-connection"): return false
        case 17 where Self.equal(name, "transfer-encoding"): return false
        default: return true
        }
    }

    /// The values of one `content-length` field: split at commas, each trimmed of spaces and
    /// tabs (NIOHPACK's canonical form); each must be the same text as the first.
    private mutating func addContentLength(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        var start = 0
        while start < value.count {
            var end = start
            while end < value.count, value[end] != UInt8(ascii: ",") { end += 1 }
            var low = start, high = end
            while low < high, isSpace(value[low]) { low += 1 }
            while high > low, isSpace(value[high - 1]) { high -= 1 }
            let piece = UnsafeBufferPointer(rebasing: value[low..<high])
            if let first = contentLengthText {
                var first = first
                guard first.withUTF8({ $0.elementsEqual(piece) }) else { return false }
            } else {
                contentLengthText = String(decoding: piece, as: UTF8.self)
            }
            start = end + 1
        }
        return true
    }

    /// RFC 9110 `token` without upper-case letters (HTTP/2 names are lower case), non-empty.
    private static func isToken(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !bytes.isEmpty else { return false }
        for byte in bytes {
            switch byte {
            case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x30...0x39, 0x5E...0x7A, 0x7C, 0x7E: continue
            default: return false
            }
        }
        return true
    }

    private static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        guard bytes.count == literal.utf8CodeUnitCount else { return false }
        let l = literal.utf8Start
        for i in 0..<bytes.count where bytes[i] != l[i] { return false }
        return true
    }
}
