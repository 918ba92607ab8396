import Crypto
import TidingsCore

let key = P256.Signing.PrivateKey()

/// The provider-token (JWT) parser and the per-connection authentication state machine.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let registered = ProviderKey(keyID: "ABC123DEFG", teamID: "TEAM123456", publicKey: key.publicKey)
    if let token = try? ProviderToken(jwt: text) {
        _ = token.isSigned(by: key.publicKey)
        // The same header and claims signed by the registered key: past the signature check to
        // the age, skew and refresh arithmetic on the claims (a random signature never verifies),
        // at the gateway's clock and at both ends of Int64, then again on the cached path.
        if let signature = try? key.signature(for: token.signingInput) {
            let resigned = "bearer " + String(decoding: token.signingInput, as: UTF8.self) + "."
                + Base64URL.encode(Array(signature.rawRepresentation))
            for now in [1_800_000_000, Int64.min, Int64.max, token.issuedAt] {
                var signed = ProviderAuthenticationStateMachine(configuration: .init(environment: .development))
                let lookup: (String) -> ProviderKey? = { _ in ProviderKey(keyID: token.keyID, teamID: token.teamID, publicKey: key.publicKey) }
                _ = signed.authenticate(authorization: resigned, now: now, lookupKey: lookup)
                _ = signed.authenticate(authorization: resigned, now: now &+ 3601, lookupKey: lookup)
                _ = signed.authenticate(authorization: resigned, now: now &- 3601, lookupKey: lookup)
            }
        }
    }
    var machine = ProviderAuthenticationStateMachine(configuration: .init(environment: .development))
    _ = machine.authenticate(authorization: "bearer " + text, now: 1_800_000_000) { $0 == "ABC123DEFG" ? registered : nil }
    _ = machine.authenticate(authorization: text, now: 1_800_000_000) { _ in registered }
    return 0
}
