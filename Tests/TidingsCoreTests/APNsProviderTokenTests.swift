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

    /// `iat` as real clients write it: pyapns-client, apns2 and gobiko-apns send `time.time()`
    /// (`1800000000.4812345`); RFC 7519 allows any JSON number. Whole seconds, rounded down.
    static let numericDates: [(String, Int64)] = [
        ("1800000000.4812345", 1_800_000_000), ("1800000000.999999", 1_800_000_000), ("1800000000.0", 1_800_000_000),
        ("1.8e9", 1_800_000_000), ("1.8E+9", 1_800_000_000), ("18000000000e-1", 1_800_000_000), ("1800000000", 1_800_000_000),
        ("-1.5", -2), ("-0.0", 0), ("0.5", 0),
        // Beyond Int64: clamped, never a trap.
        ("9223372036854775807", Int64.max), ("-9223372036854775808", Int64.min), ("9e18", 9_000_000_000_000_000_000),
        ("-9e18", -9_000_000_000_000_000_000), ("1e300", Int64.max), ("-1e300", Int64.min), ("1e400", Int64.max), ("-1e400", Int64.min),
        ("99999999999999999999", Int64.max), ("-99999999999999999999", Int64.min), ("9223372036854775807.5", Int64.max),
    ]

    @Test(arguments: numericDates)
    func fractionalAndExponentIat(iat: String, seconds: Int64) throws {
        let token = try ProviderToken(jwt: try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAtJSON: iat, key: key))
        #expect(token.issuedAt == seconds)
        #expect(token.isSigned(by: key.publicKey))
    }

    /// A token is the bytes a real client sends through the state machine, fractional `iat` and all.
    @Test func fractionalIatAuthenticatesAndAges() throws {
        var m = machine()
        let jwt = try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAtJSON: "\(now - 3599).75", key: key)
        let provider = AuthenticatedProvider(teamID: "TEAM123456", keyID: "ABC123DEFG")
        #expect(m.authenticate(authorization: "bearer " + jwt, now: now, lookupKey: { _ in registered() }) == .success(provider))
        // iat is now − 3599 (rounded down): one more second is still within the hour, two are not.
        #expect(m.authenticate(authorization: "bearer " + jwt, now: now + 1, lookupKey: { _ in nil }) == .success(provider))
        #expect(m.authenticate(authorization: "bearer " + jwt, now: now + 2, lookupKey: { _ in nil }) == .failure(APNsError(.expiredProviderToken)))
        // Within the skew ahead (a client whose clock runs 59.9 s fast), and past it.
        var ahead = machine()
        let skewed = try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAtJSON: "\(now + 60).9", key: key)
        #expect(ahead.authenticate(authorization: "bearer " + skewed, now: now, lookupKey: { _ in registered() }) == .success(provider))
        var beyond = machine()
        let tooFar = try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAtJSON: "\(now + 61).0", key: key)
        #expect(beyond.authenticate(authorization: "bearer " + tooFar, now: now, lookupKey: { _ in registered() }) == .failure(APNsError(.invalidProviderToken)))
    }

    /// Validly signed tokens with `iat` at and beyond `Int64`'s ends: an answer, never a trap
    /// (−2⁶³ aborted the gateway with an arithmetic overflow in the age check). The gateway's
    /// clock at both ends too, and on the cached (hot) path and the refresh check.
    static let extremeIats: [(String, APNsError?)] = [
        ("-9223372036854775808", APNsError(.expiredProviderToken)),
        ("-9223372036854775807", APNsError(.expiredProviderToken)), ("-9e18", APNsError(.expiredProviderToken)),
        ("-1e300", APNsError(.expiredProviderToken)), ("-9223372036854775808.5", APNsError(.expiredProviderToken)),
        ("9223372036854775807", APNsError(.invalidProviderToken)), ("9e18", APNsError(.invalidProviderToken)),
        ("1e300", APNsError(.invalidProviderToken)), ("1.8e18", APNsError(.invalidProviderToken)),
        ("0", APNsError(.expiredProviderToken)), ("1.8e9", nil), ("18e8", nil),
    ]

    @Test(arguments: extremeIats)
    func extremeIatIsAnAnswerNotATrap(iat: String, expected: APNsError?) throws {
        let jwt = "bearer " + (try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "TEAM123456", issuedAtJSON: iat, key: key))
        var m = machine()
        let result = m.authenticate(authorization: jwt, now: now, lookupKey: { _ in registered() })
        if let expected { #expect(result == .failure(expected)) } else { #expect(result.isSuccess) }
        // The clock at either end of Int64 (a clock gone wrong): still an answer.
        for clock in [Int64.min, Int64.min + 1, -1, Int64.max - 1, Int64.max] {
            var fresh = machine()
            _ = fresh.authenticate(authorization: jwt, now: clock, lookupKey: { _ in registered() })
        }
    }

    /// The cached token and the refresh interval, with a token whose `iat` is `Int64.max − 1`
    /// accepted by a clock at the far end, then asked again at both ends.
    @Test func cachedTokenAndRefreshAtTheEndsOfTheClock() throws {
        let provider = AuthenticatedProvider(teamID: "TEAM123456", keyID: "ABC123DEFG")
        var m = machine()
        let late = try bearer(iat: .max - 1)
        #expect(m.authenticate(authorization: late, now: .max, lookupKey: { _ in registered() }) == .success(provider))
        #expect(m.authenticate(authorization: late, now: .max, lookupKey: { _ in nil }) == .success(provider))
        #expect(m.authenticate(authorization: late, now: .min, lookupKey: { _ in nil }) == .success(provider))
        // Another token at the clock's other end: the refresh interval is measured without a trap.
        #expect(m.authenticate(authorization: try bearer(iat: .min), now: .min, lookupKey: { _ in registered() }) == .failure(APNsError(.tooManyProviderTokenUpdates)))
        var early = machine()
        let first = try bearer(iat: .min)
        #expect(early.authenticate(authorization: first, now: .min, lookupKey: { _ in registered() }) == .success(provider))
        #expect(early.authenticate(authorization: first, now: .max, lookupKey: { _ in nil }) == .failure(APNsError(.expiredProviderToken)))
        #expect(early.authenticate(authorization: try bearer(iat: .max), now: .max, lookupKey: { _ in registered() }) == .success(provider))
    }

    @Test func tokenLengthLimit() throws {
        // Valid tokens padded by an ignored claim: the longest within the limit, the shortest past it.
        func token(padding: Int) throws -> String {
            try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "TEAM123456",
                                   issuedAtJSON: "\(now),\"pad\":\"" + String(repeating: "x", count: padding) + "\"", key: key)
        }
        let limit = ProviderToken.maximumLength
        var padding = (limit - (try token(padding: 0)).utf8.count) * 3 / 4 - 4
        while try token(padding: padding + 1).utf8.count <= limit { padding += 1 }
        let atLimit = try token(padding: padding), past = try token(padding: padding + 1)
        #expect(atLimit.utf8.count >= limit - 1 && atLimit.utf8.count <= limit)
        #expect(try ProviderToken(jwt: atLimit).issuedAt == now)
        #expect(past.utf8.count > limit)
        #expect(throws: APNsError(.invalidProviderToken)) { try ProviderToken(jwt: past) }
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
        let badIats = [#""12a""#, #""1.5""#, #""-5""#, #""""#, #""99999999999999999999""#, "true", "null", "[1]", #"{"s":1}"#]
            .map { Base64URL.encode(Array((#"{"iss":"T","iat":"# + $0 + "}").utf8)) }
        let noIat = Base64URL.encode(Array(#"{"iss":"T"}"#.utf8))
        for bad in ["", "a.b", "a.b.c.d", "!!!.b.c", parts[0] + "." + parts[1] + ".", hs256Header + "." + parts[1] + "." + parts[2],
                    noneHeader + "." + parts[1] + ".", parts[0] + "." + noIat + "." + parts[2],
                    parts[0] + "." + parts[1] + "." + Base64URL.encode([1, 2, 3])] + badIats.map({ parts[0] + "." + $0 + "." + parts[2] }) {
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

    /// The cached token is looked up again when the registry's key generation moves (a key was
    /// revoked or changed somewhere), once per move: a key that is gone or was replaced makes
    /// the same token `InvalidProviderToken`; the same key keeps it valid with no lookup until
    /// the next move.
    @Test func cachedTokenIsRecheckedWhenTheKeyGenerationMoves() throws {
        var m = machine()
        let provider = AuthenticatedProvider(teamID: "TEAM123456", keyID: "ABC123DEFG")
        let token = try bearer(iat: now)
        #expect(m.authenticate(authorization: token, now: now, keyGeneration: 7, lookupKey: { _ in registered() }) == .success(provider))
        // Same generation: no lookup (a failing one proves it).
        #expect(m.authenticate(authorization: token, now: now, keyGeneration: 7, lookupKey: { _ in nil }) == .success(provider))
        // Moved, key still there: looked up once, then cached again at the new generation.
        var lookups: [String] = []
        #expect(m.authenticate(authorization: token, now: now, keyGeneration: 8, lookupKey: { lookups.append($0); return registered() }) == .success(provider))
        #expect(lookups == ["ABC123DEFG"])
        #expect(m.authenticate(authorization: token, now: now, keyGeneration: 8, lookupKey: { _ in nil }) == .success(provider))
        // Moved, key gone (revoked): refused, and refused again while it stays gone.
        #expect(m.authenticate(authorization: token, now: now, keyGeneration: 9, lookupKey: { _ in nil }) == .failure(APNsError(.invalidProviderToken)))
        #expect(m.authenticate(authorization: token, now: now, keyGeneration: 9, lookupKey: { _ in nil }) == .failure(APNsError(.invalidProviderToken)))
        // Registered again under the same id with another key: the old token does not verify.
        let replaced = ProviderKey(keyID: "ABC123DEFG", teamID: "TEAM123456", publicKey: P256.Signing.PrivateKey().publicKey)
        #expect(m.authenticate(authorization: token, now: now, keyGeneration: 10, lookupKey: { _ in replaced }) == .failure(APNsError(.invalidProviderToken)))
        // The original key back: the token is good again.
        #expect(m.authenticate(authorization: token, now: now, keyGeneration: 11, lookupKey: { _ in registered() }) == .success(provider))
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
