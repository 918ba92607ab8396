import Foundation
import Synchronization

/// The result of a store operation that was queued in order and completes when it is durable.
///
/// Stores apply operations in the order they are submitted, even when the caller does not
/// wait for one result before submitting the next; a backend with group commit answers a
/// whole batch with one transaction. Awaiting `value` waits for durability.
public struct StoreTicket<Value: Sendable>: Sendable {
    private let box: Box

    private enum Waiter: Sendable {
        case continuation(CheckedContinuation<Value, any Error>)
        case callback(@Sendable (Result<Value, any Error>) -> Void)

        func resume(with result: Result<Value, any Error>) {
            switch self {
            case .continuation(let continuation): continuation.resume(with: result)
            case .callback(let callback): callback(result)
            }
        }
    }

    private final class Box: Sendable {
        enum State {
            case waiting([Waiter])
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
            let waiters: [Waiter] = box.state.withLock { state in
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
                        waiters.append(.continuation(continuation))
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

    /// Calls `body` with the result once the ticket completes: right away if it has, else on
    /// the thread that completes it (a store's writer), so `body` must be quick and must not
    /// block. Saves a task and a suspension per ticket on hot paths.
    public func whenComplete(_ body: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        let done: Result<Value, any Error>? = box.state.withLock { state in
            switch state {
            case .waiting(var waiters):
                waiters.append(.callback(body))
                state = .waiting(waiters)
                return nil
            case .done(let result):
                return result
            }
        }
        if let done { body(done) }
    }
}
