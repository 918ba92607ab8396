import Dispatch
import Foundation
import Synchronization
import TidingsCore
@_spi(Tidings) import UserNotifications

/// The entry point of a notification content extension's executable: hands the process to
/// Tidings, which opens a view with a new instance of `principalClass` each time the person
/// expands a notification of the extension's category — the role `NSExtensionPrincipalClass`
/// (or `NSExtensionMainStoryboard`) plays in an iOS extension's Info.plist.
///
///     UNNotificationContentExtensionMain(NotificationViewController.self)   // main.swift
///
/// The daemon speaks length-prefixed JSON frames on standard input and output, taken over
/// as for service extensions (`print` goes to standard error). Every call into the
/// extension — `didReceive(_:)`, `didReceive(_:completionHandler:)`, `mediaPlay()`,
/// `mediaPause()`, the view's `eventHandler` — runs on the main thread, and the view is sent to the daemon when it
/// returns (for a response: when the completion handler is first called). The process exits
/// when the daemon closes the channel. See docs/content-extensions.md.
public func UNNotificationContentExtensionMain(_ principalClass: any (UNNotificationContentViewController & UNNotificationContentExtension).Type) -> Never {
    precondition(Thread.isMainThread, "UNNotificationContentExtensionMain must be called on the main thread")
    let channel: ServiceExtensionChannel
    do {
        channel = try ServiceExtensionChannel.takeStandardStreams()
    } catch {
        FileHandle.standardError.write(Data("UNNotificationContentExtensionMain: \(error)\n".utf8))
        exit(70)
    }
    let views = MainActor.assumeIsolated {
        ContentExtensionViews(principalClass: principalClass, channel: channel)
    }
    let reader = Thread {
        while true {
            let command: ContentExtensionCommand?
            do {
                command = try channel.readValue(ContentExtensionCommand.self)
            } catch {
                FileHandle.standardError.write(Data("content extension: unreadable command from the daemon: \(error)\n".utf8))
                exit(65)
            }
            guard let command else { exit(0) }
            DispatchQueue.main.async {
                MainActor.assumeIsolated { views.handle(command) }
            }
        }
    }
    reader.name = "tidings.content-extension.reader"
    reader.start()
    RunLoop.main.add(Timer(timeInterval: 86_400 * 365, repeats: true) { _ in }, forMode: .default)
    while true {
        RunLoop.main.run()
    }
}

/// The open views of this process: one instance of the principal class each.
@MainActor
final class ContentExtensionViews: Sendable {
    private let principalClass: any (UNNotificationContentViewController & UNNotificationContentExtension).Type
    private let channel: ServiceExtensionChannel
    private var sessions: [UInt64: ContentExtensionSession] = [:]

    init(principalClass: any (UNNotificationContentViewController & UNNotificationContentExtension).Type, channel: ServiceExtensionChannel) {
        self.principalClass = principalClass
        self.channel = channel
    }

    func handle(_ command: ContentExtensionCommand) {
        switch command {
        case .open(let id, let sessionID, let notification, let actions, let attachmentURLs):
            let controller = principalClass.init()
            let session = ContentExtensionSession(id: sessionID, controller: controller)
            controller.extensionContext = NSExtensionContext(actions: actions.map(UNNotificationAction.make), host: ContextLink(session: sessionID, views: self))
            controller.view.needsDisplay = { [weak self] in
                DispatchQueue.main.async { MainActor.assumeIsolated { self?.display(sessionID) } }
            }
            sessions[sessionID] = session
            receive(id: id, session: session, notification: notification, attachmentURLs: attachmentURLs)
        case .receive(let id, let sessionID, let notification, let attachmentURLs):
            guard let session = session(sessionID) else { return }
            receive(id: id, session: session, notification: notification, attachmentURLs: attachmentURLs)
        case .respond(let id, let sessionID, let value):
            guard let session = session(sessionID) else { return }
            let once = Mutex(false)
            let complete: @Sendable (UNNotificationContentExtensionResponseOption) -> Void = { [weak self] option in
                guard once.withLock({ called in defer { called = true }; return !called }) else { return }
                DispatchQueue.main.async {
                    MainActor.assumeIsolated { self?.responded(id: id, sessionID: sessionID, option: option) }
                }
            }
            session.extension.didReceive(UNNotificationResponse.make(value), completionHandler: complete)
        case .media(let id, let sessionID, let play):
            guard let session = session(sessionID) else { return }
            if play { session.extension.mediaPlay() } else { session.extension.mediaPause() }
            session.mediaPlaying = play
            send(.rendered(id: id, session: sessionID, view: session.view()))
        case .userEvent(let id, let sessionID, let element, let value):
            guard let session = session(sessionID) else { return }
            session.controller.view.eventHandler?(element, value)
            send(.rendered(id: id, session: sessionID, view: session.view()))
        case .close(let sessionID):
            if let session = sessions.removeValue(forKey: sessionID) {
                session.controller.view.needsDisplay = nil
                session.controller.view.eventHandler = nil
                session.controller.extensionContext = nil
            }
        }
    }

