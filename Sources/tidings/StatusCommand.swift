import ArgumentParser
import Foundation
import TidingsGateway
import TidingsStorage

/// `tidings status <apns-id>`: the path of a push through the gateway.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show what happened to a push: accepted, stored, delivered, presented, answered.")

    @Argument(help: "The apns-id the gateway answered with.")
    var apnsID: String

    @Option(name: .customLong("data-dir"), help: "The gateway's data directory.")
    var dataDirectory: String?

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        let registry = try GatewayRegistry(dataDirectory: gatewayDataDirectory(dataDirectory))
        let statuses = try registry.status(apnsID: apnsID)
        guard !statuses.isEmpty else { throw CLIError("no push with apns-id \(apnsID)") }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(statuses), as: UTF8.self))
            return
        }
        for s in statuses {
            print("\(s.apnsID)  \(s.topic) (\(s.pushType)) to \(s.tokenPrefix)…: \(s.stage)")
            func line(_ name: String, _ ms: Int64?) {
                guard let ms else { return }
                let date = Date(timeIntervalSince1970: Double(ms) / 1000)
                print("  \(name.padding(toLength: 10, withPad: " ", startingAt: 0)) \(date.ISO8601Format(.iso8601.time(includingFractionalSeconds: true).year().month().day()))")
            }
            line("accepted", s.acceptedAt)
            line("stored", s.storedAt)
            line("delivered", s.deliveredAt)
            line("presented", s.presentedAt)
            line("answered", s.answeredAt)
            if let d = s.discardReason { line("discarded", s.discardedAt); print("  reason     \(d)") }
            line("expires", s.expiresAt)
        }
    }
}
