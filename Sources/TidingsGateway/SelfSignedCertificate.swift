import Crypto
import Foundation
import SwiftASN1
import TidingsCore
import X509

/// The gateway's self-signed TLS identity: a P-256 key and a certificate for `localhost`,
/// 127.0.0.1 and ::1, valid for ten years, made once in the data directory.
public enum SelfSignedCertificate {
    public struct Files: Sendable, Hashable {
        public var certificatePath: String
        public var privateKeyPath: String
        /// Whether this call created them.
        public var created: Bool
    }

    /// Returns the certificate and key in `directory/tls/`, creating them on first use.
    public static func ensure(in directory: URL, now: Date = Date()) throws -> Files {
        let tls = directory.appendingPathComponent("tls")
        let cert = tls.appendingPathComponent("gateway-cert.pem").path
        let key = tls.appendingPathComponent("gateway-key.pem").path
        let fm = FileManager.default
        if fm.fileExists(atPath: cert), fm.fileExists(atPath: key) {
            return Files(certificatePath: cert, privateKeyPath: key, created: false)
        }
        try fm.createDirectory(at: tls, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let (certPEM, keyPEM) = try make(now: now)
        try write(keyPEM, to: key, mode: 0o600)
        try write(certPEM, to: cert, mode: 0o644)
        return Files(certificatePath: cert, privateKeyPath: key, created: true)
    }

    /// A new certificate and key as PEM strings. Without `commonName`, the name carries the
    /// first bytes of the serial number: every gateway's certificate has a name of its own, so
    /// a device that trusts several (one per gateway node, `--gateway-cert` repeated) finds the
    /// right one by name (trust stores look a self-signed certificate's issuer up by name).
    public static func make(now: Date = Date(), commonName: String? = nil) throws -> (certificate: String, privateKey: String) {
        let privateKey = P256.Signing.PrivateKey()
        var serial = [UInt8]((0..<16).map { _ in UInt8.random(in: 0...255) })
        serial[0] &= 0x7f
        let name = try DistinguishedName {
            OrganizationName("Tidings")
            CommonName(commonName ?? "Tidings gateway (self-signed) " + serial.prefix(6).map { String(format: "%02x", $0) }.joined())
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(bytes: serial),
            publicKey: Certificate.PublicKey(privateKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(10 * 365 * 24 * 3600),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                KeyUsage(digitalSignature: true, keyCertSign: true)
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([
                    .dnsName("localhost"),
                    .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                    .ipAddress(ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])),
                ])
            },
            issuerPrivateKey: Certificate.PrivateKey(privateKey)
        )
        return (try certificate.serializeAsPEM().pemString + "\n", privateKey.pemRepresentation + "\n")
    }

    private static func write(_ text: String, to path: String, mode: mode_t) throws {
        try PrivateFile.create(path, contents: Array(text.utf8), mode: mode, replacing: true)
    }
}
