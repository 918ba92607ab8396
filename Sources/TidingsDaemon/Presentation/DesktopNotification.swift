import Foundation
import TidingsCore
import TidingsDBus
import TidingsEngine

/// The arguments of one `org.freedesktop.Notifications.Notify` call (Desktop Notifications
/// specification 1.2), built from a presented notification and what the server can do.
public struct DesktopNotification: Sendable, Hashable {
    /// The action key of a tap (the specification's default action).
    public static let defaultActionKey = "default"
    /// The action key of the inline reply field (KDE's `inline-reply` extension).
    public static let inlineReplyKey = "inline-reply"

    public var appName: String
    public var replacesID: UInt32
    public var appIcon: String
    public var summary: String
    public var body: String
    /// Key, label, key, label… as the specification lays them out.
    public var actions: [String]
    public var hints: [(String, DBusValue)]
    /// Milliseconds; -1 the server's default, 0 never.
    public var expireTimeout: Int32
    /// Action key → the category action's identifier (the tap is `ActionIdentifier.default`).
    public var actionIdentifiers: [String: String]
    /// The text-input action the inline reply answers, when the server has one.
    public var replyAction: String?
    /// Action key → a text-input action whose reply field is the web center's (a server
    /// without `inline-reply`, a running web center): invoking it opens that field.
    public var webReplyActions: [String: String]

    public static func == (a: DesktopNotification, b: DesktopNotification) -> Bool {
        a.appName == b.appName && a.replacesID == b.replacesID && a.appIcon == b.appIcon && a.summary == b.summary && a.body == b.body
            && a.actions == b.actions && a.hints.map(\.0) == b.hints.map(\.0) && a.hints.map(\.1) == b.hints.map(\.1)
            && a.expireTimeout == b.expireTimeout && a.actionIdentifiers == b.actionIdentifiers && a.replyAction == b.replyAction
            && a.webReplyActions == b.webReplyActions
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(summary)
        hasher.combine(replacesID)
    }

    /// The call's body, signature `susssasa{sv}i`.
    public var arguments: [DBusValue] {
        [.string(appName), .uint32(replacesID), .string(appIcon), .string(summary), .string(body), .strings(actions),
         .dictionary(key: .string, value: .variant, hints.map { (.string($0.0), .variant($0.1)) }), .int32(expireTimeout)]
    }

