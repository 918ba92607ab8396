import Foundation
import TidingsCore

/// An image for an action button: a template image of the app or a system symbol. Immutable.
public final class UNNotificationActionIcon: NSObject, NSCopying, NSSecureCoding, Sendable {
    let value: ActionIconValue

    init(value: ActionIconValue) {
        self.value = value
    }

    /// An image from the app's resources, drawn as a template.
    public convenience init(templateImageName: String) {
        self.init(value: ActionIconValue(kind: .template, name: templateImageName))
    }

    /// A system symbol by name (SF Symbols names on Apple platforms; the presenter maps the
    /// names it knows).
    public convenience init(systemImageName: String) {
        self.init(value: ActionIconValue(kind: .system, name: systemImageName))
    }

    public override func isEqual(_ object: Any?) -> Bool { (object as? UNNotificationActionIcon)?.value == value }
    public override var hash: Int { value.hashValue }
    public override var description: String { "<UNNotificationActionIcon: \(value.kind.rawValue): \(value.name)>" }
    public func copy(with zone: NSZone? = nil) -> Any { self }
    public static var supportsSecureCoding: Bool { true }
    public func encode(with coder: NSCoder) { ArchivedValue.encode(value, with: coder) }
    public init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(ActionIconValue.self, from: coder) else { return nil }
        self.value = value
    }
}

/// A button shown with notifications of a category. `identifier` comes back as the
/// response's `actionIdentifier`.
open class UNNotificationAction: NSObject, NSCopying, NSSecureCoding {
    public let identifier: String
    public let title: String
    public let options: UNNotificationActionOptions
    public let icon: UNNotificationActionIcon?

    public convenience init(identifier: String, title: String, options: UNNotificationActionOptions = []) {
        self.init(identifier: identifier, title: title, options: options, icon: nil)
    }

    public init(identifier: String, title: String, options: UNNotificationActionOptions = [], icon: UNNotificationActionIcon?) {
        self.identifier = identifier
        self.title = title
        self.options = options
        self.icon = icon
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any { self }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? UNNotificationAction, Swift.type(of: other) == Swift.type(of: self) else { return false }
        return other.value == value
    }

    open override var hash: Int { identifier.hashValue }

    open override var description: String {
        "<\(Swift.type(of: self)): identifier: \(identifier), title: \(title), options: \(Self.describe(options))>"
    }

    static func describe(_ options: UNNotificationActionOptions) -> String {
        var names: [String] = []
        if options.contains(.authenticationRequired) { names.append("authenticationRequired") }
        if options.contains(.destructive) { names.append("destructive") }
        if options.contains(.foreground) { names.append("foreground") }
        return "[" + names.joined(separator: ", ") + "]"
    }

    open class var supportsSecureCoding: Bool { true }

    open func encode(with coder: NSCoder) { ArchivedValue.encode(value, with: coder) }

    public required init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(ActionValue.self, from: coder) else { return nil }
        identifier = value.identifier
        title = value.title
        options = UNNotificationActionOptions(rawValue: value.options)
        icon = value.icon.map(UNNotificationActionIcon.init(value:))
        super.init()
    }
}

/// An action that asks the person for text; the answer arrives as a
/// `UNTextInputNotificationResponse` with `userText`.
open class UNTextInputNotificationAction: UNNotificationAction {
    public let textInputButtonTitle: String
    public let textInputPlaceholder: String

    public convenience init(identifier: String, title: String, options: UNNotificationActionOptions = [], textInputButtonTitle: String, textInputPlaceholder: String) {
        self.init(identifier: identifier, title: title, options: options, icon: nil, textInputButtonTitle: textInputButtonTitle, textInputPlaceholder: textInputPlaceholder)
    }

    public init(identifier: String, title: String, options: UNNotificationActionOptions = [], icon: UNNotificationActionIcon?, textInputButtonTitle: String, textInputPlaceholder: String) {
        self.textInputButtonTitle = textInputButtonTitle
        self.textInputPlaceholder = textInputPlaceholder
        super.init(identifier: identifier, title: title, options: options, icon: icon)
    }

