import Foundation

/// An error of the notification system, carrying a `UNError` code and a sentence that
/// says what happened. The engine produces these; `UserNotifications` surfaces them as
/// `UNError`, the CLI as a message with a non-zero exit.
public struct NotificationError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, Codable {
        public var rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        public static let notificationsNotAllowed = Code(rawValue: 1)
        public static let attachmentInvalidURL = Code(rawValue: 100)
        public static let attachmentUnrecognizedType = Code(rawValue: 101)
        public static let attachmentInvalidFileSize = Code(rawValue: 102)
        public static let attachmentNotInDataStore = Code(rawValue: 103)
        public static let attachmentMoveIntoDataStoreFailed = Code(rawValue: 104)
        public static let attachmentCorrupt = Code(rawValue: 105)
        public static let notificationInvalidNoDate = Code(rawValue: 1400)
        public static let notificationInvalidNoContent = Code(rawValue: 1401)
        public static let contentProvidingObjectNotAllowed = Code(rawValue: 1500)
        public static let contentProvidingInvalid = Code(rawValue: 1501)
        public static let badgeInputInvalid = Code(rawValue: 1600)
        /// Tidings-specific: a trigger that Apple would reject with an exception
        /// (time interval ≤ 0, repeating under 60 s). Reported in `UNErrorDomain`.
        public static let invalidTrigger = Code(rawValue: 1402)
        /// Tidings-specific: the daemon cannot be reached or the process is no app.
        public static let daemonUnavailable = Code(rawValue: 1403)
        /// Tidings-specific: malformed request (unknown identifiers are not errors).
        public static let invalidRequest = Code(rawValue: 1404)
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "UNErrorDomain \(code.rawValue): \(message)" }
}
