import Foundation

/// A device token: the hexadecimal bytes in `/3/device/<token>`.
///
/// Apple says not to assume a size, so any even-length hexadecimal string from 2 to
/// `maximumHexLength` characters is well formed; it is kept in lower case.
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
    /// Lower-case hexadecimal.
    public let hex: String

    public static let maximumHexLength = 512

    /// Parses a token from the path component. Empty → `MissingDeviceToken`; not hex, odd
    /// length or too long → `BadDeviceToken`.
    public init(hex string: some StringProtocol) throws(APNsError) {
        let utf8 = string.utf8
        if let parsed = utf8.withContiguousStorageIfAvailable({ bytes in Result { () throws(APNsError) in try DeviceToken(hexBytes: bytes) } }) {
            self = try parsed.get()
        } else {
            self = try Array(utf8).withUnsafeBufferPointer { bytes throws(APNsError) in try DeviceToken(hexBytes: bytes) }
        }
    }

    /// The same rules over the UTF-8 bytes of the path component: one pass, one allocation
    /// (the lower-case string).
    public init(hexBytes bytes: UnsafeBufferPointer<UInt8>) throws(APNsError) {
        if bytes.isEmpty { throw APNsError(.missingDeviceToken) }
        guard bytes.count % 2 == 0, bytes.count <= DeviceToken.maximumHexLength else { throw APNsError(.badDeviceToken) }
        var valid = true
        let hex = String(unsafeUninitializedCapacity: bytes.count) { out in
            for (i, byte) in bytes.enumerated() {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): out[i] = byte
                case UInt8(ascii: "A")...UInt8(ascii: "F"): out[i] = byte + 32
                default: valid = false; return 0
                }
            }
            return bytes.count
        }
        guard valid else { throw APNsError(.badDeviceToken) }
        self.hex = hex
    }

    /// A token from raw bytes.
    public init(bytes: some Sequence<UInt8>) {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        self.hex = String(decoding: out, as: UTF8.self)
    }

    /// A new random token of `byteCount` bytes (32 like a physical device's), from the system's
    /// cryptographically secure generator.
    public static func random(byteCount: Int = 32) -> DeviceToken {
        var generator = SystemRandomNumberGenerator()
        return DeviceToken(bytes: (0..<byteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    public var bytes: [UInt8] {
        var out = [UInt8]()
        var high: UInt8?
        for byte in hex.utf8 {
            let value = byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : byte - UInt8(ascii: "a") + 10
            if let h = high { out.append(h << 4 | value); high = nil } else { high = value }
        }
        return out
    }

    /// Logs show only the first 8 hex digits.
    public var redacted: String { String(hex.prefix(8)) + "…" }

    public var description: String { redacted }
}

/// The APNs environment a token, a key or a connection belongs to.
public struct APNsEnvironment: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `api.sandbox.push.apple.com`.
    public static let development = APNsEnvironment(rawValue: "development")
    /// `api.push.apple.com`.
    public static let production = APNsEnvironment(rawValue: "production")
    public var description: String { rawValue }

    public init?(name: String) {
        switch name.lowercased() {
        case "development", "sandbox", "dev": self = .development
        case "production", "prod": self = .production
        default: return nil
        }
    }
}
