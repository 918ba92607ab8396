import Foundation
import TidingsCore
import TidingsEngine

/// What the page gets for a notification: the content as text (the page never parses it as
/// markup), attachment URLs the center serves from the app's store, and the category's
/// actions. Previews hidden by the person's setting are withheld here, not in the page.
struct NotificationView: Codable, Sendable {
    struct Attachment: Codable, Sendable {
        var identifier: String
        /// `/attachments/<bundle id>/<file>`: only files in the app's store get one.
        var url: String
        var type: String
        var kind: String
        var thumbnailHidden: Bool
        var clip: [Double]?
        var time: Double?
    }
    struct Action: Codable, Sendable {
        var identifier: String
        var title: String
        var destructive: Bool
        var authenticationRequired: Bool
        var foreground: Bool
        var textInputButtonTitle: String?
        var textInputPlaceholder: String?
    }
    struct Category: Codable, Sendable {
        var identifier: String
        var actions: [Action]
        var hiddenPreviewsBodyPlaceholder: String?
        var categorySummaryFormat: String?
        var customDismissAction: Bool
    }
    struct Sound: Codable, Sendable {
        /// `/sounds/<bundle id>/<name>` for a named sound, nil for the default one.
        var url: String?
        var critical: Bool
        var volume: Float?
    }

    var app: String
    var appName: String
    var identifier: String
    /// Milliseconds since 1970.
    var date: Double
    var title: String
    var subtitle: String
    var body: String
    /// Previews hidden: body (and title, subtitle unless the category shows them) withheld.
    var previewsHidden: Bool
    var thread: String
    /// The content's category identifier (registered or not: it picks a content extension).
    var categoryIdentifier: String
    var interruptionLevel: String
    var relevanceScore: Double
    var summaryArgument: String
    var summaryArgumentCount: Int
    var attachments: [Attachment]
    var category: Category?
    var sound: Sound?
    var banner: Bool
    var list: Bool
    var playSound: Bool
    var badge: Int?

    init(app: String, appName: String, notification: DeliveredNotificationValue, category: CategoryValue?, presentation: Presentation?, badge: Int?, settings: NotificationSettingsValue?, attachmentsRoot: String) {
        let content = notification.request.content
        self.app = app
        self.appName = appName
        identifier = notification.request.identifier
        date = (notification.date.timeIntervalSince1970 * 1000).rounded()
        let hidden = settings?.showPreviewsSetting == .never
        let options = category?.options ?? 0
        previewsHidden = hidden
        title = hidden && options & CategoryValue.hiddenPreviewsShowTitle == 0 ? "" : content.title
        subtitle = hidden && options & CategoryValue.hiddenPreviewsShowSubtitle == 0 ? "" : content.subtitle
        body = hidden ? "" : content.body
        thread = content.threadIdentifier
        categoryIdentifier = content.categoryIdentifier
        interruptionLevel = switch content.interruptionLevel {
        case .passive: "passive"
        case .timeSensitive: "timeSensitive"
        case .critical: "critical"
        default: "active"
        }
        relevanceScore = content.relevanceScore.isFinite ? content.relevanceScore : 0
        summaryArgument = hidden ? "" : content.summaryArgument
        summaryArgumentCount = content.summaryArgumentCount
        attachments = hidden ? [] : content.attachments.compactMap { Self.attachment($0, app: app, root: attachmentsRoot) }
        self.category = category.map { category in
            Category(
                identifier: category.identifier,
                actions: category.actions.map { action in
                    Action(identifier: action.identifier, title: action.title,
                           destructive: action.options & ActionValue.destructive != 0,
                           authenticationRequired: action.options & ActionValue.authenticationRequired != 0,
                           foreground: action.options & ActionValue.foreground != 0,
                           textInputButtonTitle: action.textInput?.buttonTitle,
                           textInputPlaceholder: action.textInput?.placeholder)
                },
                hiddenPreviewsBodyPlaceholder: category.hiddenPreviewsBodyPlaceholder,
                categorySummaryFormat: category.categorySummaryFormat,
                customDismissAction: category.options & CategoryValue.customDismissAction != 0)
        }
        sound = content.sound.map { sound in
            let critical = sound.kind == .defaultCritical || sound.kind == .criticalNamed
            let named = (sound.kind == .named || sound.kind == .criticalNamed || sound.kind == .ringtoneNamed) ? sound.name : nil
            return Sound(url: named.flatMap { WebFiles.isSafeName($0) ? "/sounds/\(app)/\(Self.percentEncoded($0))" : nil },
                         critical: critical || content.interruptionLevel == .critical, volume: sound.volume)
        }
        banner = presentation?.banner ?? false
        list = presentation?.list ?? true
        playSound = presentation?.sound ?? false
        self.badge = badge
    }

