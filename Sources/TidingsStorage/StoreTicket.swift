import Foundation
import Synchronization

/// The result of a store operation that was queued in order and completes when it is durable.
///
/// Stores apply operations in the order they are submitted, even when the caller does not
/// wait for one result before submitting the next; a backend with group commit answers a
/// whole batch with one transaction. Awaiting `value` waits for durability.
public struct StoreTicket<Value: Sendable>: Sendable {
    private let box: Box

    private final class Box: Sendable {
        enum State {
            case waiting([CheckedContinuation<Value, any Error>])
            case done(Result<Value, any Error>)
        }
        let state: Mutex<State>
        init(_ state: State) { self.state = Mutex(state) }
    }

    /// A ticket that is already complete.
    public static func completed(_ result: Result<Value, any Error>) -> StoreTicket {
        StoreTicket(box: Box(.done(result)))
    }

    public static func value(_ value: Value) -> StoreTicket { .completed(.success(value)) }

    /// A ticket and the function that completes it (once; later calls are ignored).
    public static func make() -> (StoreTicket, @Sendable (Result<Value, any Error>) -> Void) {
        let box = Box(.waiting([]))
        let complete: @Sendable (Result<Value, any Error>) -> Void = { result in
            let waiters: [CheckedContinuation<Value, any Error>] = box.state.withLock { state in
                guard case .waiting(let waiters) = state else { return [] }
                state = .done(result)
                return waiters
            }
            for waiter in waiters { waiter.resume(with: result) }
        }
        return (StoreTicket(box: box), complete)
    }

    private init(box: Box) { self.box = box }

    public var value: Value {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let done: Result<Value, any Error>? = box.state.withLock { state in
                    switch state {
                    case .waiting(var waiters):
                        waiters.append(continuation)
                        state = .waiting(waiters)
                        return nil
                    case .done(let result):
                        return result
                    }
                }
                if let done { continuation.resume(with: done) }
            }
        }
    }
}
