import Crypto
import Foundation
import TidingsCore
import TidingsSQLite
import TidingsStorage

/// A provider's signing key: the `.p8` file (PKCS#8 PEM, P-256) Apple hands out and
/// `tidings keys create` writes.
public struct ProviderSigningKey: Sendable {
    let key: P256.Signing.PrivateKey

    /// Reads a `.p8` file.
    public init(p8File path: String) throws {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw GatewayRegistryError("cannot read \(path): \(error.localizedDescription)")
        }
        try self.init(pem: text)
    }

    public init(pem: String) throws {
        do { key = try P256.Signing.PrivateKey(pemRepresentation: pem) } catch {
            throw GatewayRegistryError("not a P-256 private key in PEM (PKCS#8) form")
        }
    }

    init(key: P256.Signing.PrivateKey) { self.key = key }

    /// A new key.
    public static func generate() -> ProviderSigningKey { ProviderSigningKey(key: P256.Signing.PrivateKey()) }

    /// The `.p8` text.
    public var pem: String { key.pemRepresentation + "\n" }

    /// The public key, X9.63 (what the gateway stores).
    public var publicKeyX963: Data { key.publicKey.x963Representation }

    /// A provider token (ES256 JWT, raw R‖S signature, numeric `iat`).
    public func token(keyID: String, teamID: String, issuedAt: Date = Date()) throws -> String {
        try ProviderToken.sign(keyID: keyID, teamID: teamID, issuedAt: Int64(issuedAt.timeIntervalSince1970), key: key)
    }
}

/// A registry command failed.
public struct GatewayRegistryError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The team, key and app registry of a gateway's data directory, for the CLI
/// (`tidings keys`, `tidings apps register`, `tidings status`). A running gateway sees the
/// changes on its next lookup.
public struct GatewayRegistry: Sendable {
    public let store: any GatewayStore

    /// Opens `gateway.sqlite` in the data directory (creating it).
    public init(dataDirectory: URL) throws {
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        store = try SQLiteGatewayStore(path: dataDirectory.appendingPathComponent("gateway.sqlite").path)
    }

    public init(store: any GatewayStore) { self.store = store }

    /// Apple's key ids: 10 characters, upper-case letters and digits.
    public static func newKeyID() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<10).map { _ in alphabet.randomElement(using: &generator)! })
    }

    /// Makes a key for a team, registers its public half, and returns the key and its record.
    public func createKey(teamID: String, keyID: String? = nil, environment: APNsEnvironment? = nil,
                          now: Date = Date()) throws -> (ProviderSigningKey, ProviderKeyRecord) {
        guard Self.isValidIdentifier(teamID) else { throw GatewayRegistryError("a team id is letters and digits, like TEAM123456") }
        let id = keyID ?? Self.newKeyID()
        guard Self.isValidIdentifier(id) else { throw GatewayRegistryError("a key id is letters and digits, like ABC123DEFG") }
        let key = ProviderSigningKey.generate()
        let record = ProviderKeyRecord(keyID: id, teamID: teamID, publicKey: key.publicKeyX963, environment: environment,
                                       createdAt: EpochMilliseconds(now.timeIntervalSince1970 * 1000))
        do { try store.addKey(record) } catch { throw GatewayRegistryError(error.description) }
        return (key, record)
    }

    public func keys() throws -> [ProviderKeyRecord] {
        do { return try store.keys() } catch { throw GatewayRegistryError(error.description) }
    }

    /// Removes a key (`tidings keys revoke`); an unknown key id is an error and changes nothing.
    @discardableResult
    public func revokeKey(id: String) throws -> ProviderKeyRecord {
        do { return try store.revokeKey(id: id) } catch {
            throw GatewayRegistryError(error.isNotFound ? "no key \(id) (tidings keys list shows the keys)" : error.description)
        }
    }

    /// Gives a team a bundle ID (registering it again changes the storage policy).
    public func registerApp(bundleID: String, teamID: String, storagePolicy: StoragePolicy = .apns, now: Date = Date()) throws -> GatewayAppRecord {
        guard Topic(rawValue: bundleID) != nil else { throw GatewayRegistryError("\(bundleID) is not a valid bundle id") }
        guard Self.isValidIdentifier(teamID) else { throw GatewayRegistryError("a team id is letters and digits, like TEAM123456") }
        let app = GatewayAppRecord(bundleID: bundleID, teamID: teamID, storagePolicy: storagePolicy,
                                   createdAt: EpochMilliseconds(now.timeIntervalSince1970 * 1000))
        do { try store.registerApp(app) } catch { throw GatewayRegistryError(error.isDuplicate ? "\(bundleID) belongs to another team" : error.description) }
        return app
    }

    public func apps() throws -> [GatewayAppRecord] {
        do { return try store.apps() } catch { throw GatewayRegistryError(error.description) }
    }

    public func status(apnsID: String) throws -> [PushStatus] {
        do { return try store.status(apnsID: apnsID) } catch { throw GatewayRegistryError(error.description) }
    }

    static func isValidIdentifier(_ s: String) -> Bool {
        !s.isEmpty && s.count <= 64 && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }
}
