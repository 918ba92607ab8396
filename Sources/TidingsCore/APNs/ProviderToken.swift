import Crypto
import Foundation

/// A provider authentication token (an ES256 JWT), parsed but not yet verified.
///
/// Accepts what real clients send: `typ` or no `typ`, a `kid` repeated in the claims
/// (APNSwift), `iat` as any JSON number (pyapns-client, apns2 and gobiko-apns send
/// `time.time()`, a fraction; RFC 7519 §2 allows one) or a decimal string (APNSwift,
/// kalyke-apns), and the signature as 64-byte JOSE R‖S (most clients) or DER (Pushy,
/// Apple's openssl recipe).
public struct ProviderToken: Sendable, Hashable {
    public let keyID: String
    public let teamID: String
    /// Seconds since 1970: `iat` in whole seconds (rounded down), clamped to `Int64`'s range.
    public let issuedAt: Int64
    /// The `header.claims` bytes the signature covers.
    public let signingInput: [UInt8]
    public let signature: P256.Signing.ECDSASignature

    public static func == (lhs: ProviderToken, rhs: ProviderToken) -> Bool {
        lhs.signingInput == rhs.signingInput && lhs.signature.rawRepresentation == rhs.signature.rawRepresentation
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(signingInput) }

    /// The longest token accepted, in bytes (Apple's are ≈ 200; a longer one is `InvalidProviderToken`
    /// before any decoding).
    public static let maximumLength = 4096

    /// Parses `header.claims.signature` (without the `bearer ` prefix). Every failure is
    /// `InvalidProviderToken`.
    public init(jwt: some StringProtocol) throws(APNsError) {
        let bytes = Array(jwt.utf8)
        guard bytes.count <= Self.maximumLength else { throw APNsError(.invalidProviderToken) }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]),
              let claimsBytes = Base64URL.decode(parts[1]),
              let signatureBytes = Base64URL.decode(parts[2]),
              case .object(let header)? = try? JSONValue(parsing: headerBytes),
              case .object(let claims)? = try? JSONValue(parsing: claimsBytes)
        else { throw APNsError(.invalidProviderToken) }
        guard header["alg"]?.stringValue == "ES256",
              let kid = header["kid"]?.stringValue, !kid.isEmpty,
              let iss = claims["iss"]?.stringValue, !iss.isEmpty
        else { throw APNsError(.invalidProviderToken) }
        guard let iat = Self.numericDate(claims["iat"]) else { throw APNsError(.invalidProviderToken) }
        let signature: P256.Signing.ECDSASignature
        do {
            if signatureBytes.count == 64 {
                signature = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
            } else {
                signature = try P256.Signing.ECDSASignature(derRepresentation: signatureBytes)
            }
        } catch {
            throw APNsError(.invalidProviderToken)
        }
        self.keyID = kid
        self.teamID = iss
        self.issuedAt = iat
        self.signingInput = Array(bytes[..<(parts[0].count + 1 + parts[1].count)])
        self.signature = signature
    }

    /// `iat` as whole seconds: an integer as it is; any other JSON number (a fraction, an
    /// exponent) rounded down and clamped to `Int64`'s range, so that ±1e300 or −2⁶³ is a
    /// value the age check can compare, never a trap; a string of decimal digits that fits
    /// in `Int64`. Anything else (`true`, `null`, `"1.5"`, an array) is `nil`.
    static func numericDate(_ value: JSONValue?) -> Int64? {
        switch value {
        case .integer(let seconds)?:
            return seconds
        case .double(let seconds)?:
            // The parser turns an exponent beyond `Double`'s range into ±infinity; NaN cannot occur.
            guard !seconds.isNaN else { return nil }
            let whole = seconds.rounded(.down)
            if whole >= 0x1p63 { return .max }
            if whole < -0x1p63 { return .min }
            return Int64(whole)
        case .string(let text)? where !text.isEmpty && text.utf8.allSatisfy({ (0x30...0x39).contains($0) }):
            return Int64(text)
        default:
            return nil
        }
    }

    /// Whether the signature is valid for `key`.
    public func isSigned(by key: P256.Signing.PublicKey) -> Bool {
        key.isValidSignature(signature, for: signingInput)
    }

    /// Makes a token as a provider does (used by `tidings push` and the tests).
    public static func sign(keyID: String, teamID: String, issuedAt: Int64, key: P256.Signing.PrivateKey,
                            derSignature: Bool = false, issuedAtAsString: Bool = false) throws -> String {
        try sign(keyID: keyID, teamID: teamID, issuedAtJSON: issuedAtAsString ? "\"\(issuedAt)\"" : "\(issuedAt)",
                 key: key, derSignature: derSignature)
    }

    /// Makes a token whose `iat` is the JSON text `issuedAtJSON` as written (`1800000000.25`,
    /// `1.8e9`, `-9223372036854775808`): the forms real clients and attackers send.
    public static func sign(keyID: String, teamID: String, issuedAtJSON: String, key: P256.Signing.PrivateKey,
                            derSignature: Bool = false) throws -> String {
        let header = #"{"alg":"ES256","typ":"JWT","kid":""# + APNsError.escape(keyID) + #""}"#
        let claims = #"{"iss":""# + APNsError.escape(teamID) + #"","iat":"# + issuedAtJSON + "}"
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.signature(for: Array(input.utf8))
        let sigBytes = derSignature ? Array(signature.derRepresentation) : Array(signature.rawRepresentation)
        return input + "." + Base64URL.encode(sigBytes)
    }
}

/// Base64url without padding (RFC 7515 §2); padded input is accepted too.
public enum Base64URL {
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        var out = [UInt8]()
        out.reserveCapacity(text.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        var sawPadding = false
        for byte in text {
            let value: UInt32
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt32(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt32(byte - UInt8(ascii: "a") + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt32(byte - UInt8(ascii: "0") + 52)
            case UInt8(ascii: "-"), UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "_"), UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="): sawPadding = true; continue
            default: return nil
            }
            if sawPadding { return nil }
            buffer = buffer << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // A lone leftover sextet is not valid base64.
        if bits >= 6 { return nil }
        return out
    }
}
