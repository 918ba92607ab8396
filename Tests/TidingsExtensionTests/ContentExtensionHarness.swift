import Foundation
import Logging
import Synchronization
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsTesting
import TidingsTestSupport

extension Built {
    static var contentFixture: String { BuiltProducts.path("TestContentExtension") }
    static var presentItems: String { BuiltProducts.path("PresentItemsContentExtension") }
}

/// An engine on a test clock (`NotificationTestSystem`) with apps whose manifests declare a
/// content extension, and a `ContentExtensionHost` attached to it that runs real extension
/// processes.
struct ContentHarness {
    let system: NotificationTestSystem
    let host: ContentExtensionHost
    let log: LogLines
    var clock: TestWallClock { system.clock }
    static let bundle = "com.example.content"
    static let category = "custom"

    static func start(executable: String = Built.contentFixture,
                      configure: (inout ContentExtensionConfiguration) -> Void = { _ in }) async throws -> ContentHarness {
        let system = try await NotificationTestSystem.start()
        var configuration = ContentExtensionConfiguration(
            containerRoot: system.directory.appendingPathComponent("extensions").path,
            environment: ["SWIFT_BACKTRACE": "enable=no"])
        configure(&configuration)
        let log = LogLines()
        var logger = Logger(label: "tidings.content.tests") { _ in CollectingHandler(lines: log) }
        logger.logLevel = .info
        let host = ContentExtensionHost(configuration: configuration, clock: system.clock, logger: logger)
        await host.attach(engine: system.engine)
        let h = ContentHarness(system: system, host: host, log: log)
        try await h.install(bundle, executable: executable)
        return h
    }

    /// Installs an app whose content extension draws `category`, with that category's actions.
    @discardableResult
    func install(_ bundle: String, executable: String = Built.contentFixture, category: String = ContentHarness.category,
                 attributes: [String: PropertyListValue] = [:]) async throws -> AppRecord {
        let directory = system.directory.appendingPathComponent("apps/\(bundle)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var keys: [String: PropertyListValue] = [
            ContentExtensionDeclaration.Key.category: .array([.string(category)]),
            ContentExtensionDeclaration.Key.initialContentSizeRatio: .double(0.5),
        ]
        for (key, value) in attributes { keys[key] = value }
        let record = AppExtensionRecord(bundleIdentifier: bundle + ".content", point: .content, executable: executable, attributes: keys)
        let app = AppRecord(bundleIdentifier: bundle, displayName: bundle, executable: "/usr/bin/true", directory: directory.path,
                            extensions: [record], installedAt: system.clock.now)
        try await system.engine.install(app)
        let link = try await system.connect(bundle)
        _ = try await link.call(.requestAuthorization(AuthorizationOptionsValue(rawValue: 7)))
        let actions = ["keep", "close", "forward", "later", "hang", "crash", "set-actions", "default", "dismiss-context", "play-self", "switch", "open", "dismiss"]
            .map { ActionValue(identifier: $0, title: $0.capitalized) }
            + [ActionValue(identifier: "reply", title: "Reply", textInput: .init(buttonTitle: "Send", placeholder: "…"))]
        _ = try await link.call(.setCategories([CategoryValue(identifier: category, actions: actions)]))
        await link.disconnect()
        return app
    }

    /// Delivers a notification of the category, with PNG attachments from the app's directory.
    func deliver(_ identifier: String, bundle: String = ContentHarness.bundle, fixture: String = "render",
                 userInfo: [String: PropertyListValue] = [:], title: String = "Hello <b>", body: String = "Body & more",
                 attachments: Int = 0, thread: String = "", category: String = ContentHarness.category) async throws {
        let link = try await system.connect(bundle)
        var content = NotificationContentValue()
        content.title = title
        content.body = body
        content.categoryIdentifier = category
        content.threadIdentifier = thread
        content.userInfo = userInfo.merging(["fixture": .string(fixture)]) { $1 }
        let directory = system.directory.appendingPathComponent("apps/\(bundle)")
        for index in 0..<attachments {
            let file = directory.appendingPathComponent("\(identifier)-\(index).png")
            try Data(Self.png).write(to: file)
            content.attachments.append(AttachmentValue(identifier: "att-\(index)", path: file.path, type: "public.png"))
        }
        let reply = try await link.call(.add(NotificationRequestValue(identifier: identifier, content: content, trigger: nil)))
        if case .failure(let error) = reply { throw error }
        await link.disconnect()
        await system.settle()
    }

    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 0, count: 24)

    /// The URLs the "center" serves attachments under: fake, but per view and per attachment.
    static let urls: ContentExtensionAttachmentURLs = { session, notification in
        notification.request.content.attachments.indices.map { "http://127.0.0.1:1/ext/\(session)/\(notification.request.identifier)/\($0)" }
    }

    func open(_ identifier: String, bundle: String = ContentHarness.bundle) async throws -> ContentExtensionSession {
        try await host.open(bundleIdentifier: bundle, notificationIdentifier: identifier, attachmentURLs: Self.urls)
    }

    /// Starts an open that waits for the clock; returns once the host sleeps on its deadline.
    func startOpen(_ identifier: String) async -> Task<ContentExtensionSession?, Never> {
        let task = Task { try? await open(identifier) }
        _ = await eventually { clock.sleeperCount == 1 }
        return task
    }

    func delivered(_ bundle: String = ContentHarness.bundle) async throws -> [String] {
        try await system.engine.deliveredNotifications(bundle).map(\.request.identifier)
    }

    func held(_ bundle: String = ContentHarness.bundle) async throws -> [String] {
        try await system.engine.heldResponses(bundle).map { "\($0.notification.request.identifier):\($0.actionIdentifier)" + ($0.userText.map { ":\($0)" } ?? "") }
    }

    func pid(_ bundle: String = ContentHarness.bundle) async -> Int32? {
        await host.runningProcess(for: bundle + ".content")
    }

    func close() async {
        await host.shutdown()
        await system.shutdown()
    }
}

/// The events of a view until it closes, or until `count` arrived.
func collect(_ stream: AsyncStream<ContentExtensionEvent>, count: Int = .max) async -> [ContentExtensionEvent] {
    var events: [ContentExtensionEvent] = []
    for await event in stream {
        events.append(event)
        if events.count >= count { break }
    }
    return events
}

/// The log lines' messages and metadata.
final class LogLines: Sendable {
    private let lines = Mutex<[(message: String, metadata: Logger.Metadata)]>([])
    func append(_ message: String, _ metadata: Logger.Metadata) { lines.withLock { $0.append((message, metadata)) } }
    var all: [(message: String, metadata: Logger.Metadata)] { lines.withLock { $0 } }
    func contains(_ message: String, reason: String) -> Bool {
        all.contains { $0.message.contains(message) && "\($0.metadata["reason"] ?? "")".contains(reason) }
    }
}

struct CollectingHandler: LogHandler {
    let lines: LogLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        lines.append("\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 })
    }
}
