import Foundation
import TidingsCore

/// The name of a sound file: looked up in the app's `Library/Sounds`, then its bundle.
public struct UNNotificationSoundName: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
}

/// The sound played when a notification is presented. Immutable.
public final class UNNotificationSound: NSObject, NSCopying, NSSecureCoding, Sendable {
    let value: SoundValue

    init(value: SoundValue) {
        self.value = value
    }

    /// The default notification sound.
    public class var `default`: UNNotificationSound { UNNotificationSound(value: .default) }

    /// A sound file of the app (`.aiff`, `.wav` or `.caf`, shorter than 30 seconds; a
    /// missing or unplayable file plays the default sound, as on iOS).
    public convenience init(named name: UNNotificationSoundName) {
        self.init(value: SoundValue(kind: .named, name: name.rawValue))
    }

    /// The default critical-alert sound (needs the `.criticalAlert` authorization).
    public class var defaultCritical: UNNotificationSound { UNNotificationSound(value: SoundValue(kind: .defaultCritical)) }

    /// The default critical-alert sound at `volume` (0.0–1.0; clamped).
    public class func defaultCriticalSound(withAudioVolume volume: Float) -> UNNotificationSound {
        UNNotificationSound(value: SoundValue(kind: .defaultCritical, volume: clamp(volume)))
    }

    /// A critical-alert sound from a sound file.
    public class func criticalSoundNamed(_ name: UNNotificationSoundName) -> UNNotificationSound {
        UNNotificationSound(value: SoundValue(kind: .criticalNamed, name: name.rawValue))
    }

    /// A critical-alert sound from a sound file at `volume` (0.0–1.0; clamped).
    public class func criticalSoundNamed(_ name: UNNotificationSoundName, withAudioVolume volume: Float) -> UNNotificationSound {
        UNNotificationSound(value: SoundValue(kind: .criticalNamed, name: name.rawValue, volume: clamp(volume)))
    }

    /// The default ringtone (call-like notifications).
    public class var defaultRingtone: UNNotificationSound { UNNotificationSound(value: SoundValue(kind: .defaultRingtone)) }

    /// A ringtone from a sound file.
    public class func ringtoneSoundNamed(_ name: UNNotificationSoundName) -> UNNotificationSound {
        UNNotificationSound(value: SoundValue(kind: .ringtoneNamed, name: name.rawValue))
    }

    /// Swift 3's `UNNotificationSound.default()`: calling a sound returns it, so the old
    /// spelling compiles (with a deprecation warning) and means `.default`.
    @available(*, deprecated, message: "Swift 3 spelling: use UNNotificationSound.default without parentheses")
    public func callAsFunction() -> UNNotificationSound { self }

    private static func clamp(_ volume: Float) -> Float {
        volume.isNaN ? 1 : min(max(volume, 0), 1)
    }

    // MARK: NSObject

    public override func isEqual(_ object: Any?) -> Bool {
        (object as? UNNotificationSound)?.value == value
    }

    public override var hash: Int { value.hashValue }

    public override var description: String {
        var parts = ["kind: \(value.kind.rawValue)"]
        if let name = value.name { parts.append("name: \(name)") }
        if let volume = value.volume { parts.append("volume: \(volume)") }
        return "<UNNotificationSound: \(parts.joined(separator: ", "))>"
    }

    public func copy(with zone: NSZone? = nil) -> Any { self }

    public static var supportsSecureCoding: Bool { true }

    public func encode(with coder: NSCoder) { ArchivedValue.encode(value, with: coder) }

    public init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(SoundValue.self, from: coder) else { return nil }
        self.value = value
    }
}
