import Foundation
import TidingsCore
import TidingsEngine

/// Asks the person on the daemon's terminal, one prompt at a time, as iOS's alert does.
public actor TerminalConsent: ConsentProvider {
    private let input: @Sendable () -> String?
    private let output: @Sendable (String) -> Void

    public init(input: (@Sendable () -> String?)? = nil, output: (@Sendable (String) -> Void)? = nil) {
        self.input = input ?? { readLine(strippingNewline: true) }
        self.output = output ?? { FileHandle.standardOutput.write(Data($0.utf8)) }
    }

    public func requestConsent(appName: String, bundleIdentifier: String, options: AuthorizationOptionsValue) async -> Bool {
        var kinds: [String] = []
        if options.contains(.alert) { kinds.append("alerts") }
        if options.contains(.sound) { kinds.append("sounds") }
        if options.contains(.badge) { kinds.append("badges") }
        if options.contains(.criticalAlert) { kinds.append("critical alerts") }
        if options.contains(.timeSensitive) { kinds.append("time-sensitive notifications") }
        let what = kinds.isEmpty ? "notifications" : kinds.joined(separator: ", ")
        output("\n“\(appName)” (\(bundleIdentifier)) would like to send you notifications (\(what)).\nAllow? [y/N] ")
        let input = input
        let answer: String? = await withCheckedContinuation { continuation in
            // Reading the terminal blocks: do it on a thread of its own.
            Thread.detachNewThread { continuation.resume(returning: input()) }
        }
        let allowed = ["y", "yes", "allow"].contains(answer?.trimmingCharacters(in: .whitespaces).lowercased() ?? "")
        output(allowed ? "Allowed.\n" : "Don't Allow.\n")
        return allowed
    }
}
