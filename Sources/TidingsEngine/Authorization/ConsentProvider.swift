import Foundation
import TidingsCore

/// Asks the person whether an app may notify them: the system prompt of iOS.
public protocol ConsentProvider: Sendable {
    /// Returns the person's answer: true to allow.
    func requestConsent(appName: String, bundleIdentifier: String, options: AuthorizationOptionsValue) async -> Bool
}

/// Answers every prompt the same way: for headless daemons and tests.
public struct FixedConsent: ConsentProvider {
    public let allow: Bool
    public init(allow: Bool) { self.allow = allow }
    public static let autoGrant = FixedConsent(allow: true)
    public static let autoDeny = FixedConsent(allow: false)

    public func requestConsent(appName: String, bundleIdentifier: String, options: AuthorizationOptionsValue) async -> Bool {
        allow
    }
}
