import Foundation
import Synchronization
import TidingsCore
import TidingsEngine
@_spi(Tidings) import UserNotifications

/// A `UNUserNotificationCenter` transport straight into an engine in the same process:
/// the engine sees an app connection (`AppLink`), the center sees the daemon. Requests are
/// handled in the order they are made, as over the socket.
public final class InProcessTransport: NotificationServiceTransport, AppLink {
    private enum Job: Sendable {
        case call(AppRequest, @Sendable (AppReply) -> Void)
        case send(AppRequest)
    }

    public let engine: NotificationEngine
    private let jobs: AsyncStream<Job>.Continuation
    private let eventStream: AsyncStream<DaemonEvent>
    private let eventSink: AsyncStream<DaemonEvent>.Continuation

    private init(engine: NotificationEngine, jobs: AsyncStream<Job>.Continuation) {
        self.engine = engine
        self.jobs = jobs
        (eventStream, eventSink) = AsyncStream.makeStream()
    }

    /// Connects an app to the engine as a process in `state` would.
    public static func connect(engine: NotificationEngine, app: AppRecord, state: AppState = .active) async -> InProcessTransport {
        let (stream, sink) = AsyncStream<Job>.makeStream()
        let transport = InProcessTransport(engine: engine, jobs: sink)
        await engine.connect(transport, app: app, state: state)
        Task { [weak transport] in
            for await job in stream {
                guard let transport else { return }
                await transport.perform(job)
            }
        }
        return transport
    }

    private func perform(_ job: Job) async {
        switch job {
        case .call(let request, let completion):
            let deferred = await engine.handle(request, from: self)
            Task { completion(await deferred.run()) }
        case .send(let request):
            let deferred = await engine.handle(request, from: self)
            Task { _ = await deferred.run() }
        }
    }

    public func call(_ request: AppRequest) async throws(NotificationError) -> AppReply {
        let reply = await withCheckedContinuation { continuation in
            jobs.yield(.call(request) { continuation.resume(returning: $0) })
        }
        return reply
    }

    public func start(_ request: AppRequest, completion: @escaping @Sendable (Result<AppReply, NotificationError>) -> Void) {
        jobs.yield(.call(request) { completion(.success($0)) })
    }

    public func send(_ request: AppRequest) {
        jobs.yield(.send(request))
    }

    public func events() -> AsyncStream<DaemonEvent> { eventStream }

    // AppLink
    public func send(_ event: DaemonEvent) {
        eventSink.yield(event)
    }

    /// The app process "exits".
    public func disconnect() async {
        jobs.finish()
        eventSink.finish()
        await engine.disconnect(self)
    }
}
