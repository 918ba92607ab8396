import Foundation
import TidingsCore
import TidingsStorage

extension NotificationEngine {
    /// The person's requests (the `tidings` CLI, the web UI).
    public func handleAdmin(_ request: AdminRequest) async -> AdminReply {
        do {
            switch request {
            case .installApp(let app):
                try await install(app)
                return .ok
            case .removeApp(let bundle):
                guard try await self.app(bundle) != nil else { throw unknownApp(bundle) }
                try await uninstall(bundle)
                return .ok
            case .listApps:
                return .apps(try await installedApps())
            case .settings(let bundle):
                guard try await self.app(bundle) != nil else { throw unknownApp(bundle) }
                return .settings(try await settings(bundle))
            case .changeSettings(let bundle, let change):
                guard try await self.app(bundle) != nil else { throw unknownApp(bundle) }
                return .settings(try await updateSettings(bundle) { change.apply(to: &$0) })
            case .delivered(let bundle):
                var result: [AppNotification] = []
                for app in try await apps(matching: bundle) {
                    let categories = try await self.categories(app.bundleIdentifier)
                    for notification in try await deliveredNotifications(app.bundleIdentifier) {
                        let category = categories.first { !$0.identifier.isEmpty && $0.identifier == notification.request.content.categoryIdentifier }
                        result.append(AppNotification(bundleIdentifier: app.bundleIdentifier, appName: app.displayName, notification: notification, category: category))
                    }
                }
                return .notifications(result)
            case .pending(let bundle):
                var result: [AppPendingRequest] = []
                for app in try await apps(matching: bundle) {
                    result += try await pendingRequests(app.bundleIdentifier).map { AppPendingRequest(bundleIdentifier: app.bundleIdentifier, request: $0) }
                }
                return .requests(result)
            case .respond(let bundle, let identifier, let action, let text):
                let owner = try await owner(of: identifier, in: bundle)
                try await respond(bundle: owner, identifier: identifier, actionIdentifier: action, userText: text)
                return .ok
            case .openSettings(let bundle, let identifier):
                try await openSettings(bundle: bundle, notificationIdentifier: identifier)
                return .ok
            case .location(let latitude, let longitude):
                guard (-90...90).contains(latitude), (-180...180).contains(longitude) else {
                    throw NotificationError(.invalidRequest, "latitude must be within ±90 and longitude within ±180")
                }
                await locationChanged(latitude: latitude, longitude: longitude)
                return .ok
            }
        } catch let error as NotificationError {
            return .failure(error)
        } catch {
            return .failure(NotificationError(.invalidRequest, "\(error)"))
        }
    }

    private func unknownApp(_ bundle: String) -> NotificationError {
        NotificationError(.invalidRequest, "no app \"\(bundle)\" is installed (see `tidings apps list`)")
    }

    private func apps(matching bundle: String?) async throws -> [AppRecord] {
        if let bundle {
            guard let app = try await app(bundle) else { throw unknownApp(bundle) }
            return [app]
        }
        return try await installedApps()
    }

    /// The app that delivered `identifier`: the given one, or the only one that has it.
    private func owner(of identifier: String, in bundle: String?) async throws -> String {
        if let bundle { return bundle }
        var owners: [String] = []
        for app in try await installedApps() where try await store.deliveredNotification(identifier, for: app.bundleIdentifier).value != nil {
            owners.append(app.bundleIdentifier)
        }
        switch owners.count {
        case 0: throw NotificationError(.invalidRequest, "no delivered notification \"\(identifier)\" (see `tidings notifications list`)")
        case 1: return owners[0]
        default: throw NotificationError(.invalidRequest, "several apps have a notification \"\(identifier)\" (\(owners.joined(separator: ", "))): name one with --app")
        }
    }
}
