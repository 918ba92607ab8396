import Foundation
import TidingsCore
import TidingsStorage

extension NotificationEngine {
    /// The delivery pipeline shared by triggers, immediate requests and pushes: decide how
    /// to present (a foreground app's delegate, else the person's settings), record it as
    /// delivered when it goes to the list, apply the badge, and hand it to the presenters.
    /// Returns how it was presented; nil when it was not delivered at all.
    @discardableResult
    func deliver(_ request: NotificationRequestValue, bundle: String, date: Date, pendingKey: Int64?, nextFire: Date?, keepPending: Bool? = nil, push: String? = nil) async -> Presentation? {
        guard let settings = try? await settings(bundle) else { return nil }
        let notification = DeliveredNotificationValue(request: request, date: date)
        let presentation = await presentation(of: notification, bundle: bundle, settings: settings)

        let keep = keepPending ?? (nextFire != nil)
        var replaced: DeliveredNotificationValue?
        var presentationID: Int64?
        // A fired request is presented once its fire is durable, and the fire records what
        // is to be shown until `markPresented`: a crash before the commit leaves it pending
        // (it fires once at the next start), a crash after it leaves the record, and the
        // next start shows it (docs/architecture.md, "Firing"). Everything that can follow
        // the presentation (a response, a removal, a listing) is queued behind the fire.
        do {
            if let pendingKey {
                let tickets = store.fireApplied(key: pendingKey, at: date, nextFire: nextFire, keepPending: keep, deliver: presentation.list, present: presentation.recordedFlags)
                guard let outcome = try await tickets.durable.value else {
                    return nil // removed while we asked the app
                }
                replaced = outcome.replacedDelivered
                presentationID = outcome.presentation
            } else if presentation.list {
                replaced = try await store.deliver(notification, for: bundle, push: push).value
            }
        } catch {
            logger.error("could not record a delivery", metadata: ["app": "\(bundle)", "request": "\(request.identifier)", "error": "\(error)"])
            return nil
        }

        let badgeStored = await show(request, bundle: bundle, notification: notification, presentation: presentation, replaced: replaced != nil)
        markPresented(presentationID)
        do {
            try await badgeStored?.value
        } catch {
            logger.error("could not record a delivery", metadata: ["app": "\(bundle)", "request": "\(request.identifier)", "error": "\(error)"])
            return nil
        }
        await delivered(request, bundle: bundle, presentation: presentation, replaced: replaced, keepPending: keep)
        if presentation.list { await listGrew(bundle, by: 1) }
        return presentation
    }

    /// `count` notifications went into the app's delivered list (shown already): once a
    /// tenth of `deliveredLimit` have since the last trim — or at the app's first since the
    /// engine started — the oldest past the limit leave the list and every presenter, and
    /// their attachment files go, as `removeDeliveredNotifications` does. A remote hand-off in
    /// progress keeps all of its pushes (`remoteInProgress`): with a hand-off larger than the
    /// limit, the list holds that many until the next trim.
    func listGrew(_ bundle: String, by count: Int) async {
        guard let limit = configuration.deliveredLimit, count > 0 else { return }
        let since = listedSinceTrim[bundle].map { $0 + count } ?? Int.max
        guard since >= max(1, limit / 10) else {
            listedSinceTrim[bundle] = since
            return
        }
        listedSinceTrim[bundle] = 0
        let removed: DeliveredTrim
        do {
            removed = try await store.trimDelivered(bundle, keeping: max(limit, remoteInProgress[bundle] ?? 0)).value
        } catch {
            logger.error("could not trim the delivered list", metadata: ["app": "\(bundle)", "error": "\(error)"])
            listedSinceTrim[bundle] = nil
            return
        }
        guard !removed.identifiers.isEmpty else { return }
        logger.debug("delivered list trimmed", metadata: ["app": "\(bundle)", "removed": "\(removed.identifiers.count)", "limit": "\(limit)"])
        for presenter in configuration.presenters { await presenter.withdraw(bundleIdentifier: bundle, identifiers: removed.identifiers) }
        await releaseAttachments(of: removed.withAttachments, bundle: bundle)
    }

