import Foundation
import TidingsCore

/// Runs an app's notification service extension on a push before it is presented
/// (`UNNotificationServiceExtension`): the remote pipeline calls it for a push with
/// `mutable-content` 1 and an alert when the app declares a `service` extension.
///
/// It never fails: on a crash, a hang past the deadline and grace, garbage output or
/// memory over the limit, the outcome carries the original content and the failure, which
/// the runner has already logged.
public protocol ServiceExtensionRunning: Sendable {
    func modify(_ request: NotificationRequestValue, app: AppRecord, extension: AppExtensionRecord) async -> ServiceExtensionOutcome
}

public struct ServiceExtensionOutcome: Sendable, Hashable {
    /// The content to deliver: the extension's (best attempt), or the original.
    ///
    /// Attachments the extension made are already in the app's attachment store
    /// (`AttachmentStore.ingest`, the validation of `add`): deliver them as they are, do not
    /// ingest them again.
    public var content: NotificationContentValue
    /// Why the original content was kept (or only a best attempt delivered); nil on success.
    public var failure: String?
    /// Attachments of the extension's content that failed validation or lay outside its
    /// container: left out of `content` (the rest is delivered), one reason each.
    public var rejectedAttachments: [String]
    /// The extension process that ran the request, if one started.
    public var processIdentifier: Int32?

    public init(content: NotificationContentValue, failure: String? = nil, rejectedAttachments: [String] = [], processIdentifier: Int32? = nil) {
        self.content = content
        self.failure = failure
        self.rejectedAttachments = rejectedAttachments
        self.processIdentifier = processIdentifier
    }
}
