import Crypto
import Foundation
import Testing
@testable import TidingsCore

@Suite("APNs provider tokens")
struct APNsProviderTokenTests {
    let key = P256.Signing.PrivateKey()
    let now: Int64 = 1_800_000_000

    func registered(_ env: APNsEnvironment? = nil) -> ProviderKey {
        ProviderKey(keyID: "ABC123DEFG", teamID: "TEAM123456", publicKey: key.publicKey, environment: env)
    }

    func machine() -> ProviderAuthenticationStateMachine {
        ProviderAuthenticationStateMachine(configuration: .init(environment: .development))
    }

    @Test(arguments: [(false, false), (true, false), (false, true), (true, true)])
    func rawAndDERSignaturesNumberAndStringIat(der: Bool, iatString: Bool) throws {
        let jwt = try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAt: now, key: key,
                                         derSignature: der, issuedAtAsString: iatString)
        let token = try ProviderToken(jwt: jwt)
        #expect(token.keyID == "ABC123DEFG")
        #expect(token.teamID == "TEAM123456")
        #expect(token.issuedAt == now)
        #expect(token.isSigned(by: key.publicKey))
        #expect(!token.isSigned(by: P256.Signing.PrivateKey().publicKey))
    }

    @Test func appleSamplePlaceholderParsesButHasNoAlg() {
        // Apple's sample token: header {"kid":…} without alg → InvalidProviderToken.
        let sample = "eyAia2lkIjogIjhZTDNHM1JSWDciIH0.eyAiaXNzIjogIkM4Nk5WOUpYM0QiLCAiaWF0IjogIjE0NTkxNDM1ODA2NTAiIH0.MEYCIQDzqyahmH1rz1s-LFNkylXEa2lZ_aOCX4daxxTZkVEGzwIhALvkClnx5m5eAT6Lxw7LZtEQcH6JENhJTMArwLf3sXwi"
        #expect(throws: APNsError(.invalidProviderToken)) { try ProviderToken(jwt: sample) }
    }

    @Test func malformedTokens() throws {
        let good = try ProviderToken.sign(keyID: "K", teamID: "T", issuedAt: now, key: key)
        let parts = good.split(separator: ".").map(String.init)
        let hs256Header = Base64URL.encode(Array(#"{"alg":"HS256","kid":"K"}"#.utf8))
        let noneHeader = Base64URL.encode(Array(#"{"alg":"none","kid":"K"}"#.utf8))
        let floatIat = Base64URL.encode(Array(#"{"iss":"T","iat":1.5}"#.utf8))
        let badStringIat = Base64URL.encode(Array(#"{"iss":"T","iat":"12a"}"#.utf8))
        for bad in ["", "a.b", "a.b.c.d", "!!!.b.c", parts[0] + "." + parts[1] + ".", hs256Header + "." + parts[1] + "." + parts[2],
                    noneHeader + "." + parts[1] + ".", parts[0] + "." + floatIat + "." + parts[2],
                    parts[0] + "." + badStringIat + "." + parts[2], parts[0] + "." + parts[1] + "." + Base64URL.encode([1, 2, 3])] {
            #expect(throws: APNsError(.invalidProviderToken), "\(bad)") { try ProviderToken(jwt: bad) }
        }
    }

    @Test func base64url() {
        for n in 0..<20 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 37 + 250) }
            #expect(Base64URL.decode(Array(Base64URL.encode(bytes).utf8)) == bytes)
        }
        #expect(Base64URL.decode(Array("a".utf8)) == nil)
        #expect(Base64URL.decode(Array("a=b".utf8)) == nil)
    }

    func bearer(iat: Int64, kid: String = "ABC123DEFG", team: String = "TEAM123456", with k: P256.Signing.PrivateKey? = nil) throws -> String {
        "bearer " + (try ProviderToken.sign(keyID: kid, teamID: team, issuedAt: iat, key: k ?? key))
    }

    @Test func missingAndInvalidAuthorization() throws {
        var m = machine()
        let lookup: (String) -> ProviderKey? = { $0 == "ABC123DEFG" ? registered() : nil }
        #expect(m.authenticate(authorization: nil, now: now, lookupKey: lookup) == .failure(APNsError(.missingProviderToken)))
        #expect(m.authenticate(authorization: "bearer ", now: now, lookupKey: lookup) == .failure(APNsError(.missingProviderToken)))
        #expect(m.authenticate(authorization: "Basic abc", now: now, lookupKey: lookup) == .failure(APNsError(.invalidProviderToken)))
        #expect(m.authenticate(authorization: "bearer\u{0}x", now: now, lookupKey: lookup) == .failure(APNsError(.invalidProviderToken)))
        #expect(m.authenticate(authorization: "BEARER    ", now: now, lookupKey: lookup) == .failure(APNsError(.missingProviderToken)))
        // Unknown key id, wrong team, wrong signing key.
        #expect(m.authenticate(authorization: try bearer(iat: now, kid: "OTHER"), now: now, lookupKey: lookup) == .failure(APNsError(.invalidProviderToken)))
        #expect(m.authenticate(authorization: try bearer(iat: now, team: "OTHERTEAM"), now: now, lookupKey: lookup) == .failure(APNsError(.invalidProviderToken)))
        #expect(m.authenticate(authorization: try bearer(iat: now, with: P256.Signing.PrivateKey()), now: now, lookupKey: lookup) == .failure(APNsError(.invalidProviderToken)))
        // From the future.
        #expect(m.authenticate(authorization: try bearer(iat: now + 3600), now: now, lookupKey: lookup) == .failure(APNsError(.invalidProviderToken)))
        #expect(!m.isAuthenticated)
    }

    @Test func expiryAndCachedTokenAging() throws {
        var m = machine()
        let lookup: (String) -> ProviderKey? = { _ in registered() }
        #expect(m.authenticate(authorization: try bearer(iat: now - 3601), now: now, lookupKey: lookup) == .failure(APNsError(.expiredProviderToken)))
        let token = try bearer(iat: now - 3500)
        #expect(m.authenticate(authorization: token, now: now, lookupKey: lookup) == .success(AuthenticatedProvider(teamID: "TEAM123456", keyID: "ABC123DEFG")))
        // The same token, cached: not verified again (a lookup that fails proves it), but it ages.
        #expect(m.authenticate(authorization: token, now: now + 50, lookupKey: { _ in nil }) == .success(AuthenticatedProvider(teamID: "TEAM123456", keyID: "ABC123DEFG")))
        #expect(m.authenticate(authorization: token, now: now + 101, lookupKey: lookup) == .failure(APNsError(.expiredProviderToken)))
    }

    @Test func schemeInAnyCaseAndSpacesBeforeTheToken() throws {
        var m = machine()
        let jwt = String(try bearer(iat: now).dropFirst(7))
        let provider = AuthenticatedProvider(teamID: "TEAM123456", keyID: "ABC123DEFG")
        #expect(m.authenticate(authorization: "Bearer " + jwt, now: now, lookupKey: { _ in registered() }) == .success(provider))
        // The same token after another spelling of the scheme is the cached one (no lookup).
        #expect(m.authenticate(authorization: "BEARER   " + jwt, now: now, lookupKey: { _ in nil }) == .success(provider))
        // A token that only shares a prefix with the cached one is verified, and fails.
        #expect(m.authenticate(authorization: "bearer " + jwt + "x", now: now, lookupKey: { _ in nil }) == .failure(APNsError(.invalidProviderToken)))
    }

    @Test func refreshLimitAndBinding() throws {
        var m = machine()
        let other = P256.Signing.PrivateKey()
        let keys: [String: ProviderKey] = [
            "ABC123DEFG": registered(),
            "SECONDKEY1": ProviderKey(keyID: "SECONDKEY1", teamID: "TEAM123456", publicKey: other.publicKey),
            "OTHERTEAMK": ProviderKey(keyID: "OTHERTEAMK", teamID: "TEAM999999", publicKey: other.publicKey),
        ]
        let lookup: (String) -> ProviderKey? = { keys[$0] }
        #expect(m.authenticate(authorization: try bearer(iat: now), now: now, lookupKey: lookup).isSuccess)
        // A new token 10 minutes later: too soon.
        #expect(m.authenticate(authorization: try bearer(iat: now + 600), now: now + 600, lookupKey: lookup) == .failure(APNsError(.tooManyProviderTokenUpdates)))
        // 21 minutes later: fine.
        #expect(m.authenticate(authorization: try bearer(iat: now + 1260), now: now + 1260, lookupKey: lookup).isSuccess)
        // Another key of the same team, another team: unrelated to the connection's binding.
        #expect(m.authenticate(authorization: try bearer(iat: now + 2600, kid: "SECONDKEY1", with: other), now: now + 2600, lookupKey: lookup) == .failure(APNsError(.unrelatedKeyIdInToken)))
        #expect(m.authenticate(authorization: try bearer(iat: now + 2600, kid: "OTHERTEAMK", team: "TEAM999999", with: other), now: now + 2600, lookupKey: lookup) == .failure(APNsError(.unrelatedKeyIdInToken)))
        #expect(m.boundProvider?.keyID == "ABC123DEFG")
    }

    @Test func environmentRestrictedKey() throws {
        var m = machine()
        #expect(m.authenticate(authorization: try bearer(iat: now), now: now, lookupKey: { _ in registered(.production) }) == .failure(APNsError(.badEnvironmentKeyIdInToken)))
        #expect(m.authenticate(authorization: try bearer(iat: now), now: now, lookupKey: { _ in registered(.development) }).isSuccess)
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
}