    /// - Parameters:
    ///   - capabilities: the server's `GetCapabilities`.
    ///   - alertStyle: the app's setting: `.alert` stays until the person acts (timeout 0).
    ///   - soundDirectory: the app's folder, where a named sound's file is looked for.
    ///   - webReply: a web notification center runs: a text-input action the server cannot
    ///     show as a reply field becomes an action that opens the center's.
    public init(_ presented: PresentedNotification, replacesID: UInt32, capabilities: Set<String>, alertStyle: AlertStyleValue, soundDirectory: String?,
                webReply: Bool = false) {
        let content = presented.notification.request.content
        let markup = capabilities.contains("body-markup")
        func text(_ s: String) -> String { markup ? MarkupText.escape(s) : s }
        appName = presented.appName
        self.replacesID = replacesID
        appIcon = ""
        summary = text(content.title.isEmpty ? presented.appName : content.title)
        var lines: [String] = []
        if !content.subtitle.isEmpty { lines.append(markup ? "<b>\(MarkupText.escape(content.subtitle))</b>" : content.subtitle) }
        if !content.body.isEmpty {
            lines.append(markup ? DesktopMarkup.sanitize(content.body, hyperlinks: capabilities.contains("body-hyperlinks")) : content.body)
        }
        body = capabilities.contains("body") || capabilities.isEmpty ? lines.joined(separator: "\n") : ""

        var actions: [String] = []
        var identifiers: [String: String] = [:]
        var reply: String?
        var webReplies: [String: String] = [:]
        if capabilities.contains("actions") {
            actions += [Self.defaultActionKey, "Open"]
            identifiers[Self.defaultActionKey] = ActionIdentifier.default
            for action in presented.category?.actions ?? [] {
                if action.textInput != nil {
                    if reply == nil, capabilities.contains("inline-reply") {
                        reply = action.identifier
                        actions += [Self.inlineReplyKey, action.title]
                        continue
                    }
                    let key = Self.key(for: action.identifier)
                    if webReply {
                        // The web center's reply field for it, opened in the browser.
                        webReplies[key] = action.identifier
                        actions += [key, action.title]
                    } else {
                        // No reply field anywhere: the button says where to answer.
                        actions += [key, "\(action.title) (reply with tidings notifications respond)"]
                    }
                    continue
                }
                let key = Self.key(for: action.identifier)
                identifiers[key] = action.identifier
                actions += [key, action.title]
            }
        }
        self.actions = actions
        actionIdentifiers = identifiers
        replyAction = reply
        webReplyActions = webReplies

        var hints: [(String, DBusValue)] = []
        let urgency: UInt8 = switch content.interruptionLevel {
        case .critical: 2
        case .passive: 0
        default: presented.presentation.banner ? 1 : 0
        }
        hints.append(("urgency", .byte(urgency)))
        if !content.categoryIdentifier.isEmpty { hints.append(("category", .string("x-tidings." + content.categoryIdentifier))) }
        hints.append(("desktop-entry", .string(presented.bundleIdentifier)))
        if let image = content.attachments.first(where: { AttachmentTypes.type(forUTI: $0.type)?.kind == .image }) {
            hints.append(("image-path", .string(URL(fileURLWithPath: image.path).absoluteString)))
        }
        if presented.presentation.sound, let sound = content.sound {
            if let name = sound.name, let directory = soundDirectory,
               let file = Self.soundFile(name, in: directory) {
                hints.append(("sound-file", .string(file)))
            } else {
                hints.append(("sound-name", .string(content.interruptionLevel == .critical ? "dialog-warning" : "message-new-instant")))
            }
        } else {
            hints.append(("suppress-sound", .boolean(true)))
        }
        if !presented.presentation.list { hints.append(("transient", .boolean(true))) }
        if reply != nil, let input = presented.category?.actions.first(where: { $0.identifier == reply })?.textInput {
            hints.append(("x-kde-reply-placeholder-text", .string(input.placeholder)))
            hints.append(("x-kde-reply-submit-button-text", .string(input.buttonTitle)))
        }
        self.hints = hints
        expireTimeout = alertStyle == .alert || content.interruptionLevel == .critical ? 0 : -1
    }

    /// An app's action identifier as an action key: as it is, unless it would be read as
    /// the tap or the reply field.
    static func key(for identifier: String) -> String {
        identifier == defaultActionKey || identifier == inlineReplyKey ? "tidings." + identifier : identifier
    }

    /// A named sound's file in the app's folder (`Sounds/` or the folder itself), never outside it.
    static func soundFile(_ name: String, in directory: String) -> String? {
        guard !name.contains("/"), !name.hasPrefix(".") else { return nil }
        for candidate in [directory + "/Sounds/" + name, directory + "/" + name] where FileManager.default.fileExists(atPath: candidate) {
            return candidate
        }
        return nil
    }
}

/// The body markup of the specification (`<b> <i> <u> <a href> <img>`): an app's text is
/// plain, so everything is escaped except these tags, written exactly so; with
/// `body-hyperlinks` an `<a href="…">` to http(s) passes too.
public enum DesktopMarkup {
    static let simpleTags: Set<String> = ["<b>", "</b>", "<i>", "</i>", "<u>", "</u>"]

    /// Escapes `text`, keeping the allowed tags (and, with `hyperlinks`, `<a href="http…">`
    /// whose URL holds no quote or angle bracket, and `</a>`).
    public static func sanitize(_ text: String, hyperlinks: Bool) -> String {
        var out = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "<") {
            out += MarkupText.escape(String(rest[..<open]))
            let tail = rest[open...]
            if let close = tail.firstIndex(of: ">") {
                let tag = String(tail[...close])
                if simpleTags.contains(tag) || (hyperlinks && (tag == "</a>" || isLink(tag))) {
                    out += tag
                    rest = tail[tail.index(after: close)...]
                    continue
                }
            }
            out += "&lt;"
            rest = tail.dropFirst()
        }
        out += MarkupText.escape(String(rest))
        return out
    }

    private static func isLink(_ tag: String) -> Bool {
        for prefix in ["<a href=\"https://", "<a href=\"http://"] where tag.hasPrefix(prefix) && tag.hasSuffix("\">") {
            let url = tag.dropFirst(9).dropLast(2)
            return !url.contains(where: { "\"'<>&".contains($0) || $0.isWhitespace })
        }
        return false
    }
}
