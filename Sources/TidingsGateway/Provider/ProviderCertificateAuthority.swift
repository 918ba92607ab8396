import Crypto
import Foundation
import SwiftASN1
import Synchronization
import TidingsCore
import X509
import _CryptoExtras

/// What Apple puts in an APNs provider certificate, and reads back from one.
public enum ApplePushCertificate {
    /// Subject `UID`: the app's bundle id, the default topic.
    public static let userID: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]
    /// Marks a development (sandbox) APNs client certificate; value `NULL`.
    public static let developmentExtension: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 1]
    /// Marks a production APNs client certificate; value `NULL`.
    public static let productionExtension: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 2]
    /// The topics the certificate may push to: `SEQUENCE { UTF8String topic, SEQUENCE {
    /// UTF8String type } … }`, types `app`, `voip`, `complication` (Pushy's test certificates,
    /// Apple's universal certificates).
    public static let topicsExtension: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 3, 6]

    /// The topics Apple's universal certificate lists for an app: the app itself, its VoIP
    /// services and its watch complication. Other push types (live activities, location,
    /// push to talk, widgets, controls…) need token authentication, as at Apple.
    public static func topics(bundleID: String) -> [(topic: String, type: String)] {
        [(bundleID, "app"), (bundleID + ".voip", "voip"), (bundleID + ".complication", "complication")]
    }

    /// The DER value of the topics extension.
    public static func encodeTopics(_ topics: [(topic: String, type: String)]) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { s in
            for (topic, type) in topics {
                try s.serialize(ASN1UTF8String(topic))
                try s.appendConstructedNode(identifier: .sequence) { t in try t.serialize(ASN1UTF8String(type)) }
            }
        }
        return serializer.serializedBytes
    }

    /// The topics in a topics extension's value: every `UTF8String` at its top level (the
    /// type sequences after each are descriptions, not topics).
    public static func decodeTopics(_ value: ArraySlice<UInt8>) throws -> [String] {
        let root = try DER.parse(value)
        guard root.identifier == .sequence, case .constructed(let children) = root.content else {
            throw ASN1Error.unexpectedFieldType(root.identifier)
        }
        var topics: [String] = []
        for child in children where child.identifier == .utf8String {
            topics.append(String(try ASN1UTF8String(derEncoded: child)))
        }
        return topics
    }
}

/// Who a verified provider certificate authenticates: Apple's fields, read once per connection.
public struct ProviderCertificateIdentity: Sendable, Hashable {
    /// Subject `UID`: the default topic.
    public var bundleID: String
    /// Subject `OU`: the team.
    public var teamID: String
    /// The `UID` and every topic of the topics extension.
    public var topics: Set<String>
    /// From the extensions `…6.3.1` (development) and `…6.3.2` (production).
    public var environments: Set<APNsEnvironment>
    /// Upper-case hex, as `openssl x509 -serial` prints it.
    public var serialNumber: String
    public var notValidAfter: Date

    /// Reads Apple's fields; a certificate without `UID` or `OU` is not a push certificate.
    public init(_ certificate: Certificate) throws {
        var uid: String?, ou: String?
        for rdn in certificate.subject {
            for attribute in rdn {
                if attribute.type == ApplePushCertificate.userID { uid = String(attribute.value) }
                if attribute.type == .RDNAttributeType.organizationalUnitName { ou = String(attribute.value) }
            }
        }
        guard let uid, Topic(rawValue: uid) != nil else { throw ProviderCertificateError("the certificate's subject has no UID (bundle id)") }
        guard let ou, !ou.isEmpty else { throw ProviderCertificateError("the certificate's subject has no OU (team id)") }
        bundleID = uid
        teamID = ou
        var topics: Set<String> = [uid]
        if let ext = certificate.extensions[oid: ApplePushCertificate.topicsExtension] {
            topics.formUnion(try ApplePushCertificate.decodeTopics(ext.value))
        }
        self.topics = topics
        var environments: Set<APNsEnvironment> = []
        if certificate.extensions[oid: ApplePushCertificate.developmentExtension] != nil { environments.insert(.development) }
        if certificate.extensions[oid: ApplePushCertificate.productionExtension] != nil { environments.insert(.production) }
        self.environments = environments
        serialNumber = ProviderCertificateAuthority.hex(certificate.serialNumber.bytes)
        notValidAfter = certificate.notValidAfter
    }
}

