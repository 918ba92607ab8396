import ArgumentParser
import Foundation
import TidingsCore
import TidingsDaemon

struct Notifications: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "See and answer notifications as a person would: list, respond (tap, action, text reply), dismiss.",
        subcommands: [List.self, Respond.self, Dismiss.self, OpenSettings.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List delivered notifications (or pending requests).")
        @Option(help: "Only this app.") var app: String?
        @Flag(help: "List pending requests instead of delivered notifications.") var pending = false
        @Flag(help: "Print JSON.") var json = false
        @OptionGroup var location: LocationOptions

        func run() async throws {
            let admin = try await location.admin()
            if pending {
                guard case .requests(let requests) = try await admin.run(.pending(bundleIdentifier: app)) else { return }
                if json { return try printJSON(requests) }
                if requests.isEmpty { print("no pending requests") }
                for item in requests {
                    print("\(item.bundleIdentifier)\t\(item.request.identifier)\t\(describe(item.request.trigger))\t\(item.request.content.title)")
                }
                return
            }
            guard case .notifications(let notifications) = try await admin.run(.delivered(bundleIdentifier: app)) else { return }
            if json { return try printJSON(notifications) }
            if notifications.isEmpty { print("no delivered notifications") }
            for item in notifications {
                let content = item.notification.request.content
                var line = "\(item.bundleIdentifier)\t\(item.notification.request.identifier)\t\(content.title)"
                if !content.body.isEmpty { line += " — \(content.body)" }
                if let actions = item.category?.actions, !actions.isEmpty {
                    line += "\t[" + actions.map { $0.textInput == nil ? $0.identifier : "\($0.identifier) (text)" }.joined(separator: ", ") + "]"
                }
                print(line)
            }
        }

        func describe(_ trigger: TriggerValue?) -> String {
            switch trigger {
            case nil: "now"
            case .timeInterval(let seconds, let repeats)?: "\(repeats ? "every" : "after") \(seconds)s"
            case .calendar(let components, let repeats)?: "calendar \(components)\(repeats ? " repeating" : "")"
            case .location(let region, let repeats)?: "region \(region.identifier)\(repeats ? " repeating" : "")"
            case .push?: "push"
            }
        }

        func printJSON<T: Encodable>(_ value: T) throws {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            encoder.dateEncodingStrategy = .iso8601
            print(String(decoding: try encoder.encode(value), as: UTF8.self))
        }
    }

    struct Respond: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Tap a notification, or pick one of its actions (with --text for a text reply).")
        @Argument(help: "The notification's identifier.") var identifier: String
        @Option(help: "The app (needed when several apps have this identifier).") var app: String?
        @Option(help: "The action's identifier (default: tap the notification).") var action: String?
        @Option(help: "The text reply, for a text-input action.") var text: String?
        @OptionGroup var location: LocationOptions

        func run() async throws {
            let admin = try await location.admin()
            let actionIdentifier = action ?? ActionIdentifier.default
            _ = try await admin.run(.respond(bundleIdentifier: app, identifier: identifier, actionIdentifier: actionIdentifier, userText: text))
            print("responded to \(identifier) with \(action ?? "a tap")")
        }
    }

    struct Dismiss: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Dismiss a notification (reported to the app only if its category asks for it).")
        @Argument(help: "The notification's identifier.") var identifier: String
        @Option(help: "The app (needed when several apps have this identifier).") var app: String?
        @OptionGroup var location: LocationOptions

        func run() async throws {
            let admin = try await location.admin()
            _ = try await admin.run(.respond(bundleIdentifier: app, identifier: identifier, actionIdentifier: ActionIdentifier.dismiss, userText: nil))
            print("dismissed \(identifier)")
        }
    }

    struct OpenSettings: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "open-settings", abstract: "Open an app's own notification settings (its delegate's openSettingsFor).")
        @Argument(help: "The app's bundle identifier.") var app: String
        @Option(help: "The notification it was opened from.") var notification: String?
        @OptionGroup var location: LocationOptions

        func run() async throws {
            let admin = try await location.admin()
            _ = try await admin.run(.openSettings(bundleIdentifier: app, identifier: notification))
        }
    }
}

struct Location: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Tell the daemon where the device is (a scripted location provider for location triggers).")
    @Argument(help: "Latitude in degrees.") var latitude: Double
    @Argument(help: "Longitude in degrees.") var longitude: Double
    @OptionGroup var location: LocationOptions

    func run() async throws {
        let admin = try await location.admin()
        _ = try await admin.run(.location(latitude: latitude, longitude: longitude))
    }
}
