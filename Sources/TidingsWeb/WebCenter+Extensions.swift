import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import TidingsCore
import TidingsEngine

struct ExtensionOpenBody: Decodable {
    var app: String
    var identifier: String
}

struct ExtensionActionBody: Decodable {
    var session: UInt64
    var action: String
    var text: String?
}

struct ExtensionMediaBody: Decodable {
    var session: UInt64
    var play: Bool
}

struct ExtensionEventBody: Decodable {
    var session: UInt64
    /// The frame's capability token, as the frame posted it.
    var token: String
    var element: String
    var value: String
}

struct ExtensionCloseBody: Decodable {
    var session: UInt64
}

/// An extension's view as the page gets it: where the frame loads from, not the HTML.
struct ExtensionViewPayload: Codable, Sendable {
    var session: UInt64
    /// `/x/<token>/frame?v=N`, or nil when the extension failed (default content).
    var frame: String?
    var sandbox: String
    var heightRatio: Double
    var defaultContentHidden: Bool
    var title: String?
    var actions: [NotificationView.Action]
    var failure: String?
    /// The play/pause button to draw over the frame, in the view's CSS pixels; nil: none.
    var media: MediaButtonValue?
}

struct ExtensionOutcomePayload: Codable, Sendable {
    /// rendered, dismissed, forwarded or failed.
    var outcome: String
    var view: ExtensionViewPayload?
    var failure: String?
}

