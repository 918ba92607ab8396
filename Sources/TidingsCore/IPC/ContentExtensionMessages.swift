import Foundation

// The protocol between the daemon and a notification content extension process: the framing
// of service extensions (docs/service-extensions.md), other messages. See
// docs/content-extensions.md.

/// What the daemon sends to a content extension process. Every command but `close` is
/// answered by one reply with its `id`; the daemon sends the next only after that reply.
public enum ContentExtensionCommand: Sendable, Hashable, Codable {
    /// A view opens: a new instance of the principal class gets `didReceive(_ notification:)`.
    /// `actions` are the category's; `attachmentURLs` (one per attachment of the notification,
    /// in order) are what `view.source(for:)` returns.
    case open(id: UInt64, session: UInt64, notification: DeliveredNotificationValue, actions: [ActionValue], attachmentURLs: [String])
    /// Another notification for an open view (the same identifier replaced, or a new one of
    /// its thread): `didReceive(_ notification:)` again.
    case receive(id: UInt64, session: UInt64, notification: DeliveredNotificationValue, attachmentURLs: [String])
    /// The person picked an action: `didReceive(_:completionHandler:)`.
    case respond(id: UInt64, session: UInt64, response: ResponseValue)
    /// The play/pause button: `mediaPlay()` or `mediaPause()`.
    case media(id: UInt64, session: UInt64, play: Bool)
    /// A script in an interactive view (`UNNotificationExtensionUserInteractionEnabled`)
    /// sent an event: the view's `eventHandler` gets the element's id and the value.
    case userEvent(id: UInt64, session: UInt64, element: String, value: String)
    /// The view closed: the instance is released. No reply.
    case close(session: UInt64)
}

/// What a content extension process sends back.
public enum ContentExtensionReply: Sendable, Hashable, Codable {
    /// The view after `open`, `receive`, `media` or `userEvent`.
    case rendered(id: UInt64, session: UInt64, view: ContentExtensionViewValue)
    /// The completion of `didReceive(_:completionHandler:)` (`option` is
    /// `UNNotificationContentExtensionResponseOption`'s raw value), with the view after it.
    case responded(id: UInt64, session: UInt64, option: UInt, view: ContentExtensionViewValue)
    /// Something the extension did on its own, at any time.
    case event(session: UInt64, event: ContentExtensionContextEvent)
}

/// What an extension does on its own while its view is open.
public enum ContentExtensionContextEvent: Sendable, Hashable, Codable {
    /// `view.setNeedsDisplay()`, `extensionContext.notificationActions` set,
    /// `mediaPlayingStarted()` / `mediaPlayingPaused()`: the view to show now.
    case render(view: ContentExtensionViewValue)
    /// `extensionContext.performNotificationDefaultAction()`.
    case defaultAction
    /// `extensionContext.dismissNotificationContentExtension()`.
    case dismiss
}

/// `UNNotificationContentExtensionResponseOption`'s raw values.
public enum ContentExtensionResponseOption: UInt, Sendable, Hashable, Codable {
    case doNotDismiss = 0
    case dismiss = 1
    case dismissAndForwardAction = 2
}

/// A content extension's view as the center shows it.
public struct ContentExtensionViewValue: Sendable, Hashable, Codable {
    /// The HTML fragment the extension wrote (`view.html`): the body of the frame's document.
    public var html: String
    /// The view controller's `title`: the header when the extension overrides the default title.
    public var title: String?
    /// `preferredContentSize` as [width, height], when the extension set one.
    public var preferredContentSize: [Double]?
    /// The buttons under the view: the category's, or `extensionContext.notificationActions`.
    public var actions: [ActionValue]
    /// The play/pause button; nil for `.none`.
    public var media: MediaButtonValue?

    public init(html: String, title: String? = nil, preferredContentSize: [Double]? = nil, actions: [ActionValue] = [], media: MediaButtonValue? = nil) {
        self.html = html
        self.title = title
        self.preferredContentSize = preferredContentSize
        self.actions = actions
        self.media = media
    }
}

/// The system-drawn play/pause button over a content extension's view.
public struct MediaButtonValue: Sendable, Hashable, Codable {
    /// `UNNotificationContentExtensionMediaPlayPauseButtonType`'s raw value: 1 default, 2 overlay.
    public var type: UInt
    /// x, y, width, height in the view's CSS pixels.
    public var frame: [Double]
    /// A CSS color (`#rgb`, `#rrggbb`, `#rrggbbaa` or a color name), nil for the default.
    public var tintColor: String?
    /// Whether the media plays (after `mediaPlay()` or `mediaPlayingStarted()`).
    public var playing: Bool

    public init(type: UInt, frame: [Double], tintColor: String?, playing: Bool) {
        self.type = type
        self.frame = frame
        self.tintColor = tintColor
        self.playing = playing
    }

    /// Whether `color` is a CSS color a style attribute can hold as it is: `#` and 3, 4, 6 or
    /// 8 hex digits, or a color name of letters only (at most 32).
    public static func isValidTintColor(_ color: String) -> Bool {
        let utf8 = Array(color.utf8)
        if utf8.first == UInt8(ascii: "#") {
            let digits = utf8.dropFirst()
            return [3, 4, 6, 8].contains(digits.count) && digits.allSatisfy { isHexDigit($0) }
        }
        return (1...32).contains(utf8.count) && utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0 | 0x20) }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
    }
}

