import Foundation
import SwiftASN1
import Testing
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsStorage
import TidingsTestSupport
import X509
import _CryptoExtras
import TidingsTesting

/// Certificate-based provider authentication (mutual TLS): the provider CA, the certificates it
/// issues (Apple's shape, PEM and PKCS#12), and the provider listener's answers over a real
/// TLS connection with a client certificate.
@Suite("Client certificates", .serialized)
struct ClientCertificateTests {
    /// Issues a certificate from the gateway's CA and writes it (certificate + key) as PEM.
    static func issue(_ h: GatewayHarness, bundleID: String = GatewayHarness.bundleID, environment: APNsEnvironment = .development,
                      days: Int = 365) throws -> (path: String, certificate: IssuedProviderCertificate) {
        let authority = try ProviderCertificateAuthority.ensure(in: h.directory).authority
        let issued = try authority.issue(bundleID: bundleID, teamID: GatewayHarness.teamID, environment: environment,
                                         lifetimeDays: days, now: h.clock.now)
        let path = h.directory.appendingPathComponent("client-\(issued.serialNumber).pem").path
        try issued.pem().write(toFile: path, atomically: true, encoding: .utf8)
        return (path, issued)
    }

    static func connect(_ h: GatewayHarness, certificate: String) async throws -> APNsConnection {
        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: h.providerPort, trustRootPaths: [h.certificatePath])
        configuration.authority = "127.0.0.1"
        configuration.clientCertificatePath = certificate
        return try await APNsConnection.connect(configuration)
    }

    func expectError(_ response: APNsResponse, _ reason: APNsReason, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == reason.status, sourceLocation: sourceLocation)
        #expect(response.reason == reason.rawValue, sourceLocation: sourceLocation)
    }

    // MARK: The CA and the certificates

    @Test func theAuthorityIsMadeOnceWithAPrivateKey() throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-ca-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (first, created) = try ProviderCertificateAuthority.ensure(in: directory)
        #expect(created)
        let (again, createdAgain) = try ProviderCertificateAuthority.ensure(in: directory)
        #expect(!createdAgain)
        #expect(again.certificate == first.certificate)
        let keyMode = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("provider-ca/ca-key.pem").path)[.posixPermissions] as? Int
        #expect(keyMode == 0o600)
        #expect(try first.certificate.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
    }

    @Test func certificatesHaveApplesShape() throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-ca-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try ProviderCertificateAuthority.ensure(in: directory).authority
        let development = try authority.issue(bundleID: "com.example.app", teamID: "TEAM123456", teamName: "Example Ltd", environment: .development)
        let production = try authority.issue(bundleID: "com.example.app", teamID: "TEAM123456", environment: .production)

        // Subject: UID, CN, OU, O, C in Apple's order.
        let subject = development.certificate.subject.map { rdn in rdn.map { ($0.type, String($0.value) ?? "") } }.map { $0[0] }
        #expect(subject.map(\.0) == [ApplePushCertificate.userID, .RDNAttributeType.commonName, .RDNAttributeType.organizationalUnitName,
                                     .RDNAttributeType.organizationName, .RDNAttributeType.countryName])
        #expect(subject.map(\.1) == ["com.example.app", "Apple Development IOS Push Services: com.example.app", "TEAM123456", "Example Ltd", "US"])
        let productionCN = production.certificate.subject.flatMap { $0 }.first { $0.type == .RDNAttributeType.commonName }.flatMap { String($0.value) }
        #expect(productionCN == "Apple Push Services: com.example.app")

        // Environments: development only; production is Apple's universal (both).
        let dev = try ProviderCertificateIdentity(development.certificate)
        let prod = try ProviderCertificateIdentity(production.certificate)
        #expect(dev.environments == [.development])
        #expect(prod.environments == [.development, .production])
        #expect(dev.bundleID == "com.example.app" && dev.teamID == "TEAM123456")
        #expect(dev.topics == ["com.example.app", "com.example.app.voip", "com.example.app.complication"])

        // The topics extension as Apple's: SEQUENCE { UTF8String topic, SEQUENCE { UTF8String type } … }.
        let topics = try #require(development.certificate.extensions[oid: ApplePushCertificate.topicsExtension])
        #expect(Array(topics.value) == (try ApplePushCertificate.encodeTopics([
            ("com.example.app", "app"), ("com.example.app.voip", "voip"), ("com.example.app.complication", "complication")])))
        let development31 = try #require(development.certificate.extensions[oid: ApplePushCertificate.developmentExtension])
        #expect(Array(development31.value) == [0x05, 0x00])
        #expect(development.certificate.extensions[oid: ApplePushCertificate.productionExtension] == nil)

        // RSA-2048, client authentication, signed by the CA.
        #expect(_RSA.Signing.PublicKey(development.certificate.publicKey)?.keySizeInBits == ProviderCertificateAuthority.keySize)
        #expect(try development.certificate.extensions.extendedKeyUsage == ExtendedKeyUsage([.clientAuth]))
        #expect(authority.certificate.publicKey.isValidSignature(development.certificate.signature, for: development.certificate))
        #expect(development.certificate.notValidAfter.timeIntervalSince(development.certificate.notValidBefore) > 364 * 86400)

        // Lifetime limits.
        #expect(throws: ProviderCertificateError.self) {
            try authority.issue(bundleID: "com.example.app", teamID: "TEAM123456", environment: .development,
                                lifetimeDays: ProviderCertificateAuthority.maximumLifetimeDays + 1)
        }
        _ = try authority.issue(bundleID: "com.example.app", teamID: "TEAM123456", environment: .development,
                                lifetimeDays: ProviderCertificateAuthority.maximumLifetimeDays)
        #expect(authority.issued().count == 3)
    }

    /// The `.p12` as `openssl pkcs12` reads it: PBES2 with PBKDF2 and AES-256-CBC, a SHA-256
    /// MAC, the certificate and the key; a wrong password is refused.
    @Test func pkcs12IsReadByOpenSSL() async throws {
        let openssl = "/usr/bin/openssl"
        guard requireTool(FileManager.default.isExecutableFile(atPath: openssl), "openssl") else { return }
        let directory = TemporaryDirectories.make(prefix: "tidings-ca-")
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try ProviderCertificateAuthority.ensure(in: directory).authority
        let issued = try authority.issue(bundleID: "com.example.app", teamID: "TEAM123456", environment: .production)
        let p12 = directory.appendingPathComponent("cert.p12")
        try Data(try issued.pkcs12(password: "s3cret é")).write(to: p12)

        let info = try await ThirdPartyClientTests.run(openssl, ["pkcs12", "-in", p12.path, "-passin", "pass:s3cret é", "-info", "-nodes"])
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stderr.contains("MAC: sha256"), "\(info.stderr)")
        #expect(info.stderr.contains("Shrouded Keybag: PBES2, PBKDF2, AES-256-CBC"), "\(info.stderr)")
        #expect(info.stderr.contains("PKCS7 Encrypted data: PBES2, PBKDF2, AES-256-CBC"), "\(info.stderr)")
        #expect(info.stdout.contains("friendlyName: Apple Push Services: com.example.app"))
        #expect(info.stdout.contains("-----BEGIN PRIVATE KEY-----"))
        #expect(info.stdout.contains(try issued.certificate.serializeAsPEM().pemString))
        // The key in the .p12 is the certificate's: openssl pairs them by localKeyID and modulus.
        let pemKey = try await ThirdPartyClientTests.run(openssl, ["pkcs12", "-in", p12.path, "-passin", "pass:s3cret é", "-nocerts", "-nodes"])
        let keyFile = directory.appendingPathComponent("key.pem")
        try pemKey.stdout.write(to: keyFile, atomically: true, encoding: .utf8)
        let certFile = directory.appendingPathComponent("cert.pem")
        try issued.certificate.serializeAsPEM().pemString.write(to: certFile, atomically: true, encoding: .utf8)
        let keyModulus = try await ThirdPartyClientTests.run(openssl, ["rsa", "-in", keyFile.path, "-noout", "-modulus"])
        let certModulus = try await ThirdPartyClientTests.run(openssl, ["x509", "-in", certFile.path, "-noout", "-modulus"])
        #expect(!keyModulus.stdout.isEmpty && keyModulus.stdout == certModulus.stdout)

        let wrong = try await ThirdPartyClientTests.run(openssl, ["pkcs12", "-in", p12.path, "-passin", "pass:wrong", "-nodes"])
        #expect(wrong.status != 0)
        #expect(wrong.stderr.contains("Mac verify error"), "\(wrong.stderr)")
    }

    // MARK: The provider listener

    /// A verified certificate authenticates the connection by itself: no `authorization`, no
    /// `apns-topic` (the certificate's bundle id), and its `.voip` topic; the pushes arrive.
    @Test func certificateAuthenticatesWithoutTokenOrTopic() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let collector = await PushCollector.start(device)
        let (path, _) = try Self.issue(h)
        let c = try await Self.connect(h, certificate: path)

        let r1 = try await c.send(h.request(token: token, topic: nil, authorization: nil, body: #"{"aps":{"alert":"by certificate"}}"#))
        #expect(r1.status == 200, "\(String(decoding: r1.body, as: UTF8.self))")
        let r2 = try await c.send(h.request(token: token, topic: GatewayHarness.bundleID + ".voip", pushType: "voip", authorization: nil,
                                            body: #"{"aps":{},"call":1}"#))
        #expect(r2.status == 200, "\(String(decoding: r2.body, as: UTF8.self))")
        // Apple ignores `authorization` on a certificate connection: a wrong token changes nothing.
        let r3 = try await c.send(h.request(token: token, authorization: "bearer not.a.token"))
        #expect(r3.status == 200)
        // The connection's stream limit was raised as for a token.
        let many = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<5 { group.addTask { try await c.send(h.request(token: token, authorization: nil)).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(many == Array(repeating: 200, count: 5))

        let got = await collector.wait(for: 8)
        #expect(got.count == 8)
        #expect(got.first?.topic == GatewayHarness.bundleID)
        #expect(try got.first?.parsedPayload().notificationContent().body == "by certificate")
        #expect(got.contains { $0.topic == GatewayHarness.bundleID + ".voip" })
        // A token connection to the same listener still needs its token.
        let tokenConnection = try await h.connect()
        expectError(try await tokenConnection.send(h.request(token: token, authorization: nil)), .missingProviderToken)
        expectError(try await tokenConnection.send(h.request(token: token, topic: nil, authorization: try h.bearer())), .missingTopic)
        #expect(try await tokenConnection.send(h.request(token: token, authorization: try h.bearer())).status == 200)
        await tokenConnection.close()
        await c.close()
        await device.close()
        await h.stop()
    }

    /// As at Apple, a certificate the CA accepts authenticates the connection at the handshake:
    /// the stream limit is raised before any request, and the connection may stay idle past
    /// `providerAuthenticationTimeout` (before, it got GOAWAY `IdleTimeout` then, and one
    /// stream until its first push). A refused certificate is closed then, as a token
    /// connection that never authenticated.
    @Test func certificateConnectionIsAuthenticatedByItsHandshake() async throws {
        let h = try await GatewayHarness.start {
            $0.providerAuthenticationTimeout = .seconds(1)
            $0.providerIdleCheckInterval = .milliseconds(5)
        }
        let token = try await h.deviceToken()
        let (path, _) = try Self.issue(h)
        let c = try await Self.connect(h, certificate: path)
        let elsewhere = TemporaryDirectories.make(prefix: "tidings-ca-")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let foreign = try ProviderCertificateAuthority.ensure(in: elsewhere).authority
            .issue(bundleID: GatewayHarness.bundleID, teamID: GatewayHarness.teamID, environment: .development, now: h.clock.now)
        let foreignPath = elsewhere.appendingPathComponent("foreign.pem").path
        try foreign.pem().write(toFile: foreignPath, atomically: true, encoding: .utf8)
        let refused = try await Self.connect(h, certificate: foreignPath)

        var limit = await c.maximumConcurrentStreams()
        for _ in 0..<200 where limit <= 1 {
            try await Task.sleep(for: .milliseconds(10))
            limit = await c.maximumConcurrentStreams()
        }
        #expect(limit == h.gateway.configuration.authenticatedStreamLimit, "raised at the handshake, before any request")
        #expect(await refused.maximumConcurrentStreams() == 1)

        h.clock.advance(by: 5)  // past the authentication timeout; the check runs every 5 ms
        var reason = await refused.goAwayReason()
        for _ in 0..<200 where reason == nil {
            try await Task.sleep(for: .milliseconds(10))
            reason = await refused.goAwayReason()
        }
        #expect(reason == "IdleTimeout", "the refused certificate's connection: \(String(describing: reason))")
        #expect(await c.goAwayReason() == nil, "an idle certificate connection stays open")
        #expect(try await c.send(h.request(token: token, authorization: nil)).status == 200)
        await refused.close()
        await c.close()
        await h.stop()
    }

    /// A topic the certificate does not name is `400 TopicDisallowed`, even the team's other
    /// app and a push type certificates cannot send (live activities); a bad device token is
    /// still `BadDeviceToken`.
    @Test func topicsOutsideTheCertificate() async throws {
        let h = try await GatewayHarness.start()
        let now = EpochMilliseconds(h.clock.now.timeIntervalSince1970 * 1000)
        try await h.gateway.register(app: GatewayAppRecord(bundleID: "com.example.other", teamID: GatewayHarness.teamID,
                                                           storagePolicy: .apns, createdAt: now))
        let device = try await h.device()
        let other = try await device.requestToken(topic: "com.example.other", environment: .development).hex
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let (path, _) = try Self.issue(h)
        let c = try await Self.connect(h, certificate: path)
        expectError(try await c.send(h.request(token: other, topic: "com.example.other", authorization: nil)), .topicDisallowed)
        expectError(try await c.send(h.request(token: token, topic: GatewayHarness.bundleID + ".push-type.liveactivity", pushType: "liveactivity",
                                               authorization: nil, body: #"{"aps":{"event":"update","timestamp":1,"content-state":{}}}"#)),
                    .topicDisallowed)
        expectError(try await c.send(h.request(token: "ab" + String(repeating: "0", count: 62), topic: nil, authorization: nil)), .badDeviceToken)
        // A valid token of the team does not widen the certificate.
        expectError(try await c.send(h.request(token: other, topic: "com.example.other", authorization: try h.bearer())), .topicDisallowed)
        #expect(try await c.send(h.request(token: token, authorization: nil)).status == 200)
        await c.close()
        await device.close()
        await h.stop()
    }

    /// A development certificate on a production gateway is `403 BadCertificateEnvironment`; a
    /// production certificate (Apple's universal one) works on both.
    @Test func certificateForTheOtherEnvironment() async throws {
        let h = try await GatewayHarness.start(configure: { $0.environment = .production })
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .production).hex
        let (developmentPath, _) = try Self.issue(h, environment: .development)
        let (productionPath, _) = try Self.issue(h, environment: .production)
        let wrong = try await Self.connect(h, certificate: developmentPath)
        expectError(try await wrong.send(h.request(token: token, topic: nil, authorization: nil)), .badCertificateEnvironment)
        // A valid token does not rescue a connection whose certificate is refused.
        expectError(try await wrong.send(h.request(token: token, authorization: try h.bearer())), .badCertificateEnvironment)
        let right = try await Self.connect(h, certificate: productionPath)
        #expect(try await right.send(h.request(token: token, topic: nil, authorization: nil)).status == 200)
        await wrong.close()
        await right.close()
        await device.close()
        await h.stop()
    }

    /// `403 BadCertificate`: a certificate of another CA (Apple's shape, right team and app),
    /// one presented after its expiry (the gateway's clock), one that expires while its
    /// connection is open, and a revoked one on a new connection.
    @Test func badCertificates() async throws {
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex

        // Another CA's certificate, otherwise identical.
        let elsewhere = TemporaryDirectories.make(prefix: "tidings-ca-")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let foreign = try ProviderCertificateAuthority.ensure(in: elsewhere).authority
            .issue(bundleID: GatewayHarness.bundleID, teamID: GatewayHarness.teamID, environment: .development, now: h.clock.now)
        let foreignPath = elsewhere.appendingPathComponent("foreign.pem").path
        try foreign.pem().write(toFile: foreignPath, atomically: true, encoding: .utf8)
        let stranger = try await Self.connect(h, certificate: foreignPath)
        expectError(try await stranger.send(h.request(token: token, authorization: nil)), .badCertificate)
        expectError(try await stranger.send(h.request(token: token, authorization: try h.bearer())), .badCertificate)
        await stranger.close()

        // Expiry, by the gateway's clock: one day of validity.
        let (shortLived, _) = try Self.issue(h, days: 1)
        let open = try await Self.connect(h, certificate: shortLived)
        #expect(try await open.send(h.request(token: token, authorization: nil)).status == 200)
        h.clock.advance(by: 86400 + 60)
        expectError(try await open.send(h.request(token: token, authorization: nil)), .badCertificate)
        let late = try await Self.connect(h, certificate: shortLived)
        expectError(try await late.send(h.request(token: token, authorization: nil)), .badCertificate)
        await open.close()
        await late.close()

        // Revocation: the next connection with the certificate is refused.
        let (revokedPath, revoked) = try Self.issue(h)
        let before = try await Self.connect(h, certificate: revokedPath)
        #expect(try await before.send(h.request(token: token, authorization: nil)).status == 200)
        let authority = try ProviderCertificateAuthority.ensure(in: h.directory).authority
        #expect(try authority.revoke(serialNumber: revoked.serialNumber.lowercased()) == revoked.serialNumber)
        #expect(throws: ProviderCertificateError.self) { try authority.revoke(serialNumber: "0123") }
        let after = try await Self.connect(h, certificate: revokedPath)
        expectError(try await after.send(h.request(token: token, authorization: nil)), .badCertificate)
        // Read once per connection: the one already open keeps its verdict (as documented).
        #expect(try await before.send(h.request(token: token, authorization: nil)).status == 200)
        await before.close()
        await after.close()
        await device.close()
        await h.stop()
    }

    /// With client certificates turned off the listener asks for none: a certificate is
    /// ignored and the connection needs a token.
    @Test func clientCertificatesCanBeTurnedOff() async throws {
        let h = try await GatewayHarness.start(configure: { $0.acceptsClientCertificates = false })
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let (path, _) = try Self.issue(h)
        let c = try await Self.connect(h, certificate: path)
        expectError(try await c.send(h.request(token: token, authorization: nil)), .missingProviderToken)
        await c.close()
        await device.close()
        await h.stop()
    }
}