    private func session(_ id: UInt64) -> ContentExtensionSession? {
        // A command for a view this process does not have is the daemon's mistake; the
        // daemon's deadline ends the request, so nothing is answered.
        sessions[id]
    }

    private func receive(id: UInt64, session: ContentExtensionSession, notification: DeliveredNotificationValue, attachmentURLs: [String]) {
        var sources: [String: String] = [:]
        for (attachment, url) in zip(notification.request.content.attachments, attachmentURLs) {
            sources[URL(fileURLWithPath: attachment.path).standardizedFileURL.path] = url
        }
        session.controller.view.sources = sources
        session.extension.didReceive(UNNotification(value: notification))
        send(.rendered(id: id, session: session.id, view: session.view()))
    }

    private func responded(id: UInt64, sessionID: UInt64, option: UNNotificationContentExtensionResponseOption) {
        guard let session = sessions[sessionID] else { return }
        send(.responded(id: id, session: sessionID, option: option.rawValue, view: session.view()))
    }

    /// `setNeedsDisplay()` or a change of the extension context: the view goes out unless a
    /// reply sent it since.
    func display(_ sessionID: UInt64) {
        guard let session = sessions[sessionID] else { return }
        send(.event(session: sessionID, event: .render(view: session.view())))
    }

    func mediaPlaying(_ sessionID: UInt64, _ playing: Bool) {
        guard let session = sessions[sessionID] else { return }
        session.mediaPlaying = playing
        display(sessionID)
    }

    func event(_ sessionID: UInt64, _ event: ContentExtensionContextEvent) {
        guard sessions[sessionID] != nil else { return }
        send(.event(session: sessionID, event: event))
    }

    private func send(_ reply: ContentExtensionReply) {
        do {
            try channel.sendValue(reply)
        } catch {
            FileHandle.standardError.write(Data("content extension: cannot reply to the daemon: \(error)\n".utf8))
            exit(74)
        }
    }
}

/// One open view: the instance of the principal class and the play/pause state.
@MainActor
final class ContentExtensionSession {
    let id: UInt64
    let controller: UNNotificationContentViewController
    var mediaPlaying = false

    init(id: UInt64, controller: any UNNotificationContentViewController & UNNotificationContentExtension) {
        self.id = id
        self.controller = controller
    }

    var `extension`: any UNNotificationContentExtension {
        controller as! any UNNotificationContentExtension
    }

    func view() -> ContentExtensionViewValue {
        let size = controller.preferredContentSize
        let ext = self.extension
        var media: MediaButtonValue?
        if ext.mediaPlayPauseButtonType != .none {
            let frame = ext.mediaPlayPauseButtonFrame
            media = MediaButtonValue(
                type: ext.mediaPlayPauseButtonType.rawValue,
                frame: [frame.origin.x, frame.origin.y, frame.size.width, frame.size.height].map { Double($0) },
                tintColor: ext.mediaPlayPauseButtonTintColor, playing: mediaPlaying)
        }
        return ContentExtensionViewValue(
            html: controller.view.html, title: controller.title,
            preferredContentSize: size == .zero ? nil : [Double(size.width), Double(size.height)],
            actions: (controller.extensionContext?.notificationActions ?? []).map(\.value),
            media: media)
    }
}

/// The extension context's way back to its view, from any thread.
private struct ContextLink: ContentExtensionContextHost {
    let session: UInt64
    let views: ContentExtensionViews

    func contextChanged() { onMain { $0.display(session) } }
    func performDefaultAction() { onMain { $0.event(session, .defaultAction) } }
    func dismiss() { onMain { $0.event(session, .dismiss) } }
    func mediaPlaying(_ playing: Bool) { onMain { $0.mediaPlaying(session, playing) } }

    private func onMain(_ body: @escaping @MainActor @Sendable (ContentExtensionViews) -> Void) {
        let views = self.views
        DispatchQueue.main.async { MainActor.assumeIsolated { body(views) } }
    }
}