extension WebCenter {
    func addExtensionRoutes(to router: Router<BasicWebSocketRequestContext>) {
        router.post("/api/extension/open") { request, context in
            let body = try await self.decode(ExtensionOpenBody.self, request, context)
            guard let extensions = self.contentExtensions else { return WebResponses.text("no content extension host runs", status: .notFound) }
            guard let origin = self.origin else { return Response(status: .serviceUnavailable) }
            let frames = self.frames, root = self.hub.attachmentsRoot, app = body.app
            let view: WebExtensionView
            do {
                view = try await extensions.open(app: body.app, identifier: body.identifier, frameOrigin: origin) { session, notification in
                    let token = frames.token(for: session)
                    var paths: [String] = []
                    var urls: [String] = []
                    for attachment in notification.request.content.attachments {
                        // Only files in the app's store get a URL, as in the page.
                        guard NotificationView.attachment(attachment, app: app, root: root) != nil else { urls.append(""); paths.append(""); continue }
                        urls.append("\(origin)/x/\(token)/\(paths.count)")
                        paths.append(attachment.path)
                    }
                    frames.setAttachments(paths, session: session)
                    return urls
                }
            } catch {
                return WebResponses.text("\(error)", status: .notFound)
            }
            let payload = self.payload(view)
            if view.document == nil {
                await extensions.close(session: view.session)
                self.frames.forget(session: view.session)
            } else {
                self.followEvents(of: view.session, extensions: extensions)
            }
            return WebResponses.json(try JSONEncoder().encode(payload))
        }
        router.post("/api/extension/action") { request, context in
            let body = try await self.decode(ExtensionActionBody.self, request, context)
            guard let extensions = self.contentExtensions else { return WebResponses.text("no content extension host runs", status: .notFound) }
            guard (body.text?.utf8.count ?? 0) <= self.configuration.limits.maximumReplyText else {
                return WebResponses.text("the reply is longer than \(self.configuration.limits.maximumReplyText) bytes", status: .contentTooLarge)
            }
            let outcome: WebExtensionOutcome
            do {
                outcome = try await extensions.perform(session: body.session, action: body.action, text: body.text)
            } catch {
                return WebResponses.text("\(error)", status: .badRequest)
            }
            return WebResponses.json(try JSONEncoder().encode(self.payload(outcome)))
        }
        router.post("/api/extension/media") { request, context in
            let body = try await self.decode(ExtensionMediaBody.self, request, context)
            guard let extensions = self.contentExtensions else { return WebResponses.text("no content extension host runs", status: .notFound) }
            let outcome: WebExtensionOutcome
            do {
                outcome = try await extensions.media(session: body.session, play: body.play)
            } catch {
                return WebResponses.text("\(error)", status: .badRequest)
            }
            return WebResponses.json(try JSONEncoder().encode(self.payload(outcome)))
        }
        router.post("/api/extension/event") { request, context in
            let body = try await self.decode(ExtensionEventBody.self, request, context)
            guard let extensions = self.contentExtensions else { return WebResponses.text("no content extension host runs", status: .notFound) }
            guard self.frames.token(body.token, isFor: body.session) else {
                return WebResponses.text("the event names no frame of an open view", status: .forbidden)
            }
            let outcome: WebExtensionOutcome
            do {
                outcome = try await extensions.userEvent(session: body.session, element: body.element, value: body.value)
            } catch WebExtensionEventError.tooMany(let why) {
                return WebResponses.text(why, status: .tooManyRequests)
            } catch WebExtensionEventError.tooLarge(let why) {
                return WebResponses.text(why, status: .contentTooLarge)
            } catch {
                return WebResponses.text("\(error)", status: .badRequest)
            }
            return WebResponses.json(try JSONEncoder().encode(self.payload(outcome)))
        }
        router.post("/api/extension/close") { request, context in
            let body = try await self.decode(ExtensionCloseBody.self, request, context)
            await self.contentExtensions?.close(session: body.session)
            self.frames.forget(session: body.session)
            return WebResponses.text("ok")
        }
        // The frame's document and its attachments: capability URLs, no cookie (docs/security.md).
        router.get("/x/:token/:item") { _, context in
            let token = context.parameters.get("token") ?? "", item = context.parameters.get("item") ?? ""
            guard token.utf8.count == 64, let frame = self.frames.frame(token: token) else {
                return WebResponses.text("no such view is open", status: .notFound)
            }
            if item == "frame" {
                var headers: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"]
                headers[.contentSecurityPolicy] = frame.policy
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: frame.document)))
            }
            guard let index = Int(item), frame.attachments.indices.contains(index), !frame.attachments[index].isEmpty else {
                return WebResponses.text("no such attachment in this view", status: .notFound)
            }
            let url = URL(fileURLWithPath: frame.attachments[index])
            let app = url.deletingLastPathComponent().lastPathComponent
            guard let file = WebFiles.attachment(app: app, name: url.lastPathComponent, root: self.hub.attachmentsRoot) else {
                return WebResponses.text("the attachment is gone", status: .notFound)
            }
            return try await self.file(file, context: context)
        }
    }

    var origin: String? {
        access.map { Self.url(access: $0, host: configuration.host, secret: false).absoluteString }.map { String($0.dropLast()) }
    }

    func payload(_ view: WebExtensionView) -> ExtensionViewPayload {
        var frame: String?
        if let document = view.document {
            frames.setDocument(document, policy: view.contentSecurityPolicy + (origin.map { "; frame-ancestors \($0)" } ?? ""), session: view.session)
            frame = "/x/\(frames.token(for: view.session))/frame?v=\(UInt32.random(in: 0...UInt32.max))"
        }
        return ExtensionViewPayload(
            session: view.session, frame: frame, sandbox: view.sandbox, heightRatio: view.heightRatio,
            defaultContentHidden: view.defaultContentHidden, title: view.title,
            actions: view.actions.map { NotificationView.Action($0) }, failure: view.failure, media: view.media)
    }

    func payload(_ outcome: WebExtensionOutcome) -> ExtensionOutcomePayload {
        switch outcome {
        case .rendered(let view): return ExtensionOutcomePayload(outcome: "rendered", view: payload(view), failure: nil)
        case .dismissed: return ExtensionOutcomePayload(outcome: "dismissed", view: nil, failure: nil)
        case .forwarded: return ExtensionOutcomePayload(outcome: "forwarded", view: nil, failure: nil)
        case .failed(let why): return ExtensionOutcomePayload(outcome: "failed", view: nil, failure: why)
        }
    }

    /// Sends what the extension does on its own to the pages, until the view closes.
    func followEvents(of session: UInt64, extensions: any WebContentExtensions) {
        Task {
            for await outcome in await extensions.events(session: session) {
                hub.broadcast(.extensionEvent(session: session, payload(outcome)))
            }
            frames.forget(session: session)
        }
    }
}

extension NotificationView.Action {
    init(_ action: ActionValue) {
        self.init(identifier: action.identifier, title: action.title,
                  destructive: action.options & ActionValue.destructive != 0,
                  authenticationRequired: action.options & ActionValue.authenticationRequired != 0,
                  foreground: action.options & ActionValue.foreground != 0,
                  textInputButtonTitle: action.textInput?.buttonTitle, textInputPlaceholder: action.textInput?.placeholder)
    }
}