/// A content extension as its manifest declares it: the extension and the five
/// `NSExtensionAttributes` keys of Apple's Info.plist.
public struct ContentExtensionDeclaration: Sendable, Hashable, Codable {
    public var extensionIdentifier: String
    /// `UNNotificationExtensionCategory`: a string or an array of strings.
    public var categories: [String]
    /// `UNNotificationExtensionInitialContentSizeRatio`: height ÷ width, 1 when absent.
    public var initialContentSizeRatio: Double
    /// `UNNotificationExtensionDefaultContentHidden`.
    public var defaultContentHidden: Bool
    /// `UNNotificationExtensionOverridesDefaultTitle`.
    public var overridesDefaultTitle: Bool
    /// `UNNotificationExtensionUserInteractionEnabled`.
    public var userInteractionEnabled: Bool

    public enum Key {
        public static let category = "UNNotificationExtensionCategory"
        public static let initialContentSizeRatio = "UNNotificationExtensionInitialContentSizeRatio"
        public static let defaultContentHidden = "UNNotificationExtensionDefaultContentHidden"
        public static let overridesDefaultTitle = "UNNotificationExtensionOverridesDefaultTitle"
        public static let userInteractionEnabled = "UNNotificationExtensionUserInteractionEnabled"
    }

    /// The largest `UNNotificationExtensionInitialContentSizeRatio` (a view ten times as high as wide).
    public static let maximumContentSizeRatio = 10.0

    public init(extensionIdentifier: String, categories: [String], initialContentSizeRatio: Double = 1, defaultContentHidden: Bool = false, overridesDefaultTitle: Bool = false, userInteractionEnabled: Bool = false) {
        self.extensionIdentifier = extensionIdentifier
        self.categories = categories
        self.initialContentSizeRatio = initialContentSizeRatio
        self.defaultContentHidden = defaultContentHidden
        self.overridesDefaultTitle = overridesDefaultTitle
        self.userInteractionEnabled = userInteractionEnabled
    }

    /// Reads the keys from a content extension's attributes; the error names the key.
    public init(extension record: AppExtensionRecord) throws(DeclarationError) {
        let attributes = record.attributes
        let categories: [String]
        switch attributes[Key.category] {
        case .string(let category)?:
            categories = [category]
        case .array(let values)?:
            var names: [String] = []
            for value in values {
                guard case .string(let name) = value else {
                    throw DeclarationError("\(Key.category) of \(record.bundleIdentifier) must hold only strings")
                }
                names.append(name)
            }
            categories = names
        case nil:
            throw DeclarationError("content extension \(record.bundleIdentifier) needs \(Key.category) in its attributes (a category identifier or an array of them)")
        default:
            throw DeclarationError("\(Key.category) of \(record.bundleIdentifier) must be a string or an array of strings")
        }
        guard !categories.isEmpty, categories.allSatisfy({ !$0.isEmpty }) else {
            throw DeclarationError("\(Key.category) of \(record.bundleIdentifier) must name at least one category, and no empty one")
        }
        var ratio = 1.0
        switch attributes[Key.initialContentSizeRatio] {
        case nil: break
        case .double(let value)?: ratio = value
        case .integer(let value)?: ratio = Double(value)
        default: throw DeclarationError("\(Key.initialContentSizeRatio) of \(record.bundleIdentifier) must be a number")
        }
        guard ratio.isFinite, ratio > 0, ratio <= Self.maximumContentSizeRatio else {
            throw DeclarationError("\(Key.initialContentSizeRatio) of \(record.bundleIdentifier) must be above 0 and at most \(Int(Self.maximumContentSizeRatio)) (height ÷ width), not \(ratio)")
        }
        func flag(_ key: String) throws(DeclarationError) -> Bool {
            switch attributes[key] {
            case nil: return false
            case .bool(let value)?: return value
            default: throw DeclarationError("\(key) of \(record.bundleIdentifier) must be true or false")
            }
        }
        self.init(
            extensionIdentifier: record.bundleIdentifier, categories: categories, initialContentSizeRatio: ratio,
            defaultContentHidden: try flag(Key.defaultContentHidden),
            overridesDefaultTitle: try flag(Key.overridesDefaultTitle),
            userInteractionEnabled: try flag(Key.userInteractionEnabled))
    }

    /// The content extension of `app` that draws notifications of `categoryIdentifier`: the
    /// first in the manifest that declares it (nil for none, or for an empty category).
    public static func find(categoryIdentifier: String, in app: AppRecord) -> (record: AppExtensionRecord, declaration: ContentExtensionDeclaration)? {
        guard !categoryIdentifier.isEmpty else { return nil }
        for record in app.extensions where record.point == .content {
            if let declaration = try? ContentExtensionDeclaration(extension: record), declaration.categories.contains(categoryIdentifier) {
                return (record, declaration)
            }
        }
        return nil
    }

    public struct DeclarationError: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }
}
