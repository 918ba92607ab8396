import Crypto

/// What the device signs to prove possession of its key.
public enum DeviceChallenge {
    public static let context = Array("tidings-device-challenge-v1\n".utf8)

    public static func signedBytes(nonce: [UInt8]) -> [UInt8] { context + nonce }

    /// The device id: lower-case hex SHA-256 of the public key's X9.63 bytes.
    public static func deviceID(publicKey: P256.Signing.PublicKey) -> String {
        DeviceToken(bytes: SHA256.hash(data: publicKey.x963Representation)).hex
    }

    public static func sign(nonce: [UInt8], with key: P256.Signing.PrivateKey) throws -> [UInt8] {
        Array(try key.signature(for: signedBytes(nonce: nonce)).derRepresentation)
    }

    /// Checks a hello against the nonce; returns the verified key.
    public static func verify(publicKey: [UInt8], signature: [UInt8], nonce: [UInt8]) -> P256.Signing.PublicKey? {
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey) else { return nil }
        let sig: P256.Signing.ECDSASignature?
        if signature.count == 64 {
            sig = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        } else {
            sig = try? P256.Signing.ECDSASignature(derRepresentation: signature)
        }
        guard let sig, key.isValidSignature(sig, for: signedBytes(nonce: nonce)) else { return nil }
        return key
    }
}
