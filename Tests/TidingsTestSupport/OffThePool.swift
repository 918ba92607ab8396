import Foundation

/// Runs blocking `body` (a child's `waitUntilExit`, a pipe's `readDataToEndOfFile`, a
/// semaphore, a future's `wait()`) on a thread of its own and awaits its result.
///
/// Not `Task.detached`: a detached task runs on the same cooperative pool as every other
/// task of the test process (as many threads as cores: 2 here), so a blocking call in it
/// stalls every test, gateway and daemon in the process for as long as it blocks, and
/// their timers fire seconds late.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = "tidings.test.blocking"
        thread.start()
    }
}

/// `offThePool` for a body that cannot throw.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.name = "tidings.test.blocking"
        thread.start()
    }
}
