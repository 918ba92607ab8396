import Crypto
import Foundation
import SwiftASN1
import X509
import _CryptoExtras

/// A PKCS#12 file (`.p12`, RFC 7292) holding one certificate and its private key, as current
/// OpenSSL writes one by default (`openssl pkcs12 -export`): the key in a PKCS#8 shrouded key
/// bag and the certificate in an encrypted safe, both under PBES2 (PBKDF2 with HMAC-SHA-256,
/// AES-256-CBC), and a SHA-256 MAC over the whole with its key from the PKCS#12 KDF.
/// Readable by `openssl pkcs12`, Python cryptography's `pkcs12.load_key_and_certificates`,
/// and everything on OpenSSL 1.1.1 or later. (macOS's Keychain before macOS 15 reads only the
/// legacy RC2/3DES files.)
public enum PKCS12 {
    /// PBKDF2 rounds and MAC iterations: swift-crypto's minimum for PBKDF2 (OpenSSL writes 2048).
    public static let iterations = 210_000

    enum OID {
        static let data: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 1]
        static let encryptedData: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 6]
        static let shroudedKeyBag: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 2]
        static let certBag: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 3]
        static let x509Certificate: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 22, 1]
        static let friendlyName: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 20]
        static let localKeyID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 21]
        static let pbes2: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 5, 13]
        static let pbkdf2: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 5, 12]
        static let hmacWithSHA256: ASN1ObjectIdentifier = [1, 2, 840, 113549, 2, 9]
        static let aes256CBC: ASN1ObjectIdentifier = [2, 16, 840, 1, 101, 3, 4, 1, 42]
        static let sha256: ASN1ObjectIdentifier = [2, 16, 840, 1, 101, 3, 4, 2, 1]
    }

    /// The `.p12` bytes for `certificate` (DER) and `privateKey` (PKCS#8 DER), protected by
    /// `password` (may be empty, as `openssl pkcs12 -passout pass:` writes).
    public static func export(certificate: [UInt8], privateKeyPKCS8: [UInt8], password: String, friendlyName: String,
                              iterations: Int = PKCS12.iterations) throws -> [UInt8] {
        // Both bags carry the certificate's SHA-1 as localKeyID, as OpenSSL does: readers pair
        // the key with its certificate by it.
        let localKeyID = Array(Insecure.SHA1.hash(data: certificate))
        let attributes = { (s: inout DER.Serializer) throws in
            try s.appendConstructedNode(identifier: .set) { set in
                try set.appendConstructedNode(identifier: .sequence) { a in
                    try a.serialize(OID.friendlyName)
                    try a.appendConstructedNode(identifier: .set) { v in try v.serialize(ASN1BMPString(contentBytes: bmp(friendlyName)[...])) }
                }
                try set.appendConstructedNode(identifier: .sequence) { a in
                    try a.serialize(OID.localKeyID)
                    try a.appendConstructedNode(identifier: .set) { v in try v.serialize(ASN1OctetString(contentBytes: localKeyID[...])) }
                }
            }
        }

        // SafeContents with the certificate bag, encrypted as EncryptedData.
        let certificateSafe = try der { s in
            try s.appendConstructedNode(identifier: .sequence) { bags in
                try bags.appendConstructedNode(identifier: .sequence) { bag in
                    try bag.serialize(OID.certBag)
                    try bag.serialize(explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific) { value in
                        try value.appendConstructedNode(identifier: .sequence) { certBag in
                            try certBag.serialize(OID.x509Certificate)
                            try certBag.serialize(ASN1OctetString(contentBytes: certificate[...]), explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific)
                        }
                    }
                    try attributes(&bag)
                }
            }
        }
        let (certificateAlgorithm, encryptedCertificates) = try pbes2Encrypt(certificateSafe, password: password, iterations: iterations)

        // SafeContents with the shrouded key bag (EncryptedPrivateKeyInfo), in plain Data.
        let (keyAlgorithm, encryptedKey) = try pbes2Encrypt(privateKeyPKCS8, password: password, iterations: iterations)
        let keySafe = try der { s in
            try s.appendConstructedNode(identifier: .sequence) { bags in
                try bags.appendConstructedNode(identifier: .sequence) { bag in
                    try bag.serialize(OID.shroudedKeyBag)
                    try bag.serialize(explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific) { value in
                        try value.appendConstructedNode(identifier: .sequence) { info in
                            info.serializeRawBytes(keyAlgorithm)
                            try info.serialize(ASN1OctetString(contentBytes: encryptedKey[...]))
                        }
                    }
                    try attributes(&bag)
                }
            }
        }

        // AuthenticatedSafe: SEQUENCE OF ContentInfo.
        let authenticatedSafe = try der { s in
            try s.appendConstructedNode(identifier: .sequence) { infos in
                try infos.appendConstructedNode(identifier: .sequence) { info in
                    try info.serialize(OID.encryptedData)
                    try info.serialize(explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific) { content in
                        try content.appendConstructedNode(identifier: .sequence) { encryptedData in
                            try encryptedData.serialize(0)  // version
                            try encryptedData.appendConstructedNode(identifier: .sequence) { eci in
                                try eci.serialize(OID.data)
                                eci.serializeRawBytes(certificateAlgorithm)
                                try ASN1OctetString(contentBytes: encryptedCertificates[...])
                                    .serialize(into: &eci, withIdentifier: ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific))
                            }
                        }
                    }
                }
                try infos.appendConstructedNode(identifier: .sequence) { info in
                    try info.serialize(OID.data)
                    try info.serialize(ASN1OctetString(contentBytes: keySafe[...]), explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific)
                }
            }
        }

        let macSalt = randomBytes(16)
        let macKey = kdf(password: password, salt: macSalt, id: 3, iterations: iterations, length: 32)
        let mac = Array(HMAC<SHA256>.authenticationCode(for: authenticatedSafe, using: SymmetricKey(data: macKey)))

        return try der { s in
            try s.appendConstructedNode(identifier: .sequence) { pfx in
                try pfx.serialize(3)
                try pfx.appendConstructedNode(identifier: .sequence) { info in
                    try info.serialize(OID.data)
                    try info.serialize(ASN1OctetString(contentBytes: authenticatedSafe[...]), explicitlyTaggedWithTagNumber: 0, tagClass: .contextSpecific)
                }
                try pfx.appendConstructedNode(identifier: .sequence) { macData in
                    try macData.appendConstructedNode(identifier: .sequence) { digestInfo in
                        try digestInfo.appendConstructedNode(identifier: .sequence) { algorithm in
                            try algorithm.serialize(OID.sha256)
                            try algorithm.serialize(ASN1Null())
                        }
                        try digestInfo.serialize(ASN1OctetString(contentBytes: mac[...]))
                    }
                    try macData.serialize(ASN1OctetString(contentBytes: macSalt[...]))
                    try macData.serialize(iterations)
                }
            }
        }
    }

    /// PBES2 (RFC 8018): PBKDF2-HMAC-SHA-256 with a 16-byte salt, then AES-256-CBC with PKCS#7
    /// padding. Returns the AlgorithmIdentifier (DER) and the ciphertext.
    static func pbes2Encrypt(_ plaintext: [UInt8], password: String, iterations: Int) throws -> (algorithm: [UInt8], ciphertext: [UInt8]) {
        let salt = randomBytes(16)
        let iv = randomBytes(16)
        let key = try KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: salt, using: .sha256, outputByteCount: 32,
                                                     rounds: iterations)
        let ciphertext = try AES._CBC.encrypt(plaintext, using: key, iv: try AES._CBC.IV(ivBytes: iv))
        let algorithm = try der { s in
            try s.appendConstructedNode(identifier: .sequence) { a in
                try a.serialize(OID.pbes2)
                try a.appendConstructedNode(identifier: .sequence) { params in
                    try params.appendConstructedNode(identifier: .sequence) { kdf in
                        try kdf.serialize(OID.pbkdf2)
                        try kdf.appendConstructedNode(identifier: .sequence) { p in
                            try p.serialize(ASN1OctetString(contentBytes: salt[...]))
                            try p.serialize(iterations)
                            try p.serialize(32)  // keyLength
                            try p.appendConstructedNode(identifier: .sequence) { prf in
                                try prf.serialize(OID.hmacWithSHA256)
                                try prf.serialize(ASN1Null())
                            }
                        }
                    }
                    try params.appendConstructedNode(identifier: .sequence) { scheme in
                        try scheme.serialize(OID.aes256CBC)
                        try scheme.serialize(ASN1OctetString(contentBytes: iv[...]))
                    }
                }
            }
        }
        return (algorithm, Array(ciphertext))
    }

    /// The PKCS#12 key derivation (RFC 7292 appendix B.2) with SHA-256 (u = 32, v = 64), the
    /// password as a BMPString with its two-byte terminator. `id` 3 derives a MAC key.
    static func kdf(password: String, salt: [UInt8], id: UInt8, iterations: Int, length: Int) -> [UInt8] {
        let u = 32, v = 64
        let passwordBytes = bmp(password) + [0, 0]
        func fill(_ bytes: [UInt8]) -> [UInt8] {
            guard !bytes.isEmpty else { return [] }
            let count = v * ((bytes.count + v - 1) / v)
            return (0..<count).map { bytes[$0 % bytes.count] }
        }
        var i = fill(salt) + fill(passwordBytes)
        let d = [UInt8](repeating: id, count: v)
        var output: [UInt8] = []
        while output.count < length {
            var a = Array(SHA256.hash(data: d + i))
            for _ in 1..<iterations { a = Array(SHA256.hash(data: a)) }
            output += a
            guard output.count < length else { break }
            // I_j = (I_j + B + 1) mod 2^(v·8) for each v-byte block of I, B = A repeated to v bytes.
            let b = (0..<v).map { a[$0 % u] }
            for blockStart in stride(from: 0, to: i.count, by: v) {
                var carry: UInt16 = 1
                for k in (0..<v).reversed() {
                    let sum = UInt16(i[blockStart + k]) + UInt16(b[k]) + carry
                    i[blockStart + k] = UInt8(sum & 0xff)
                    carry = sum >> 8
                }
            }
        }
        return Array(output.prefix(length))
    }

    /// UTF-16 big-endian, a BMPString's content.
    static func bmp(_ string: String) -> [UInt8] {
        string.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] }
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    static func der(_ body: (inout DER.Serializer) throws -> Void) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try body(&serializer)
        return serializer.serializedBytes
    }
}
