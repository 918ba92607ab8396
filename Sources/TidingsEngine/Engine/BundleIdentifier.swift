import TidingsCore

/// What an app's bundle identifier may be: reverse DNS (`com.example.app`) — letters,
/// digits, `-` and `.`, at least two non-empty parts (so no leading or trailing `.`, no
/// `..`), at most `maximumLength` characters. It names the app's folders (the attachment
/// store's `<root>/<bundle id>`), so nothing else may pass: not `/`, not `..`.
public enum BundleIdentifier {
    /// The longest bundle identifier accepted.
    public static let maximumLength = 255

    public static func isValid(_ identifier: String) -> Bool {
        guard !identifier.isEmpty, identifier.utf8.count <= maximumLength else { return false }
        guard identifier.utf8.allSatisfy({ byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }) else { return false }
        let parts = identifier.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return parts.count >= 2 && parts.allSatisfy { !$0.isEmpty }
    }

    /// `invalidRequest` unless `identifier` is valid.
    public static func check(_ identifier: String) throws(NotificationError) {
        guard isValid(identifier) else {
            throw NotificationError(.invalidRequest, "\"\(identifier.prefix(300))\" is not a bundle identifier: reverse DNS like com.example.app (letters, digits, '-' and '.', at most \(maximumLength) characters)")
        }
    }
}
