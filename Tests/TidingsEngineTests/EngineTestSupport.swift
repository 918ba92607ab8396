import Foundation
import TidingsCore
import TidingsEngine
import TidingsTesting

/// Requests below the `UN…` API, through the same transport a center uses.
extension InProcessTransport {
    func request(_ request: AppRequest) async -> AppReply {
        (try? await call(request)) ?? .failure(NotificationError(.daemonUnavailable, "no reply"))
    }

    func add(_ identifier: String, title: String = "Title", body: String = "Body", trigger: TriggerValue?, category: String = "", badge: Int? = nil) async -> AppReply {
        var content = NotificationContentValue()
        content.title = title
        content.body = body
        content.categoryIdentifier = category
        content.badge = badge
        return await request(.add(NotificationRequestValue(identifier: identifier, content: content, trigger: trigger)))
    }

    func pendingIdentifiers() async -> [String] {
        guard case .requests(let requests) = await request(.getPending) else { return [] }
        return requests.map(\.identifier)
    }

    func deliveredIdentifiers() async -> [String] {
        guard case .notifications(let notifications) = await request(.getDelivered) else { return [] }
        return notifications.map(\.request.identifier)
    }
}

extension AppReply {
    var failureCode: NotificationError.Code? {
        if case .failure(let error) = self { error.code } else { nil }
    }

    var isSuccess: Bool {
        if case .failure = self { false } else { true }
    }
}

/// Collects the events an app connection receives and answers them like an app would.
final class ScriptedApp: Sendable {
    let transport: InProcessTransport
    let received = Recorder<DaemonEvent>()

    init(_ transport: InProcessTransport, presentationOptions: PresentationOptionsValue?, handleResponses: Bool = true) {
        self.transport = transport
        let events = transport.events()
        let received = received
        Task {
            for await event in events {
                received.append(event)
                switch event {
                case .willPresent(let id, _):
                    if let presentationOptions {
                        transport.send(.presentationDecision(eventID: id, options: presentationOptions))
                    }
                case .didReceive(let id, _):
                    if handleResponses { transport.send(.responseHandled(eventID: id)) }
                default:
                    break
                }
            }
        }
    }

    var responses: [ResponseValue] {
        received.items.compactMap { if case .didReceive(_, let response) = $0 { response } else { nil } }
    }

    var asked: [(eventID: UInt64, notification: DeliveredNotificationValue)] {
        received.items.compactMap { if case .willPresent(let id, let notification) = $0 { (id, notification) } else { nil } }
    }

    var willPresentCount: Int {
        received.items.filter { if case .willPresent = $0 { true } else { false } }.count
    }
}

import Synchronization

final class Recorder<T: Sendable>: Sendable {
    private let storage = Mutex<[T]>([])
    func append(_ item: T) { storage.withLock { $0.append(item) } }
    var items: [T] { storage.withLock { $0 } }
}
