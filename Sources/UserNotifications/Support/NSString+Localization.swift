import Foundation

extension NSString {
    /// The localized form of `key` from the main bundle's `Localizable.strings`, formatted
    /// with `arguments` (`%@`, `%d`…); the key itself, formatted, when there is no
    /// translation.
    ///
    /// Apple stores the key and arguments and resolves them when the notification is
    /// displayed, so a language change after scheduling is honoured. Tidings resolves
    /// immediately, in the app's current language: the daemon never reads the app's
    /// bundle. Arguments must be `CVarArg` values (String, numbers, NSString, NSNumber);
    /// others are substituted by their description.
    public class func localizedUserNotificationString(forKey key: String, arguments: [Any]?) -> String {
        let format = Bundle.main.localizedString(forKey: key, value: key, table: nil)
        guard let arguments, !arguments.isEmpty else { return format }
        let args: [any CVarArg] = arguments.map { argument in
            switch argument {
            case let value as String: value
            case let value as Int: value
            case let value as Double: value
            case let value as Float: Double(value)
            case let value as Bool: value ? 1 : 0
            case let value as NSNumber: ["f", "d"].contains(String(cString: value.objCType)) ? value.doubleValue : value.intValue
            case let value as NSString: value as String
            case let value as any CVarArg: value
            default: String(describing: argument)
            }
        }
        return String(format: format, arguments: args)
    }
}
