import ArgumentParser
import Foundation
import TidingsCore
import TidingsGateway

/// `tidings certs create|list|revoke`: provider client certificates (mutual TLS), issued by
/// the gateway's provider CA the way Apple issues push certificates.
struct Certs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Issue and revoke provider certificates (.p12 / PEM) for certificate-based authentication.",
        subcommands: [CertsCreate.self, CertsList.self, CertsRevoke.self])
}

struct CertsCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Issue a client certificate for an app, as Apple's push certificates: <name>.pem (certificate and key) and <name>.p12.")

    @Option(name: .customLong("data-dir"), help: "The gateway's data directory (the provider CA is made there on first use).")
    var dataDirectory: String?

    @Option(name: .customLong("app"), help: "The app's bundle id; it must be registered to --team.")
    var bundleID: String

    @Option(help: "The team id that owns the app.")
    var team: String

    @Option(name: .customLong("team-name"), help: "The subject's O (Apple: the team's name); default: the team id.")
    var teamName: String?

    @Option(help: "development (Apple Development IOS Push Services) or production (Apple Push Services: production and development).")
    var environment: String

    @Option(name: .shortAndLong, help: "The directory to write to (default: the current directory).")
    var output: String = "."

    @Option(help: "The .p12 password (default: empty, as `openssl pkcs12 -passout pass:`).")
    var password: String = ""

    @Option(help: "Days the certificate is valid (1–\(ProviderCertificateAuthority.maximumLifetimeDays)).")
    var days: Int = ProviderCertificateAuthority.defaultLifetimeDays

    func run() async throws {
        guard let env = APNsEnvironment(name: environment) else { throw ValidationError("--environment is development or production") }
        let dataDirectory = gatewayDataDirectory(dataDirectory)
        let registry = try GatewayRegistry(dataDirectory: dataDirectory)
        guard let app = try registry.apps().first(where: { $0.bundleID == bundleID }) else {
            throw CLIError("\(bundleID) is not registered; first: tidings apps register \(bundleID) --team \(team)")
        }
        guard app.teamID == team else { throw CLIError("\(bundleID) belongs to team \(app.teamID), not \(team)") }
        let issued: IssuedProviderCertificate
        let authority: ProviderCertificateAuthority
        do {
            let (ca, created) = try ProviderCertificateAuthority.ensure(in: dataDirectory)
            if created { print("made the provider CA: \(ca.certificatePath)") }
            authority = ca
            issued = try ca.issue(bundleID: bundleID, teamID: team, teamName: teamName, environment: env, lifetimeDays: days)
        } catch let error as ProviderCertificateError {
            throw CLIError(error.description)
        }
        let name = "\(bundleID)-\(env)"
        let directory = URL(fileURLWithPath: output)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let pemPath = directory.appendingPathComponent(name + ".pem").path
        let p12Path = directory.appendingPathComponent(name + ".p12").path
        // 0600 from the moment each file exists (created, not chmod'ed after the key is in it).
        do {
            try PrivateFile.create(pemPath, contents: Array(try issued.pem().utf8), replacing: true)
            try PrivateFile.create(p12Path, contents: try issued.pkcs12(password: password), replacing: true)
        } catch let error as PrivateFile.Failure {
            throw CLIError(error.description)
        }
        print("serial: \(issued.serialNumber)")
        print("subject: \(issued.certificate.subject)")
        print("topics: \(ApplePushCertificate.topics(bundleID: bundleID).map(\.topic).joined(separator: " "))")
        print("valid until: \(ISO8601DateFormatter().string(from: issued.certificate.notValidAfter))")
        print("certificate and key: \(pemPath)")
        print("pkcs12: \(p12Path)")
        print("provider CA: \(authority.certificatePath)")
    }
}

struct CertsList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the certificates the provider CA issued, and which are revoked.")

    @Option(name: .customLong("data-dir"), help: "The gateway's data directory.")
    var dataDirectory: String?

    func run() async throws {
        let directory = gatewayDataDirectory(dataDirectory)
        guard FileManager.default.fileExists(atPath: ProviderCertificateAuthority.directory(in: directory).path) else {
            print("no provider CA yet; issue a certificate with: tidings certs create --app BUNDLE --team TEAM --environment development")
            return
        }
        let authority: ProviderCertificateAuthority
        do { authority = try ProviderCertificateAuthority.ensure(in: directory).authority } catch { throw CLIError("\(error)") }
        let revoked = authority.revokedSerialNumbers()
        for line in authority.issued() {
            let serial = line.split(separator: " ").first.map(String.init) ?? ""
            print(line + (revoked.contains(serial) ? "  revoked" : ""))
        }
    }
}

struct CertsRevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke a certificate by serial number: new connections with it get 403 BadCertificate.")

    @Argument(help: "The serial number (hex, as `tidings certs create` or `openssl x509 -serial` prints it).")
    var serial: String

    @Option(name: .customLong("data-dir"), help: "The gateway's data directory.")
    var dataDirectory: String?

    func run() async throws {
        let directory = gatewayDataDirectory(dataDirectory)
        do {
            let authority = try ProviderCertificateAuthority.ensure(in: directory).authority
            print("revoked \(try authority.revoke(serialNumber: serial))")
        } catch let error as ProviderCertificateError {
            throw CLIError(error.description)
        }
    }
}
