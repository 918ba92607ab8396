import Foundation
import Synchronization
import TidingsCore
import TidingsEngine

/// Shows notifications as text in the daemon's output: a banner per notification with its
/// actions and the command that answers it.
public final class TerminalPresenter: Presenter {
    private let output: @Sendable (String) -> Void
    private let timeZone: TimeZone

    /// Writes to standard output unless told otherwise.
    public init(timeZone: TimeZone = .current, output: (@Sendable (String) -> Void)? = nil) {
        self.timeZone = timeZone
        self.output = output ?? { text in
            FileHandle.standardOutput.write(Data(text.utf8))
        }
    }

    public func present(_ presented: PresentedNotification) async {
        output(Self.render(presented, timeZone: timeZone))
    }

    public func withdraw(bundleIdentifier: String, identifiers: [String]) async {
        output("[tidings] \(bundleIdentifier): removed \(identifiers.map { "\"\($0)\"" }.joined(separator: ", "))\n")
    }

    public func badgeChanged(bundleIdentifier: String, count: Int) async {
        output("[tidings] \(bundleIdentifier): badge \(count)\n")
    }

    static func render(_ presented: PresentedNotification, timeZone: TimeZone) -> String {
        let request = presented.notification.request
        let content = request.content
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        formatter.timeZone = timeZone
        var flags: [String] = []
        if presented.presentation.sound { flags.append("sound") }
        if !presented.presentation.banner { flags.append("quiet") }
        if let badge = presented.badge { flags.append("badge \(badge)") }
        var lines = ["┌─ \(presented.appName) · \(formatter.string(from: presented.notification.date))" + (flags.isEmpty ? "" : " · " + flags.joined(separator: ", "))]
        if !content.title.isEmpty { lines.append("│ \(content.title)") }
        if !content.subtitle.isEmpty { lines.append("│ \(content.subtitle)") }
        for line in content.body.split(separator: "\n", omittingEmptySubsequences: false) { lines.append("│ \(line)") }
        for attachment in content.attachments {
            lines.append("│ 📎 \(attachment.identifier) (\(attachment.type)) \(attachment.path)")
        }
        if let actions = presented.category?.actions, !actions.isEmpty {
            let labels = actions.map { action in
                action.textInput != nil ? "[\(action.title)…] --action \(action.identifier) --text …" : "[\(action.title)] --action \(action.identifier)"
            }
            lines.append("│ " + labels.joined(separator: "  "))
        }
        lines.append("└─ tidings notifications respond \(request.identifier) --app \(presented.bundleIdentifier)")
        return lines.joined(separator: "\n") + "\n"
    }
}
