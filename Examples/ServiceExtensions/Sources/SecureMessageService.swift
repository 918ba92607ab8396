// End-to-end encrypted alerts, as a service extension class (Examples/SecureMessages and
// Examples/SampleService run it).
//
// The provider encrypts the alert with a key it shares with the app (AES-256-GCM) and
// pushes only a placeholder alert plus the sealed box:
//
//     {"aps": {"alert": {"title": "New message", "body": "(encrypted)"}, "mutable-content": 1},
//      "e2e": "<base64 of nonce ‖ ciphertext ‖ tag>"}
//
// The sealed plaintext is JSON: {"title": "…", "body": "…"} (either may be left out). The
// gateway stores and forwards only ciphertext. The extension reads the key from `e2e.key`
// (base64 of 32 bytes) in the app's directory, opens the box and shows the real text; if
// anything fails, the placeholder is shown. Recipe: docs/service-extensions.md.
import Crypto
import Foundation
import UserNotifications

open class SecureMessageService: UNNotificationServiceExtension {
    public required init() {
        super.init()
    }

    public struct Alert: Decodable {
        public var title: String?
        public var subtitle: String?
        public var body: String?
    }

    open override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        let content = request.content.mutableCopy() as! UNMutableNotificationContent
        do {
            let alert = try Self.decrypt(content.userInfo["e2e"])
            if let title = alert.title { content.title = title }
            if let subtitle = alert.subtitle { content.subtitle = subtitle }
            if let body = alert.body { content.body = body }
            // The ciphertext is of no use to anyone who sees the delivered notification.
            content.userInfo["e2e"] = nil
        } catch {
            print("cannot decrypt the notification: \(error)")
        }
        contentHandler(content)
    }

    public enum DecryptionError: Error {
        case noSealedBox, noKey(String), badKey
    }

    public static func decrypt(_ field: Any?) throws -> Alert {
        guard let encoded = field as? String, let combined = Data(base64Encoded: encoded) else {
            throw DecryptionError.noSealedBox
        }
        let box = try AES.GCM.SealedBox(combined: combined)
        let plaintext = try AES.GCM.open(box, using: try key())
        return try JSONDecoder().decode(Alert.self, from: plaintext)
    }

    /// The key shared with the app: `e2e.key` in the app's directory (the extension's
    /// working directory), base64 of 32 random bytes.
    public static func key() throws -> SymmetricKey {
        let directory = ProcessInfo.processInfo.environment["TIDINGS_APP_DIRECTORY"] ?? FileManager.default.currentDirectoryPath
        let path = directory + "/e2e.key"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw DecryptionError.noKey(path) }
        guard let bytes = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), bytes.count == 32 else {
            throw DecryptionError.badKey
        }
        return SymmetricKey(data: bytes)
    }
}
