import Foundation
import TidingsCore

/// Runs an app's notification service extension on a push before it is presented
/// (`UNNotificationServiceExtension`): the remote pipeline calls it for a push with
/// `mutable-content` 1 and an alert when the app declares a `service` extension.
///
/// It never fails: on a crash, a hang past the deadline and grace, garbage output or
/// memory over the limit, the outcome carries the original content and the failure.
public protocol ServiceExtensionRunning: Sendable {
    func modify(_ request: NotificationRequestValue, app: AppRecord, extension: AppExtensionRecord) async -> ServiceExtensionOutcome
}

public struct ServiceExtensionOutcome: Sendable, Hashable {
    /// The content to deliver: the extension's (best attempt), or the original.
    public var content: NotificationContentValue
    /// Why the original content was kept (or only a best attempt delivered), for the log; nil on success.
    public var failure: String?

    public init(content: NotificationContentValue, failure: String? = nil) {
        self.content = content
        self.failure = failure
    }
}
