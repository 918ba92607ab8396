import Foundation
import TidingsCore
import TidingsStorage

extension NotificationEngine {
    /// The person acted on a delivered notification: tapped it (`ActionIdentifier.default`),
    /// picked an action of its category (with `userText` for a text-input action), or
    /// dismissed it (`ActionIdentifier.dismiss`, reported only when the category asks for
    /// it with `customDismissAction`). The notification leaves the list; the response is
    /// kept until the app's delegate has handled it, launching the app if it is not running.
    /// `extensionActions`: actions a content extension showed in place of the category's
    /// (`extensionContext.notificationActions`), which a response may name too.
    public func respond(bundle: String, identifier: String, actionIdentifier: String, userText: String? = nil, extensionActions: [ActionValue] = [],
                        activationToken: String? = nil) async throws {
        guard let notification = try await store.deliveredNotification(identifier, for: bundle).value else {
            throw NotificationError(.invalidRequest, "\(bundle) has no delivered notification \"\(identifier)\"")
        }
        let category = try await categories(bundle).first {
            !$0.identifier.isEmpty && $0.identifier == notification.request.content.categoryIdentifier
        }
        var action: ActionValue?
        if actionIdentifier != ActionIdentifier.default, actionIdentifier != ActionIdentifier.dismiss {
            guard let found = category?.actions.first(where: { $0.identifier == actionIdentifier })
                    ?? extensionActions.first(where: { $0.identifier == actionIdentifier }) else {
                let known = category?.actions.map(\.identifier).joined(separator: ", ") ?? ""
                throw NotificationError(.invalidRequest,
                    "notification \"\(identifier)\" has no action \"\(actionIdentifier)\"" + (known.isEmpty ? " (its category has no actions)" : "; its actions: \(known)"))
            }
            action = found
        }
        var text = userText
        if text != nil, action?.textInput == nil {
            throw NotificationError(.invalidRequest, "action \"\(actionIdentifier)\" takes no text reply")
        }
        if action?.textInput != nil, text == nil { text = "" }

        // A remote notification's push is read before it leaves the list, and reported answered after.
        var answered: (apnsID: String, sequence: Int64)?
        if case .push? = notification.request.trigger { answered = await remotePush(ofDelivered: identifier, bundle: bundle) }
        let removed = try await store.removeDelivered([identifier], for: bundle).value
        for presenter in configuration.presenters { await presenter.withdraw(bundleIdentifier: bundle, identifiers: [identifier]) }
        await releaseAttachments(of: removed.map(\.request), bundle: bundle)
        if let answered { await remoteAnswered(answered) }

        if actionIdentifier == ActionIdentifier.dismiss, (category?.options ?? 0) & CategoryValue.customDismissAction == 0 {
            return
        }
        let response = ResponseValue(notification: notification, actionIdentifier: actionIdentifier, userText: text)
        _ = try await store.holdResponse(response, for: bundle).value
        let foreground = actionIdentifier == ActionIdentifier.default || (action.map { $0.options & ActionValue.foreground != 0 } ?? false)
        await routeHeldResponses(bundle, launchState: foreground ? .active : .background, activationToken: activationToken)
    }

    /// The person asked for the app's own notification settings screen.
    public func openSettings(bundle: String, notificationIdentifier: String?) async throws {
        var notification: DeliveredNotificationValue?
        if let notificationIdentifier {
            notification = try await store.deliveredNotification(notificationIdentifier, for: bundle).value
        }
        for session in sessions.values where session.bundleIdentifier == bundle && session.hasDelegate {
            let eventID = nextEventID
            nextEventID += 1
            session.link.send(.openSettings(eventID: eventID, notification: notification))
        }
    }

    func routeHeldResponses(_ bundle: String, launchState: AppState, activationToken: String? = nil) async {
        if sessions.values.contains(where: { $0.bundleIdentifier == bundle && $0.hasDelegate }) {
            await dispatchHeldResponses(bundle)
        } else if !sessions.values.contains(where: { $0.bundleIdentifier == bundle }) {
            await launch(bundle, state: launchState, reason: .response, activationToken: activationToken)
        }
        // A running process without a delegate gets its responses when it sets one.
    }

    /// Sends the app's unhandled responses to a process with a delegate. Runs once per app at
    /// a time; a call made meanwhile makes the running one list again.
    func dispatchHeldResponses(_ bundle: String) async {
        guard dispatchingResponses.insert(bundle).inserted else {
            redispatchResponses.insert(bundle)
            return
        }
        defer { dispatchingResponses.remove(bundle) }
        repeat {
            redispatchResponses.remove(bundle)
            guard let held = try? await store.heldResponses(bundle).value else { return }
            // A handled response missing from a listing is released for good.
            let listed = Set(held.map(\.id))
            let handled = handledResponses[bundle, default: []].intersection(listed)
            handledResponses[bundle] = handled.isEmpty ? nil : handled
            let candidates = sessions.filter { $0.value.bundleIdentifier == bundle && $0.value.hasDelegate }
            guard let target = candidates.first(where: { $0.value.state == .active }) ?? candidates.first else { return }
            for item in held where !dispatchedResponses.contains(item.id) && !handled.contains(item.id) {
                let eventID = nextEventID
                nextEventID += 1
                dispatchedResponses.insert(item.id)
                responseEvents[eventID] = (target.key, item.id)
                target.value.link.send(.didReceive(eventID: eventID, response: item.response))
            }
        } while redispatchResponses.contains(bundle)
    }

    func launch(_ bundle: String, state: AppState, reason: LaunchReason, activationToken: String? = nil) async {
        guard !launching.contains(bundle), let app = try? await app(bundle) else { return }
        launching.insert(bundle)
        do {
            try await configuration.launcher.launch(app, state: state, reason: reason, activationToken: activationToken)
            logger.info("launched app", metadata: ["app": "\(bundle)", "reason": "\(reason.rawValue)"])
        } catch {
            launching.remove(bundle)
            logger.error("could not launch app", metadata: ["app": "\(bundle)", "error": "\(error)"])
        }
    }

    /// Responses the app has not handled yet.
    public func heldResponses(_ bundle: String) async throws -> [ResponseValue] {
        try await store.heldResponses(bundle).value.map(\.response)
    }

    /// Every app's delivered notifications, for the person's list.
    public func deliveredNotifications(_ bundle: String) async throws -> [DeliveredNotificationValue] {
        try await store.delivered(bundle).value
    }

    public func pendingRequests(_ bundle: String) async throws -> [NotificationRequestValue] {
        try await store.pending(bundle).value
    }
}
