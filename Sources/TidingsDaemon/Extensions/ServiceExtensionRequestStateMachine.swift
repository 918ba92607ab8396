import Foundation
import TidingsCore

/// One request to a service extension process, as a pure state machine: the runner feeds
/// it what happens (a reply, the deadline, the end of the grace period, garbage, the
/// process's end) and performs the action it returns.
struct ServiceExtensionRequestStateMachine {
    enum Event: Hashable {
        /// The content handler was called.
        case content(NotificationContentValue)
        /// The content handler was called with content that cannot be delivered.
        case invalidContent(String)
        /// The deadline (30 s by default) passed without a reply.
        case deadlinePassed
        /// The grace period after `serviceExtensionTimeWillExpire()` ended without a reply.
        case graceOver
        /// The process wrote something that is not a reply.
        case garbage(String)
        /// The process's channel closed: it exited or crashed.
        case closed(String)
    }

    enum Action: Hashable {
        /// Nothing to do yet.
        case wait
        /// Send `timeWillExpire` and start the grace period.
        case sendTimeWillExpire
        /// Deliver the extension's content (after its attachments are checked and stored).
        /// `note` says why it is only a best attempt; `reuseProcess` whether the process may
        /// serve the next request.
        case deliver(NotificationContentValue, note: String?, reuseProcess: Bool)
        /// Deliver the original content; the process is killed and never reused.
        case deliverOriginal(failure: String)
    }

    enum State: Hashable {
        case running
        case expiring
        case finished
    }

    private(set) var state: State = .running
    let deadline: TimeInterval
    let grace: TimeInterval

    init(deadline: TimeInterval, grace: TimeInterval) {
        self.deadline = deadline
        self.grace = grace
    }

    mutating func handle(_ event: Event) -> Action {
        switch (state, event) {
        case (.finished, _):
            return .wait
        case (.running, .content(let content)):
            state = .finished
            return .deliver(content, note: nil, reuseProcess: true)
        case (.expiring, .content(let content)):
            state = .finished
            return .deliver(content, note: "the extension did not finish within \(Self.seconds(deadline)); its best attempt from serviceExtensionTimeWillExpire() was delivered", reuseProcess: false)
        case (.running, .deadlinePassed):
            state = .expiring
            return .sendTimeWillExpire
        case (.expiring, .deadlinePassed), (.running, .graceOver):
            return .wait
        case (.expiring, .graceOver):
            state = .finished
            return .deliverOriginal(failure: "the extension did not call the content handler within \(Self.seconds(deadline)) and a grace of \(Self.seconds(grace)) after serviceExtensionTimeWillExpire(); it was killed and the original content delivered")
        case (_, .invalidContent(let reason)):
            state = .finished
            return .deliverOriginal(failure: "the extension delivered content that cannot be shown (\(reason)); the original content was delivered")
        case (_, .garbage(let what)):
            state = .finished
            return .deliverOriginal(failure: "the extension wrote garbage on its channel (\(what)); it was killed and the original content delivered")
        case (_, .closed(let how)):
            state = .finished
            return .deliverOriginal(failure: "the extension process ended before calling the content handler (\(how)); the original content was delivered")
        }
    }

    private static func seconds(_ value: TimeInterval) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
