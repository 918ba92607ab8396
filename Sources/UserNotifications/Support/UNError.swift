import Foundation
import TidingsCore

/// The error domain of every `UserNotifications` error.
public let UNErrorDomain: String = "UNErrorDomain"

/// An error of the notification system, as Apple's Swift overlay spells it: `UNError`
/// with a `Code`, bridged to `NSError` in `UNErrorDomain`.
///
/// `localizedDescription` carries the sentence that says what happened (for daemon errors,
/// the daemon's own explanation). Catch it as `catch let error as UNError` and switch on
/// `error.code`, or read `(error as NSError).code`.
public struct UNError: Error, Sendable, Hashable, CustomStringConvertible, CustomNSError, LocalizedError {
    /// Apple's `UNError.Code` raw values, plus three Tidings codes for situations where
    /// Apple raises an exception instead of returning an error.
    public enum Code: Int, Sendable, Hashable, CaseIterable {
        case notificationsNotAllowed = 1
        case attachmentInvalidURL = 100
        case attachmentUnrecognizedType = 101
        case attachmentInvalidFileSize = 102
        case attachmentNotInDataStore = 103
        case attachmentMoveIntoDataStoreFailed = 104
        case attachmentCorrupt = 105
        case notificationInvalidNoDate = 1400
        case notificationInvalidNoContent = 1401
        /// Tidings: a trigger Apple rejects with an exception — a time interval ≤ 0, or a
        /// repeating interval under 60 seconds.
        case invalidTrigger = 1402
        /// Tidings: the notification daemon cannot be reached, or this process is no
        /// installed app (Apple crashes in that case).
        case daemonUnavailable = 1403
        /// Tidings: a malformed request, e.g. a `userInfo` value that is no property list.
        case invalidRequest = 1404
        case contentProvidingObjectNotAllowed = 1500
        case contentProvidingInvalid = 1501
        case badgeInputInvalid = 1600
    }

    public let code: Code
    /// What happened, in a sentence.
    public let message: String

    public init(_ code: Code, _ message: String? = nil) {
        self.code = code
        self.message = message ?? code.defaultMessage
    }

    // Apple's overlay exposes the codes as static members of `UNError` too
    // (`UNError.notificationsNotAllowed`), for `catch UNError.attachmentCorrupt` style matching.
    public static var notificationsNotAllowed: Code { .notificationsNotAllowed }
    public static var attachmentInvalidURL: Code { .attachmentInvalidURL }
    public static var attachmentUnrecognizedType: Code { .attachmentUnrecognizedType }
    public static var attachmentInvalidFileSize: Code { .attachmentInvalidFileSize }
    public static var attachmentNotInDataStore: Code { .attachmentNotInDataStore }
    public static var attachmentMoveIntoDataStoreFailed: Code { .attachmentMoveIntoDataStoreFailed }
    public static var attachmentCorrupt: Code { .attachmentCorrupt }
    public static var notificationInvalidNoDate: Code { .notificationInvalidNoDate }
    public static var notificationInvalidNoContent: Code { .notificationInvalidNoContent }
    public static var contentProvidingObjectNotAllowed: Code { .contentProvidingObjectNotAllowed }
    public static var contentProvidingInvalid: Code { .contentProvidingInvalid }
    public static var badgeInputInvalid: Code { .badgeInputInvalid }

    // MARK: CustomNSError

    public static var errorDomain: String { UNErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: message] }

    // MARK: LocalizedError

    public var errorDescription: String? { message }

    public var description: String { "UNError(\(code), \(code.rawValue)): \(message)" }
}

extension UNError.Code {
    /// Pattern matching: `catch UNError.badgeInputInvalid { … }`.
    public static func ~= (code: UNError.Code, error: any Error) -> Bool {
        (error as? UNError)?.code == code
    }

    /// Apple's descriptions of each code.
    public var defaultMessage: String {
        switch self {
        case .notificationsNotAllowed: "Notifications are not allowed for this application."
        case .attachmentInvalidURL: "The attachment's URL is invalid."
        case .attachmentUnrecognizedType: "The attachment's file type is not recognized."
        case .attachmentInvalidFileSize: "The attachment's file size exceeds the limit for its type."
        case .attachmentNotInDataStore: "The attachment is not in the notification data store."
        case .attachmentMoveIntoDataStoreFailed: "The attachment could not be moved into the notification data store."
        case .attachmentCorrupt: "The attachment file is corrupt."
        case .notificationInvalidNoDate: "The notification doesn't have an associated date, but should."
        case .notificationInvalidNoContent: "The notification has no user-facing content, but should."
        case .invalidTrigger: "The notification trigger is invalid."
        case .daemonUnavailable: "The notification daemon is not available."
        case .invalidRequest: "The request is invalid."
        case .contentProvidingObjectNotAllowed: "The content-providing object is not allowed."
        case .contentProvidingInvalid: "The content-providing object is invalid."
        case .badgeInputInvalid: "The badge count must be zero or greater."
        }
    }
}

extension UNError {
    /// Maps an engine/daemon error. Codes the app does not know become `invalidRequest`
    /// with the code in the message.
    init(_ error: NotificationError) {
        if let code = Code(rawValue: error.code.rawValue) {
            self.init(code, error.message)
        } else {
            self.init(.invalidRequest, "\(error.message) (UNErrorDomain \(error.code.rawValue))")
        }
    }

    /// The engine's form of this error.
    var notificationError: NotificationError {
        NotificationError(NotificationError.Code(rawValue: code.rawValue), message)
    }
}