    /// A text-input action with Apple's default button title ("Send") and no placeholder.
    public override convenience init(identifier: String, title: String, options: UNNotificationActionOptions = [], icon: UNNotificationActionIcon?) {
        self.init(identifier: identifier, title: title, options: options, icon: icon, textInputButtonTitle: "Send", textInputPlaceholder: "")
    }

    public required init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(ActionValue.self, from: coder), let input = value.textInput else { return nil }
        textInputButtonTitle = input.buttonTitle
        textInputPlaceholder = input.placeholder
        super.init(coder: coder)
    }

    open override var description: String {
        "<UNTextInputNotificationAction: identifier: \(identifier), title: \(title), options: \(Self.describe(options)), textInputButtonTitle: \(textInputButtonTitle), textInputPlaceholder: \(textInputPlaceholder)>"
    }
}

/// A type of notification: its actions and options. Register the complete set with
/// `setNotificationCategories(_:)`; content selects one with `categoryIdentifier`.
/// Immutable; equal by value, so `Set<UNNotificationCategory>` de-duplicates equal
/// categories.
open class UNNotificationCategory: NSObject, NSCopying, NSSecureCoding {
    public let identifier: String
    /// The actions in display order (banners show the first two; up to ten where space allows).
    public let actions: [UNNotificationAction]
    /// SiriKit intent identifiers this category relates to.
    public let intentIdentifiers: [String]
    public let options: UNNotificationCategoryOptions
    /// Shown instead of the body when previews are hidden; `%u` is the number of
    /// notifications in the thread.
    public let hiddenPreviewsBodyPlaceholder: String
    /// The summary of a grouped stack, e.g. `"%u new messages from %@"`.
    public let categorySummaryFormat: String

    public convenience init(identifier: String, actions: [UNNotificationAction], intentIdentifiers: [String], options: UNNotificationCategoryOptions = []) {
        self.init(identifier: identifier, actions: actions, intentIdentifiers: intentIdentifiers, hiddenPreviewsBodyPlaceholder: "", categorySummaryFormat: "", options: options)
    }

    public convenience init(identifier: String, actions: [UNNotificationAction], intentIdentifiers: [String], hiddenPreviewsBodyPlaceholder: String, options: UNNotificationCategoryOptions = []) {
        self.init(identifier: identifier, actions: actions, intentIdentifiers: intentIdentifiers, hiddenPreviewsBodyPlaceholder: hiddenPreviewsBodyPlaceholder, categorySummaryFormat: "", options: options)
    }

    public init(identifier: String, actions: [UNNotificationAction], intentIdentifiers: [String], hiddenPreviewsBodyPlaceholder: String?, categorySummaryFormat: String?, options: UNNotificationCategoryOptions = []) {
        self.identifier = identifier
        self.actions = actions
        self.intentIdentifiers = intentIdentifiers
        self.options = options
        self.hiddenPreviewsBodyPlaceholder = hiddenPreviewsBodyPlaceholder ?? ""
        self.categorySummaryFormat = categorySummaryFormat ?? ""
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any { self }

    open override func isEqual(_ object: Any?) -> Bool {
        (object as? UNNotificationCategory)?.value == value
    }

    open override var hash: Int { identifier.hashValue }

    open override var description: String {
        var options: [String] = []
        if self.options.contains(.customDismissAction) { options.append("customDismissAction") }
        if self.options.contains(.allowInCarPlay) { options.append("allowInCarPlay") }
        if self.options.contains(.hiddenPreviewsShowTitle) { options.append("hiddenPreviewsShowTitle") }
        if self.options.contains(.hiddenPreviewsShowSubtitle) { options.append("hiddenPreviewsShowSubtitle") }
        if self.options.contains(.allowAnnouncement) { options.append("allowAnnouncement") }
        return "<UNNotificationCategory: identifier: \(identifier), actions: \(actions), intentIdentifiers: \(intentIdentifiers), options: [\(options.joined(separator: ", "))]>"
    }

    open class var supportsSecureCoding: Bool { true }

    open func encode(with coder: NSCoder) { ArchivedValue.encode(value, with: coder) }

    public required convenience init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(CategoryValue.self, from: coder) else { return nil }
        self.init(value: value)
    }
}
