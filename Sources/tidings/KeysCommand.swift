import ArgumentParser
import Foundation
import TidingsCore
import TidingsGateway
import TidingsPostgres
import TidingsStorage

/// `tidings keys create|list`: provider signing keys (.p8) and their teams.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create and list provider signing keys (.p8) for token-based authentication.",
        subcommands: [KeysCreate.self, KeysList.self, KeysToken.self])
}

struct KeysCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create", abstract: "Make a P-256 key, write it as a .p8 file and register its key id for a team.")

    @Option(name: .customLong("data-dir"), help: "The gateway's data directory.")
    var dataDirectory: String?

    @Option(help: "The team id (the JWT's iss), e.g. TEAM123456.")
    var team: String

    @Option(name: .customLong("key-id"), help: "The key id (the JWT's kid); default: 10 random characters.")
    var keyID: String?

    @Option(help: "Restrict the key to one environment: development or production (default: both).")
    var environment: String?

    @Option(name: .shortAndLong, help: "Where to write the .p8 file (default: AuthKey_<key id>.p8 in the current directory).")
    var output: String?

    @Option(name: .customLong("app"), help: "Also give the team this bundle id (repeatable), as `tidings apps register` does.")
    var apps: [String] = []

    @Option(name: .customLong("storage-policy"), help: "The storage policy for --app: apns or all.")
    var storagePolicy: StoragePolicy = .apns

    func run() async throws {
        let env: APNsEnvironment?
        if let environment {
            guard let e = APNsEnvironment(name: environment) else { throw ValidationError("--environment is development or production") }
            env = e
        } else {
            env = nil
        }
        let registry = try gatewayRegistry(dataDirectory)
        let (key, record) = try registry.createKey(teamID: team, keyID: keyID, environment: env)
        let path = output ?? "AuthKey_\(record.keyID).p8"
        guard FileManager.default.createFile(atPath: path, contents: Data(key.pem.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CLIError("cannot write \(path)")
        }
        print("key id: \(record.keyID)")
        print("team id: \(record.teamID)")
        print("environment: \(record.environment?.rawValue ?? "development and production")")
        print("private key: \(path)")
        for bundleID in apps {
            let app = try registry.registerApp(bundleID: bundleID, teamID: record.teamID, storagePolicy: storagePolicy)
            print("app: \(app.bundleID) (storage policy \(app.storagePolicy))")
        }
    }
}

struct KeysList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List registered keys and apps.")

    @Option(name: .customLong("data-dir"), help: "The gateway's data directory.")
    var dataDirectory: String?

    func run() async throws {
        let registry = try gatewayRegistry(dataDirectory)
        let keys = try registry.keys()
        if keys.isEmpty { print("no keys; make one with: tidings keys create --team TEAMID") }
        for k in keys {
            print("\(k.keyID)  team \(k.teamID)  \(k.environment?.rawValue ?? "both environments")")
        }
        for a in try registry.apps() {
            print("app \(a.bundleID)  team \(a.teamID)  storage policy \(a.storagePolicy)")
        }
    }
}

struct KeysToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "token", abstract: "Print a provider token (ES256 JWT) for curl, h2load or any HTTP/2 client; valid for an hour.")

    @Option(help: "The .p8 signing key.")
    var key: String

    @Option(name: .customLong("key-id"), help: "The key id (kid).")
    var keyID: String

    @Option(help: "The team id (iss).")
    var team: String

    func run() async throws {
        print(try ProviderSigningKey(p8File: key).token(keyID: keyID, teamID: team))
    }
}

func gatewayDataDirectory(_ option: String?) -> URL {
    option.map { URL(fileURLWithPath: $0) } ?? GatewayConfiguration.defaultDataDirectory
}

/// The PostgreSQL URL of the gateway's store: `--database`, else `$TIDINGS_DATABASE_URL`; nil
/// (SQLite in the data directory) when neither is set. A value that is not a postgres:// URL
/// is refused here, before anything opens.
func gatewayDatabaseURL(_ option: String?) throws -> String? {
    let value = option ?? ProcessInfo.processInfo.environment["TIDINGS_DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
    guard let value else { return nil }
    if case .failure(let error) = PostgresStoreURL.parse(value) {
        throw ValidationError("\(option != nil ? "--database" : "TIDINGS_DATABASE_URL"): \(error)")
    }
    return value
}

/// The registry the CLI's key, app and status commands use: the PostgreSQL store when
/// `database` (a `--database` option) or `$TIDINGS_DATABASE_URL` names one (the gateway nodes'
/// shared registry), else the data directory's SQLite file.
func gatewayRegistry(_ dataDirectory: String?, database: String? = nil) throws -> GatewayRegistry {
    if let url = try gatewayDatabaseURL(database) { return GatewayRegistry(store: try PostgresGatewayStore(url: url, maximumConnections: 1)) }
    return try GatewayRegistry(dataDirectory: gatewayDataDirectory(dataDirectory))
}