    static func attachment(_ attachment: AttachmentValue, app: String, root: String) -> Attachment? {
        let url = URL(fileURLWithPath: attachment.path).standardizedFileURL
        let file = url.lastPathComponent
        // Only a file directly in the app's folder of the store: anything else has no URL.
        guard url.deletingLastPathComponent().path == URL(fileURLWithPath: root).appendingPathComponent(app).standardizedFileURL.path,
              WebFiles.isSafeName(file) else { return nil }
        let kind = AttachmentTypes.type(forUTI: attachment.type)?.kind.rawValue ?? "image"
        return Attachment(identifier: attachment.identifier, url: "/attachments/\(app)/\(file)", type: attachment.type, kind: kind,
                          thumbnailHidden: attachment.options.thumbnailHidden ?? false,
                          clip: attachment.options.thumbnailClippingRect, time: attachment.options.thumbnailTime)
    }

    static func percentEncoded(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? name
    }
}

/// An app as the page's settings and center show it.
struct AppView: Codable, Sendable {
    var app: String
    var name: String
    var hasIcon: Bool
    var settings: NotificationSettingsValue
    var contentExtensionCategories: [String]
}

/// A consent prompt waiting for the person.
struct ConsentPromptView: Codable, Sendable {
    var id: Int
    var app: String
    var appName: String
    var options: [String]
}

/// One message on the page's WebSocket.
enum WebEvent: Encodable {
    case present(NotificationView)
    case withdraw(app: String, identifiers: [String])
    case badge(app: String, count: Int)
    case consent(ConsentPromptView)
    case consentAnswered(id: Int)
    case settings(app: String, settings: NotificationSettingsValue)
    case extensionEvent(session: UInt64, ExtensionOutcomePayload)

    private enum Keys: String, CodingKey { case type, notification, app, identifiers, count, prompt, id, settings, session, outcome }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        switch self {
        case .present(let view):
            try c.encode("present", forKey: .type)
            try c.encode(view, forKey: .notification)
        case .withdraw(let app, let identifiers):
            try c.encode("withdraw", forKey: .type)
            try c.encode(app, forKey: .app)
            try c.encode(identifiers, forKey: .identifiers)
        case .badge(let app, let count):
            try c.encode("badge", forKey: .type)
            try c.encode(app, forKey: .app)
            try c.encode(count, forKey: .count)
        case .consent(let prompt):
            try c.encode("consent", forKey: .type)
            try c.encode(prompt, forKey: .prompt)
        case .consentAnswered(let id):
            try c.encode("consentAnswered", forKey: .type)
            try c.encode(id, forKey: .id)
        case .extensionEvent(let session, let outcome):
            try c.encode("extension", forKey: .type)
            try c.encode(session, forKey: .session)
            try c.encode(outcome, forKey: .outcome)
        case .settings(let app, let settings):
            try c.encode("settings", forKey: .type)
            try c.encode(app, forKey: .app)
            try c.encode(settings, forKey: .settings)
        }
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