public struct ProviderCertificateError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The gateway's provider certificate authority: a P-256 key and a self-signed CA
/// certificate made in `DATA/provider-ca/` on first use (the key mode 0600), which issues
/// APNs-style client certificates (`tidings certs create`) and which the provider listener
/// trusts for mutual TLS. `revoked` lists revoked serial numbers, `issued` what was issued.
public struct ProviderCertificateAuthority: Sendable {
    public let certificate: Certificate
    let privateKey: P256.Signing.PrivateKey
    public let directory: URL

    /// How long a client certificate is valid by default (Apple's push certificates: a year).
    public static let defaultLifetimeDays = 365
    /// The longest lifetime `issue` accepts.
    public static let maximumLifetimeDays = 825
    /// The client certificates' RSA key size (Apple's push certificates: 2048).
    public static let keySize = 2048
    /// The CA certificate's lifetime.
    static let authorityLifetime: TimeInterval = 10 * 365 * 24 * 3600

    public static func directory(in dataDirectory: URL) -> URL { dataDirectory.appendingPathComponent("provider-ca") }
    public var certificatePath: String { directory.appendingPathComponent("ca-cert.pem").path }
    var privateKeyPath: String { directory.appendingPathComponent("ca-key.pem").path }
    public var revokedPath: String { Self.revokedPath(directory) }
    var issuedPath: String { directory.appendingPathComponent("issued").path }
    static func revokedPath(_ directory: URL) -> String { directory.appendingPathComponent("revoked").path }

