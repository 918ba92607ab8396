import Foundation

// The protocol between the daemon and a notification service extension process, one JSON
// document per frame (a 4-byte big-endian length, then the JSON) on the extension's
// standard input and output. See docs/service-extensions.md.

/// What the daemon sends to a service extension process.
public enum ServiceExtensionCommand: Sendable, Hashable, Codable {
    /// Modify this request: the extension's `didReceive(_:withContentHandler:)` runs on a
    /// new instance of its principal class. Files for attachments go into
    /// `stagingDirectory` (the process's `TMPDIR` while the request runs).
    case modify(id: UInt64, request: NotificationRequestValue, stagingDirectory: String)
    /// The deadline of request `id` has passed: `serviceExtensionTimeWillExpire()` runs.
    case timeWillExpire(id: UInt64)
}

/// What a service extension process sends back.
public enum ServiceExtensionReply: Sendable, Hashable, Codable {
    /// The content handler of request `id` was called with this content (its attachments
    /// are the extension's files, not yet in the attachment store).
    case content(id: UInt64, content: NotificationContentValue)
    /// The content handler of request `id` was called with content that cannot be
    /// delivered (a `userInfo` that is no property list, a negative badge).
    case invalidContent(id: UInt64, reason: String)
}

/// The environment a service extension process starts with.
public enum ServiceExtensionEnvironment {
    /// The extension's own bundle identifier (`<app>.<name>`).
    public static let extensionBundleIdentifier = "TIDINGS_EXTENSION_BUNDLE_ID"
    /// The containing app's bundle identifier.
    public static let appBundleIdentifier = "TIDINGS_APP_BUNDLE_ID"
    /// The containing app's directory (the manifest's folder); also the working directory.
    public static let appDirectory = "TIDINGS_APP_DIRECTORY"
    /// The extension's own container: files it may keep between requests and attach.
    public static let container = "TIDINGS_EXTENSION_CONTAINER"
}
