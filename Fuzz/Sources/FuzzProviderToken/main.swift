import Crypto
import TidingsCore

let key = P256.Signing.PrivateKey()

/// The provider-token (JWT) parser and the per-connection authentication state machine.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let token = try? ProviderToken(jwt: text) {
        _ = token.isSigned(by: key.publicKey)
    }
    var machine = ProviderAuthenticationStateMachine(configuration: .init(environment: .development))
    let registered = ProviderKey(keyID: "ABC123DEFG", teamID: "TEAM123456", publicKey: key.publicKey)
    _ = machine.authenticate(authorization: "bearer " + text, now: 1_800_000_000) { $0 == "ABC123DEFG" ? registered : nil }
    _ = machine.authenticate(authorization: text, now: 1_800_000_000) { _ in registered }
    return 0
}
