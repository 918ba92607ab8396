import Foundation
import Synchronization

/// `NSSecureCoding` for the value classes: each archives its Codable value model as JSON
/// data under one key, so an archive made by one process decodes in another.
enum ArchivedValue {
    static let key = "TidingsValue"

    static func encode<Value: Encodable>(_ value: Value, with coder: NSCoder) {
        guard let data = try? JSONEncoder().encode(value) else { return }
        coder.encode(data as NSData, forKey: key)
    }

    static func decode<Value: Decodable>(_ type: Value.Type, from coder: NSCoder) -> Value? {
        guard let data = coder.decodeObject(of: NSData.self, forKey: key) else { return nil }
        return try? JSONDecoder().decode(Value.self, from: data as Data)
    }
}

/// Calls a completion handler at most once.
final class OnceFlag: Sendable {
    private let fired = Mutex(false)

    /// True the first time only.
    func claim() -> Bool {
        fired.withLock { fired in
            if fired { return false }
            fired = true
            return true
        }
    }
}