    /// Loads the CA of `dataDirectory`, creating it on first use.
    public static func ensure(in dataDirectory: URL, now: Date = Date()) throws -> (authority: ProviderCertificateAuthority, created: Bool) {
        let directory = directory(in: dataDirectory)
        let cert = directory.appendingPathComponent("ca-cert.pem").path
        let key = directory.appendingPathComponent("ca-key.pem").path
        let fm = FileManager.default
        if fm.fileExists(atPath: cert), fm.fileExists(atPath: key) {
            do {
                return (ProviderCertificateAuthority(
                    certificate: try Certificate(pemEncoded: String(contentsOfFile: cert, encoding: .utf8)),
                    privateKey: try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: key, encoding: .utf8)),
                    directory: directory), false)
            } catch {
                throw ProviderCertificateError("cannot read the provider CA in \(directory.path): \(error)")
            }
        }
        try fm.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let privateKey = P256.Signing.PrivateKey()
        let name = try DistinguishedName {
            CommonName("Tidings Provider Certification Authority")
            OrganizationName("Tidings")
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(bytes: randomSerial()),
            publicKey: Certificate.PublicKey(privateKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(authorityLifetime),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: Certificate.PublicKey(privateKey.publicKey))
            },
            issuerPrivateKey: Certificate.PrivateKey(privateKey))
        try write(privateKey.pemRepresentation + "\n", to: key, mode: 0o600)
        try write(try certificate.serializeAsPEM().pemString + "\n", to: cert, mode: 0o644)
        return (ProviderCertificateAuthority(certificate: certificate, privateKey: privateKey, directory: directory), true)
    }

    /// A client certificate the way Apple issues push certificates: subject `UID=<bundle id>,
    /// CN=Apple Development IOS Push Services: <bundle id>` (development) or `CN=Apple Push
    /// Services: <bundle id>` (production), `OU=<team id>, O=<team name>, C=US`; an RSA-2048
    /// key; `clientAuth`; the environment extensions (development: `…6.3.1`; production:
    /// `…6.3.1` and `…6.3.2`, as Apple's universal "Sandbox & Production" certificate); the
    /// topics extension with the app, `.voip` and `.complication`.
    public func issue(bundleID: String, teamID: String, teamName: String? = nil, environment: APNsEnvironment,
                      lifetimeDays: Int = defaultLifetimeDays, now: Date = Date()) throws -> IssuedProviderCertificate {
        guard Topic(rawValue: bundleID) != nil else { throw ProviderCertificateError("\(bundleID) is not a valid bundle id") }
        guard (1...Self.maximumLifetimeDays).contains(lifetimeDays) else {
            throw ProviderCertificateError("a certificate's lifetime is 1 to \(Self.maximumLifetimeDays) days")
        }
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let publicKey = Certificate.PublicKey(key.publicKey)
        let commonName = environment == .production ? "Apple Push Services: \(bundleID)"
                                                    : "Apple Development IOS Push Services: \(bundleID)"
        let subject = DistinguishedName([
            RelativeDistinguishedName(.init(type: ApplePushCertificate.userID, utf8String: bundleID)),
            RelativeDistinguishedName(.init(type: .RDNAttributeType.commonName, utf8String: commonName)),
            RelativeDistinguishedName(.init(type: .RDNAttributeType.organizationalUnitName, utf8String: teamID)),
            RelativeDistinguishedName(.init(type: .RDNAttributeType.organizationName, utf8String: teamName ?? teamID)),
            RelativeDistinguishedName(try .init(type: .RDNAttributeType.countryName, printableString: "US")),
        ])
        let null: ArraySlice<UInt8> = [0x05, 0x00]
        let topics = try ApplePushCertificate.encodeTopics(ApplePushCertificate.topics(bundleID: bundleID))
        let authorityKeyID = try certificate.extensions.subjectKeyIdentifier?.keyIdentifier
        let notValidAfter = now.addingTimeInterval(TimeInterval(lifetimeDays) * 24 * 3600)
        let issued = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(bytes: Self.randomSerial()),
            publicKey: publicKey,
            notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: notValidAfter,
            issuer: certificate.subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                try ExtendedKeyUsage([.clientAuth])
                SubjectKeyIdentifier(hash: publicKey)
                AuthorityKeyIdentifier(keyIdentifier: authorityKeyID)
                Certificate.Extension(oid: ApplePushCertificate.developmentExtension, critical: false, value: null)
                if environment == .production {
                    Certificate.Extension(oid: ApplePushCertificate.productionExtension, critical: false, value: null)
                }
                Certificate.Extension(oid: ApplePushCertificate.topicsExtension, critical: false, value: topics[...])
            },
            issuerPrivateKey: Certificate.PrivateKey(privateKey))
        let result = IssuedProviderCertificate(certificate: issued, privateKey: key)
        let line = "\(result.serialNumber) \(bundleID) \(teamID) \(environment) \(ISO8601DateFormatter().string(from: notValidAfter))\n"
        try append(line, to: issuedPath)
        return result
    }

    /// Lines of `issued`: serial, bundle id, team id, environment, expiry.
    public func issued() -> [String] {
        ((try? String(contentsOfFile: issuedPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The revoked serial numbers.
    public func revokedSerialNumbers() -> Set<String> { ProviderCertificateRevocations.read(revokedPath) }

    /// Adds a serial number to the revocation list: connections opened from now on with that
    /// certificate are answered `403 BadCertificate`.
    public func revoke(serialNumber: String) throws -> String {
        let serial = Self.normalizedSerial(serialNumber)
        guard !serial.isEmpty, serial.allSatisfy(\.isHexDigit) else { throw ProviderCertificateError("\(serialNumber) is not a serial number (hex)") }
        guard issued().contains(where: { $0.split(separator: " ").first.map(String.init) == serial }) else {
            throw ProviderCertificateError("no certificate with serial \(serial) was issued by this CA (see tidings certs list)")
        }
        if !ProviderCertificateRevocations.read(revokedPath).contains(serial) { try append(serial + "\n", to: revokedPath) }
        return serial
    }

    // MARK: Helpers

    /// 16 random bytes, the first in 0x01…0x7f (positive, no leading zero to strip).
    static func randomSerial() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var serial = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        serial[0] = UInt8.random(in: 1...0x7f, using: &generator)
        return serial
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        normalizedSerial(bytes.map { String(format: "%02X", $0) }.joined())
    }

    /// Upper case, no colons or spaces, no leading zeros: `openssl x509 -serial`'s form, and
    /// what `tidings certs revoke` accepts however it is written.
    static func normalizedSerial(_ text: String) -> String {
        let digits = text.uppercased().filter { $0 != ":" && $0 != " " }
        let trimmed = digits.drop { $0 == "0" }
        return trimmed.isEmpty && !digits.isEmpty ? "0" : String(trimmed)
    }

    /// Created with its mode (`PrivateFile`): the key is never readable by others, even briefly.
    static func write(_ text: String, to path: String, mode: mode_t) throws {
        do { try PrivateFile.create(path, contents: Array(text.utf8), mode: mode, replacing: true) } catch {
            throw ProviderCertificateError(error.description)
        }
    }

    private func append(_ line: String, to path: String) throws {
        if !FileManager.default.fileExists(atPath: path) { try Self.write("", to: path, mode: 0o644) }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw ProviderCertificateError("cannot write \(path)") }
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(line.utf8))
    }
}

