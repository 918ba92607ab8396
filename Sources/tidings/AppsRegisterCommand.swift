import ArgumentParser
import Foundation
import TidingsGateway
import TidingsStorage

extension StoragePolicy: ExpressibleByArgument {
    public init?(argument: String) { self.init(rawValue: argument) }
}

/// `tidings apps register`: give a team a topic (bundle id) on the gateway.
struct AppsRegister: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Give a team an app's bundle id on the gateway, so its keys may push to it.")

    @Argument(help: "The bundle id, e.g. com.example.app (push-type topics like .voip follow from it).")
    var bundleID: String

    @Option(help: "The team id that owns the app.")
    var team: String

    @Option(name: .customLong("storage-policy"), help: "What to keep for an offline device: apns (the latest per app, as Apple) or all (every unexpired push, coalesced by apns-collapse-id).")
    var storagePolicy: StoragePolicy = .apns

    @Option(name: .customLong("data-dir"), help: "The gateway's data directory.")
    var dataDirectory: String?

    func run() async throws {
        let registry = try gatewayRegistry(dataDirectory)
        let app = try registry.registerApp(bundleID: bundleID, teamID: team, storagePolicy: storagePolicy)
        print("registered \(app.bundleID) for team \(app.teamID), storage policy \(app.storagePolicy)")
    }
}
