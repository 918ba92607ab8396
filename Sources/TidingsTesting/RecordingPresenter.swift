import Foundation
import Synchronization
import TidingsCore
import TidingsEngine

/// A presenter that remembers what it was asked to show, for tests.
public final class RecordingPresenter: Presenter {
    public enum Event: Sendable, Hashable {
        case presented(PresentedNotification)
        case withdrawn(bundleIdentifier: String, identifiers: [String])
        case badge(bundleIdentifier: String, count: Int)
    }

    private let log = Mutex<[Event]>([])

    public init() {}

    public var events: [Event] { log.withLock { $0 } }

    /// Everything presented, in order.
    public var presented: [PresentedNotification] {
        events.compactMap { if case .presented(let p) = $0 { p } else { nil } }
    }

    public var presentedIdentifiers: [String] { presented.map(\.notification.request.identifier) }

    public func reset() { log.withLock { $0.removeAll() } }

    public func present(_ notification: PresentedNotification) async {
        log.withLock { $0.append(.presented(notification)) }
    }

    public func withdraw(bundleIdentifier: String, identifiers: [String]) async {
        log.withLock { $0.append(.withdrawn(bundleIdentifier: bundleIdentifier, identifiers: identifiers)) }
    }

    public func badgeChanged(bundleIdentifier: String, count: Int) async {
        log.withLock { $0.append(.badge(bundleIdentifier: bundleIdentifier, count: count)) }
    }
}
