import ArgumentParser
import Foundation
import TidingsCore
import TidingsDaemon

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Install, list and remove apps on this device.",
        subcommands: [Install.self, List.self, Remove.self, AppsRegister.self])

    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Install an app from its manifest (JSON; see docs/app-manifest.md).")

        @Argument(help: "The manifest file.") var manifest: String
        @OptionGroup var location: LocationOptions

        func run() async throws {
            let record: AppRecord
            do {
                record = try AppManifest.load(path: manifest)
            } catch {
                throw CLIError(error.description)
            }
            let admin = try await location.admin()
            _ = try await admin.run(.installApp(record))
            print("installed \(record.bundleIdentifier) (\(record.displayName)) → \(record.executable)")
            for ext in record.extensions { print("  extension \(ext.bundleIdentifier) (\(ext.point == .service ? "service" : "content")) → \(ext.executable)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List installed apps.")
        @OptionGroup var location: LocationOptions

        func run() async throws {
            let admin = try await location.admin()
            guard case .apps(let apps) = try await admin.run(.listApps) else { return }
            if apps.isEmpty { print("no apps installed") }
            for app in apps { print("\(app.bundleIdentifier)\t\(app.displayName)\t\(app.executable)") }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an app with its notifications, settings and attachments.")
        @Argument(help: "The app's bundle identifier.") var bundleIdentifier: String
        @OptionGroup var location: LocationOptions

        func run() async throws {
            let admin = try await location.admin()
            _ = try await admin.run(.removeApp(bundleIdentifier))
            print("removed \(bundleIdentifier)")
        }
    }
}