    /// How a notification is presented: not at all when the app's notifications are off; as a
    /// foreground app's delegate answers (within the settings); else as the settings say.
    func presentation(of notification: DeliveredNotificationValue, bundle: String, settings: NotificationSettingsValue) async -> Presentation {
        guard settings.isAllowed else { return .none }
        guard let session = foregroundSession(bundle) else { return Presentation(settings: settings, content: notification.request.content) }
        let options = await askToPresent(notification, session: session)
        return options.map { Presentation(options: $0).limited(by: settings) } ?? .none
    }

    /// Hands a recorded delivery to the presenters (or withdraws the one it replaced when it
    /// is not shown) and applies its badge; returns the badge's store ticket.
    func show(_ request: NotificationRequestValue, bundle: String, notification: DeliveredNotificationValue, presentation: Presentation, replaced: Bool) async -> StoreTicket<Void>? {
        var badge: Int?
        var badgeStored: StoreTicket<Void>?
        if presentation.badge, let count = request.content.badge, count >= 0 {
            badge = count
            badgeStored = store.setBadge(count, for: bundle)
            for presenter in configuration.presenters { await presenter.badgeChanged(bundleIdentifier: bundle, count: count) }
        }
        if presentation.isVisible {
            // Read once here (the engine's caches) and carried: no presenter asks the engine again.
            let app = try? await app(bundle)
            let category = (try? await categories(bundle))?.first { $0.identifier == request.content.categoryIdentifier && !$0.identifier.isEmpty }
            let presented = PresentedNotification(bundleIdentifier: bundle, appName: app?.displayName ?? bundle, notification: notification, category: category,
                                                  presentation: presentation, badge: badge, settings: try? await settings(bundle), appDirectory: app?.directory)
            for presenter in configuration.presenters { await presenter.present(presented) }
        } else if replaced {
            for presenter in configuration.presenters { await presenter.withdraw(bundleIdentifier: bundle, identifiers: [request.identifier]) }
        }
        return badgeStored
    }

    /// What follows a delivery once it is durable: the files of what it replaced, or of a
    /// request that left without being kept, go.
    func delivered(_ request: NotificationRequestValue, bundle: String, presentation: Presentation, replaced: DeliveredNotificationValue?, keepPending: Bool) async {
        if let replaced {
            await releaseAttachments(of: [replaced.request], bundle: bundle)
        }
        if !presentation.list, !keepPending {
            await releaseAttachments(of: [request], bundle: bundle)
        }
        logger.debug("delivered", metadata: [
            "app": "\(bundle)", "request": "\(request.identifier)",
            "banner": "\(presentation.banner)", "list": "\(presentation.list)",
        ])
    }

    /// Delivers a request right away, without a pending entry (remote notifications).
    public func deliverNow(_ request: NotificationRequestValue, bundle: String) async {
        inFlight += 1
        await deliver(request, bundle: bundle, date: clock.now, pendingKey: nil, nextFire: nil)
        finishedDelivery()
    }

    /// The app's process that counts as in the foreground: active, with a delegate set.
    func foregroundSession(_ bundle: String) -> (id: ObjectIdentifier, session: Session)? {
        sessions.first { $0.value.bundleIdentifier == bundle && $0.value.state == .active && $0.value.hasDelegate }
            .map { ($0.key, $0.value) }
    }

    /// Asks a foreground app's delegate how to present; nil when it does not answer in time
    /// or goes away, and then the notification is not presented, as on iOS.
    func askToPresent(_ notification: DeliveredNotificationValue, session: (id: ObjectIdentifier, session: Session)) async -> PresentationOptionsValue? {
        let eventID = nextEventID
        nextEventID += 1
        let timeout = configuration.presentationTimeout
        return await withTaskGroup(of: Void.self) { group in
            group.addTask { [clock] in
                do {
                    try await clock.sleep(for: timeout)
                    await self.expireDecision(eventID)
                } catch {}
            }
            let options = await withCheckedContinuation { (continuation: CheckedContinuation<PresentationOptionsValue?, Never>) in
                presentationWaiters[eventID] = continuation
                presentationSession[eventID] = session.id
                session.session.link.send(.willPresent(eventID: eventID, notification: notification))
            }
            group.cancelAll()
            return options
        }
    }

    func expireDecision(_ eventID: UInt64) {
        presentationSession[eventID] = nil
        if let waiter = presentationWaiters.removeValue(forKey: eventID) {
            logger.notice("the app's delegate did not answer willPresent in time; not presented", metadata: ["event": "\(eventID)"])
            waiter.resume(returning: nil)
        }
    }
}
