import Foundation
import Testing
import TidingsGateway
import TidingsTestSupport
import TidingsTesting

/// `tidings certs create|list|revoke` as a user runs them: the files, the CA, and a clear
/// error with a non-zero exit for each bad input.
@Suite("Certs CLI", .serialized)
struct CertsCLITests {
    func tidings(_ arguments: [String]) async throws -> ThirdPartyClientTests.Run {
        try await ThirdPartyClientTests.run(CrashTests.executable!, arguments)
    }

    @Test func createListRevoke() async throws {
        guard requireTool(CrashTests.executable != nil, "the tidings executable next to the test bundle") else { return }
        let directory = TemporaryDirectories.make(prefix: "tidings-certs-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let data = directory.appendingPathComponent("data").path
        let output = directory.appendingPathComponent("out").path
        let empty = try await tidings(["certs", "list", "--data-dir", data])
        #expect(empty.stdout.contains("no provider CA yet"))
        _ = try GatewayRegistry(dataDirectory: URL(fileURLWithPath: data)).registerApp(bundleID: "com.example.cli", teamID: "CLITEAM123")
        func create(_ extra: [String]) async throws -> ThirdPartyClientTests.Run {
            try await tidings(["certs", "create", "--data-dir", data, "--output", output] + extra)
        }

        // Refusals, before anything is made.
        let unregistered = try await create(["--app", "com.example.unknown", "--team", "CLITEAM123", "--environment", "development"])
        #expect(unregistered.status != 0)
        #expect(unregistered.stderr.contains("com.example.unknown is not registered"), "\(unregistered.stderr)")
        let otherTeam = try await create(["--app", "com.example.cli", "--team", "OTHERTEAM1", "--environment", "development"])
        #expect(otherTeam.status != 0)
        #expect(otherTeam.stderr.contains("belongs to team CLITEAM123, not OTHERTEAM1"), "\(otherTeam.stderr)")
        let environment = try await create(["--app", "com.example.cli", "--team", "CLITEAM123", "--environment", "staging"])
        #expect(environment.status != 0)
        #expect(environment.stderr.contains("--environment is development or production"), "\(environment.stderr)")
        #expect(!FileManager.default.fileExists(atPath: output))
        let tooLong = try await create(["--app", "com.example.cli", "--team", "CLITEAM123", "--environment", "development",
                                        "--days", String(ProviderCertificateAuthority.maximumLifetimeDays + 1)])
        #expect(tooLong.status != 0)
        #expect(tooLong.stderr.contains("lifetime is 1 to \(ProviderCertificateAuthority.maximumLifetimeDays) days"), "\(tooLong.stderr)")

        // Issued: the PEM and the .p12, both 0600; the CA's key 0600.
        let created = try await create(["--app", "com.example.cli", "--team", "CLITEAM123", "--team-name", "CLI Team",
                                        "--environment", "production", "--password", "pw"])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.contains("subject: C=US,O=CLI Team,OU=CLITEAM123,CN=Apple Push Services: com.example.cli"), "\(created.stdout)")
        #expect(created.stdout.contains("topics: com.example.cli com.example.cli.voip com.example.cli.complication"))
        let serial = try #require(created.stdout.split(separator: "\n").first { $0.hasPrefix("serial: ") }.map { String($0.dropFirst(8)) })
        for file in ["com.example.cli-production.pem", "com.example.cli-production.p12"] {
            let mode = try FileManager.default.attributesOfItem(atPath: output + "/" + file)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file)")
        }
        let keyMode = try FileManager.default.attributesOfItem(atPath: data + "/provider-ca/ca-key.pem")[.posixPermissions] as? Int
        #expect(keyMode == 0o600)
        let listed = try await tidings(["certs", "list", "--data-dir", data])
        #expect(listed.stdout.contains("\(serial) com.example.cli CLITEAM123 production"))
        #expect(!listed.stdout.contains("revoked"))

        // Revocation, written as openssl prints serials (colons, lower case).
        let colons = stride(from: 0, to: serial.count, by: 2).map { i in
            String(serial.dropFirst(i).prefix(2)).lowercased()
        }.joined(separator: ":")
        let revoked = try await tidings(["certs", "revoke", colons, "--data-dir", data])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(revoked.stdout.contains("revoked \(serial)"))
        #expect(try await tidings(["certs", "list", "--data-dir", data]).stdout.contains("\(serial) com.example.cli CLITEAM123 production"))
        #expect(try await tidings(["certs", "list", "--data-dir", data]).stdout.contains("revoked"))
        let unknown = try await tidings(["certs", "revoke", "0123ABCD", "--data-dir", data])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("no certificate with serial 123ABCD"), "\(unknown.stderr)")
        let notHex = try await tidings(["certs", "revoke", "xyz", "--data-dir", data])
        #expect(notHex.status != 0)
        #expect(notHex.stderr.contains("is not a serial number"), "\(notHex.stderr)")
    }
}
