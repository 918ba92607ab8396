import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import TidingsCore
import TidingsEngine

/// The page's static files, from the package's resources (no CDN, no build step).
enum WebAssets {
    static let types = ["index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"]
    static let files: [String: Data] = {
        var files: [String: Data] = [:]
        for name in types.keys {
            let url = Bundle.module.resourceURL?.appendingPathComponent("Assets").appendingPathComponent(name)
            if let url, let data = try? Data(contentsOf: url) { files[name] = data }
        }
        return files
    }()
}

struct RespondBody: Decodable {
    var app: String
    var identifier: String
    var action: String?
    var text: String?
}

struct DismissBody: Decodable {
    var app: String
    /// Nil: every delivered notification of the app.
    var identifiers: [String]?
}

struct ConsentBody: Decodable {
    var id: Int
    var allow: Bool
}

struct SettingsBody: Decodable {
    var app: String
    var change: SettingsChange
}

struct OpenSettingsBody: Decodable {
    var app: String
    var identifier: String?
}

struct CenterState: Encodable {
    var apps: [AppView]
    var notifications: [NotificationView]
    var prompts: [ConsentPromptView]
}

extension WebCenter {
    func addRoutes(to router: Router<BasicWebSocketRequestContext>) {
        router.get("/") { _, _ in self.page() }
        router.get("/assets/:name") { _, context in
            let name = context.parameters.get("name") ?? ""
            guard name != "index.html", let type = WebAssets.types[name], let data = WebAssets.files[name] else { return WebResponses.text("not found", status: .notFound) }
            return Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
        router.get("/api/state") { _, _ in try await self.state() }
        router.get("/attachments/:app/:name") { _, context in
            guard let file = WebFiles.attachment(app: context.parameters.get("app") ?? "", name: context.parameters.get("name") ?? "",
                                                 root: self.hub.attachmentsRoot) else {
                return WebResponses.text("no such attachment in the app's store", status: .notFound)
            }
            return try await self.file(file, context: context)
        }
        router.get("/sounds/:app/:name") { _, context in
            guard let directory = await self.appDirectory(context.parameters.get("app") ?? ""),
                  let file = WebFiles.sound(name: context.parameters.get("name") ?? "", appDirectory: directory) else {
                return WebResponses.text("no such sound in the app's Library/Sounds", status: .notFound)
            }
            return try await self.file(file, context: context)
        }
        router.get("/icons/:app") { _, context in
            guard let directory = await self.appDirectory(context.parameters.get("app") ?? ""),
                  let file = WebFiles.icon(appDirectory: directory) else { return WebResponses.text("no icon", status: .notFound) }
            return try await self.file(file, context: context)
        }
        router.post("/api/respond") { request, context in
            let body = try await self.decode(RespondBody.self, request, context)
            guard (body.text?.utf8.count ?? 0) <= self.configuration.limits.maximumReplyText else {
                return WebResponses.text("the reply is longer than \(self.configuration.limits.maximumReplyText) bytes", status: .contentTooLarge)
            }
            let action = body.action ?? ActionIdentifier.default
            return try await self.perform(.respond(bundleIdentifier: body.app, identifier: body.identifier, actionIdentifier: action, userText: body.text))
        }
        router.post("/api/dismiss") { request, context in
            let body = try await self.decode(DismissBody.self, request, context)
            var identifiers = body.identifiers ?? []
            if body.identifiers == nil, case .notifications(let all) = await self.admin(.delivered(bundleIdentifier: body.app)) {
                identifiers = all.map(\.notification.request.identifier)
            }
            guard identifiers.count <= self.configuration.limits.maximumIdentifiersPerRequest || body.identifiers == nil else {
                return WebResponses.text("at most \(self.configuration.limits.maximumIdentifiersPerRequest) identifiers per request", status: .contentTooLarge)
            }
            var failures: [String] = []
            // Each one as the person's dismissal: the app hears of it when its category asks.
            for identifier in identifiers {
                if case .failure(let error) = await self.admin(.respond(bundleIdentifier: body.app, identifier: identifier, actionIdentifier: ActionIdentifier.dismiss, userText: nil)) {
                    failures.append(error.message)
                }
            }
            return failures.isEmpty || failures.count < identifiers.count ? WebResponses.text("ok") : WebResponses.text(failures[0], status: .badRequest)
        }
        router.post("/api/consent") { request, context in
            let body = try await self.decode(ConsentBody.self, request, context)
            return self.hub.answer(prompt: body.id, allow: body.allow) ? WebResponses.text("ok") : WebResponses.text("no such prompt is waiting", status: .notFound)
        }
        router.post("/api/settings") { request, context in
            let body = try await self.decode(SettingsBody.self, request, context)
            let reply = await self.admin(.changeSettings(body.app, body.change))
            switch reply {
            case .settings(let settings):   // the engine told the hub (settingsChanged)
                return WebResponses.json(try JSONEncoder().encode(settings))
            case .failure(let error):
                return WebResponses.text(error.message, status: .badRequest)
            default:
                return WebResponses.text("unexpected reply", status: .internalServerError)
            }
        }
        router.post("/api/open-settings") { request, context in
            let body = try await self.decode(OpenSettingsBody.self, request, context)
            return try await self.perform(.openSettings(bundleIdentifier: body.app, identifier: body.identifier))
        }
        router.ws("/api/events") { _, _ in
            self.hub.pageCount < self.hub.limits.maximumPages ? .upgrade([:]) : .dontUpgrade
        } onUpgrade: { inbound, outbound, _ in
            guard let page = self.hub.openPage() else {
                try await outbound.close(.unexpectedServerError, reason: "too many pages are open")
                return
            }
            defer { self.hub.closePage(page.id) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await message in page.messages { try await outbound.writeTextMessage(message) }
                    // The hub closed the stream: the page fell behind.
                    try await outbound.close(.goingAway, reason: "fell behind; reload")
                }
                group.addTask {
                    // The page sends nothing but control frames; anything else is read and dropped.
                    for try await _ in inbound.messages(maxSize: self.configuration.limits.maximumWebSocketFrame) {}
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    func page() -> Response {
        guard let pageHTML else { return WebResponses.text("the page's files are missing", status: .internalServerError) }
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: pageHTML))
    }

    func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: BasicWebSocketRequestContext) async throws -> T {
        let limit = configuration.limits.maximumRequestBody
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch {
            throw HTTPError(.contentTooLarge, message: "a request body is at most \(limit) bytes")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch {
            throw HTTPError(.badRequest, message: "the request body is not the JSON this endpoint takes")
        }
    }

    func perform(_ request: AdminRequest) async throws -> Response {
        switch await admin(request) {
        case .failure(let error): WebResponses.text(error.message, status: .badRequest)
        default: WebResponses.text("ok")
        }
    }

    func file(_ file: (path: String, size: Int, type: String), context: BasicWebSocketRequestContext) async throws -> Response {
        let body = try await FileIO().loadFile(path: file.path, context: context)
        return Response(status: .ok, headers: [.contentType: file.type, .contentLength: "\(file.size)", .cacheControl: "private, max-age=3600"], body: body)
    }

    func appDirectory(_ app: String) async -> String? {
        guard BundleIdentifier.isValid(app), case .apps(let apps) = await admin(.listApps) else { return nil }
        return apps.first { $0.bundleIdentifier == app }?.directory
    }

    func state() async throws -> Response {
        guard case .apps(let apps) = await admin(.listApps) else { return WebResponses.text("cannot list apps", status: .internalServerError) }
        var views: [AppView] = []
        var settingsByApp: [String: NotificationSettingsValue] = [:]
        for app in apps {
            guard case .settings(let settings) = await admin(.settings(app.bundleIdentifier)) else { continue }
            settingsByApp[app.bundleIdentifier] = settings
            // The manifest's declaration, read as the host reads it (installed manifests passed it).
            let categories = app.extensions.filter { $0.point == .content }
                .flatMap { (try? ContentExtensionDeclaration(extension: $0))?.categories ?? [] }
            views.append(AppView(app: app.bundleIdentifier, name: app.displayName, hasIcon: WebFiles.icon(appDirectory: app.directory) != nil,
                                 settings: settings, contentExtensionCategories: categories))
        }
        var notifications: [NotificationView] = []
        if case .notifications(let delivered) = await admin(.delivered(bundleIdentifier: nil)) {
            notifications = delivered.map { item in
                NotificationView(app: item.bundleIdentifier, appName: item.appName, notification: item.notification, category: item.category,
                                 presentation: nil, badge: nil, settings: settingsByApp[item.bundleIdentifier], attachmentsRoot: hub.attachmentsRoot)
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return WebResponses.json(try encoder.encode(CenterState(apps: views, notifications: notifications, prompts: hub.pendingPrompts)))
    }
}
