import Foundation

/// An installed app, from its manifest (the Info.plist of Linux).
public struct AppRecord: Sendable, Hashable, Codable {
    public var bundleIdentifier: String
    public var displayName: String
    /// Absolute path of the executable that identifies the app's processes.
    public var executable: String
    /// Arguments the daemon passes when it launches the app.
    public var arguments: [String]
    /// The directory the manifest came from: the app's own files.
    public var directory: String
    /// Extensions declared by the manifest.
    public var extensions: [AppExtensionRecord]
    /// `Localizable.strings`-style tables: language → key → value.
    public var localizedStrings: [String: [String: String]]
    public var installedAt: Date

    public init(bundleIdentifier: String, displayName: String, executable: String, arguments: [String] = [], directory: String, extensions: [AppExtensionRecord] = [], localizedStrings: [String: [String: String]] = [:], installedAt: Date) {
        self.bundleIdentifier = bundleIdentifier
        self.displayName = displayName
        self.executable = executable
        self.arguments = arguments
        self.directory = directory
        self.extensions = extensions
        self.localizedStrings = localizedStrings
        self.installedAt = installedAt
    }
}

/// A service or content extension declared in an app's manifest.
public struct AppExtensionRecord: Sendable, Hashable, Codable {
    public enum Point: String, Sendable, Hashable, Codable {
        case service = "com.apple.usernotifications.service"
        case content = "com.apple.usernotifications.content-extension"
    }
    public var bundleIdentifier: String
    public var point: Point
    public var executable: String
    /// `NSExtensionAttributes` (e.g. `UNNotificationExtensionCategory`).
    public var attributes: [String: PropertyListValue]

    public init(bundleIdentifier: String, point: Point, executable: String, attributes: [String: PropertyListValue] = [:]) {
        self.bundleIdentifier = bundleIdentifier
        self.point = point
        self.executable = executable
        self.attributes = attributes
    }
}