/// A client certificate and its key as `tidings certs create` writes them.
public struct IssuedProviderCertificate: Sendable {
    public let certificate: Certificate
    let privateKey: _RSA.Signing.PrivateKey

    public var serialNumber: String { ProviderCertificateAuthority.hex(certificate.serialNumber.bytes) }

    /// The certificate, then the key (PKCS#8): the file `openssl pkcs12 -nodes` makes from a
    /// `.p12`, which aapns, curl (`--cert`) and most clients take as one file.
    public func pem() throws -> String {
        try certificate.serializeAsPEM().pemString + "\n" + PEMDocument(type: "PRIVATE KEY", derBytes: Array(privateKey.pkcs8DERRepresentation)).pemString + "\n"
    }

    /// The `.p12` (PKCS#12) with the certificate and key, named as Keychain names Apple's.
    public func pkcs12(password: String) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let commonName = certificate.subject.flatMap { $0 }.first { $0.type == .RDNAttributeType.commonName }.flatMap { String($0.value) }
        return try PKCS12.export(certificate: serializer.serializedBytes, privateKeyPKCS8: Array(privateKey.pkcs8DERRepresentation),
                                 password: password, friendlyName: commonName ?? "Tidings provider certificate")
    }
}

/// The revocation list (`provider-ca/revoked`, one serial per line), re-read when the file
/// changes: checked once per connection with a `stat`, so `tidings certs revoke` takes
/// effect for the next connection without a restart.
final class ProviderCertificateRevocations: Sendable {
    private struct Cache { var modified: Date?; var size: Int = -1; var serials: Set<String> = [] }
    private let path: String
    private let cache = Mutex(Cache())

    init(path: String) { self.path = path }

    func contains(_ serial: String) -> Bool {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        let modified = attributes?[.modificationDate] as? Date
        let size = (attributes?[.size] as? NSNumber)?.intValue ?? -1
        return cache.withLock { c in
            if c.modified != modified || c.size != size {
                c = Cache(modified: modified, size: size, serials: Self.read(path))
            }
            return c.serials.contains(serial)
        }
    }

    static func read(_ path: String) -> Set<String> {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return Set(text.split(whereSeparator: \.isNewline).map { ProviderCertificateAuthority.normalizedSerial(String($0)) }.filter { !$0.isEmpty })
    }
}

/// The provider listener's check of a client certificate, once per connection: issued by the
/// gateway's CA (issuer and signature), within its validity at the gateway's clock, not
/// revoked, a push certificate (`UID`, `OU`), and for the gateway's environment.
public final class ProviderCertificateVerifier: Sendable {
    let authority: Certificate
    let environment: APNsEnvironment
    let clock: any WallClock
    let revocations: ProviderCertificateRevocations

    public init(authority: ProviderCertificateAuthority, environment: APNsEnvironment, clock: any WallClock) {
        self.authority = authority.certificate
        self.environment = environment
        self.clock = clock
        self.revocations = ProviderCertificateRevocations(path: authority.revokedPath)
    }

    /// `403 BadCertificate` for a certificate this CA did not issue, one outside its validity,
    /// a revoked one or one without Apple's fields; `403 BadCertificateEnvironment` for one
    /// without the gateway's environment extension.
    public func verify(der: [UInt8]) -> Result<ProviderCertificateIdentity, APNsError> {
        guard let certificate = try? Certificate(derEncoded: der),
              certificate.issuer == authority.subject,
              authority.publicKey.isValidSignature(certificate.signature, for: certificate) else {
            return .failure(APNsError(.badCertificate))
        }
        let now = clock.now
        guard certificate.notValidBefore <= now, now <= certificate.notValidAfter,
              let identity = try? ProviderCertificateIdentity(certificate),
              !revocations.contains(identity.serialNumber) else {
            return .failure(APNsError(.badCertificate))
        }
        guard identity.environments.contains(environment) else { return .failure(APNsError(.badCertificateEnvironment)) }
        return .success(identity)
    }
}
