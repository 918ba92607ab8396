import Crypto
import Foundation
import TidingsCore

/// The person's key to the web center: 32 random bytes in `web-secret` (0600) in the data
/// directory, created on first start. It travels once, in the URL `tidings serve` and
/// `tidings open` print; the page then holds a session cookie and a CSRF token, both derived
/// from it (HMAC-SHA256), so neither reveals the secret and both change when it does.
public struct WebSecret: Sendable {
    /// The secret as it appears in the URL (64 lower-case hex digits).
    public let value: String
    /// The cookie's value: HMAC(secret, "session").
    public let sessionToken: String
    /// The token every state-changing request carries in `X-Tidings-CSRF`: HMAC(secret, "csrf").
    public let csrfToken: String

    public init(value: String) {
        self.value = value
        let key = SymmetricKey(data: Data(value.utf8))
        func derive(_ label: String) -> String {
            HMAC<SHA256>.authenticationCode(for: Data(label.utf8), using: key).map { String(format: "%02x", $0) }.joined()
        }
        sessionToken = derive("tidings web session")
        csrfToken = derive("tidings web csrf")
    }

    /// The file in a data directory.
    public static func path(dataDirectory: String) -> String { dataDirectory + "/web-secret" }

    /// Reads the secret, creating it (0600, exclusively) when there is none.
    public static func loadOrCreate(dataDirectory: String) throws -> WebSecret {
        if let existing = load(dataDirectory: dataDirectory) { return existing }
        let value = ExtensionFrames.newToken()   // 32 random bytes as hex, as a frame's token
        try PrivateFile.create(path(dataDirectory: dataDirectory), contents: Array((value + "\n").utf8), mode: 0o600, replacing: true)
        return WebSecret(value: value)
    }

    /// Reads the secret of a running daemon (`tidings open`), or nil.
    public static func load(dataDirectory: String) -> WebSecret? {
        guard let text = try? String(contentsOfFile: path(dataDirectory: dataDirectory), encoding: .utf8) else { return nil }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard value.utf8.count == 64, value.utf8.allSatisfy(isHexDigit) else { return nil }
        return WebSecret(value: value)
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
    }

    /// Compares in time that depends only on the lengths, not on where the strings differ.
    public static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
