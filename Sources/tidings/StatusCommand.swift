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

    @Option(name: .customLong("database"), help: "The gateway nodes' PostgreSQL URL, to read the shared push log (default: $TIDINGS_DATABASE_URL, else the data directory's store).")
    var database: String?

    @Flag(help: "Print JSON.")
    var json = false

    @Option(help: "Ask a running gateway's admin endpoint (HOST:PORT) instead of reading the data directory, e.g. 127.0.0.1:2198.")
    var admin: String?

    @Option(name: .customLong("admin-token-file"), help: "The admin endpoint's token file (default: <data dir>/admin-token when it exists).")
    var adminTokenFile: String?

    func run() async throws {
        let statuses: [PushStatus]
        if let admin {
            statuses = try await fromAdminEndpoint(admin)
        } else {
            statuses = try gatewayRegistry(dataDirectory, database: database).status(apnsID: apnsID)
        }
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

    /// `GET /status/<apns-id>`, with the bearer token when there is a token file.
    private func fromAdminEndpoint(_ address: String) async throws -> [PushStatus] {
        let (host, port) = try GatewayOptions.address(address, "--admin")
        let defaultTokenFile = GatewayConfiguration(dataDirectory: gatewayDataDirectory(dataDirectory)).adminTokenPath
        let tokenFile = adminTokenFile ?? (FileManager.default.fileExists(atPath: defaultTokenFile) ? defaultTokenFile : nil)
        let response: AdminEndpointClient.Response
        do {
            let token = try tokenFile.map(AdminEndpointClient.token(fromFile:))
            let id = apnsID.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? apnsID
            response = try await AdminEndpointClient.get(host: host, port: port, path: "/status/\(id)", token: token)
        } catch {
            throw CLIError("\(error)")
        }
        switch response.status {
        case 200: break
        case 404: throw CLIError("no push with apns-id \(apnsID)")
        case 401: throw CLIError("the admin endpoint wants its bearer token: --admin-token-file <gateway data dir>/admin-token")
        default: throw CLIError("the admin endpoint answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        do {
            return try JSONDecoder().decode([PushStatus].self, from: Data(response.body))
        } catch {
            throw CLIError("the admin endpoint's answer is not a push status list: \(error)")
        }
    }
}
