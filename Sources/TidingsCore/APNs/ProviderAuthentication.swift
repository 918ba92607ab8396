import Crypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A registered provider signing key: which team it belongs to and where it may be used.
public struct ProviderKey: Sendable, Hashable {
    public var keyID: String
    public var teamID: String
    public var publicKey: P256.Signing.PublicKey
    /// `nil`: both environments (Apple's older dual-environment keys).
    public var environment: APNsEnvironment?

    public init(keyID: String, teamID: String, publicKey: P256.Signing.PublicKey, environment: APNsEnvironment? = nil) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
        self.environment = environment
    }

    public static func == (lhs: ProviderKey, rhs: ProviderKey) -> Bool {
        lhs.keyID == rhs.keyID && lhs.teamID == rhs.teamID && lhs.environment == rhs.environment
            && lhs.publicKey.rawRepresentation == rhs.publicKey.rawRepresentation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(keyID)
        hasher.combine(teamID)
    }
}

/// Who a request was authenticated as.
public struct AuthenticatedProvider: Sendable, Hashable {
    public var teamID: String
    public var keyID: String

    public init(teamID: String, keyID: String) {
        self.teamID = teamID
        self.keyID = keyID
    }
}

/// The provider-token rules of one HTTP/2 connection, as a pure state machine.
///
/// - A token string already verified on this connection is only checked for age (one
///   string comparison on the hot path, no signature verification).
/// - A different token is parsed and verified; adopting it less than `minimumRefreshInterval`
///   after the previous one was adopted is `TooManyProviderTokenUpdates`.
/// - The first verified token binds the connection to its team and key: a later token from
///   another key or team is `UnrelatedKeyIdInToken`.
/// - `iat` older than `maximumTokenAge` is `ExpiredProviderToken`; more than
///   `allowedClockSkew` in the future is `InvalidProviderToken`.
///
/// `iat` is the sender's number (any of −2⁶³…2⁶³−1): every sum and difference with it
/// saturates instead of trapping, and the cached token keeps the second it expires after, so
/// that the hot path is one comparison.
public struct ProviderAuthenticationStateMachine: Sendable {
    public struct Configuration: Sendable {
        public var environment: APNsEnvironment
        /// Seconds after `iat` a token is accepted (Apple: one hour); later it is `ExpiredProviderToken`.
        public var maximumTokenAge: Int64 = 3600
        /// Seconds a connection keeps its token before adopting another (Apple: 20 minutes);
        /// a sooner change is `TooManyProviderTokenUpdates`.
        public var minimumRefreshInterval: Int64 = 20 * 60
        /// Seconds `iat` may lie ahead of the gateway's clock; further is `InvalidProviderToken`.
        public var allowedClockSkew: Int64 = 60
        public init(environment: APNsEnvironment) { self.environment = environment }
    }

    private struct Current: Sendable {
        var tokenString: String
        /// The last second (UNIX) the token is accepted in: `iat + maximumTokenAge`, saturated.
        var lastValidSecond: Int64
        var provider: AuthenticatedProvider
        var adoptedAt: Int64
        /// The key that verified the token, and the registry generation it was looked up in.
        var key: ProviderKey
        var keyGeneration: UInt64
    }

    public let configuration: Configuration
    private var current: Current?
    private var binding: AuthenticatedProvider?

    public init(configuration: Configuration) { self.configuration = configuration }

    /// Whether a token has been verified on this connection (before that, APNs allows one stream).
    public var isAuthenticated: Bool { current != nil }

    /// The team the connection is bound to, once one token was verified.
    public var boundProvider: AuthenticatedProvider? { binding }

    /// Checks the `authorization` header of one request at `now` (UNIX seconds).
    /// `lookupKey` finds a registered key by key id. `keyGeneration` is the registry's count of
    /// key removals and invalidations (`GatewayDirectory.keyGeneration`): when it differs from
    /// the one the connection's token was verified in, the token's key is looked up again
    /// (once per change, not per request), and a key that is gone (revoked) or was replaced
    /// makes the same token `InvalidProviderToken`.
    public mutating func authenticate(
        authorization: String?,
        now: Int64,
        keyGeneration: UInt64 = 0,
        lookupKey: (String) -> ProviderKey?
    ) -> Result<AuthenticatedProvider, APNsError> {
        guard let authorization, !authorization.isEmpty else { return .failure(APNsError(.missingProviderToken)) }
        // `bearer ` in any case, then spaces, then the token: compared as bytes, so that the
        // hot path (the connection's current token again) copies nothing.
        let utf8 = authorization.utf8
        guard utf8.count >= 7, utf8.prefix(7).elementsEqual("bearer ".utf8, by: { $0 == $1 || ($1 != UInt8(ascii: " ") && $0 | 0x20 == $1) }) else {
            return .failure(APNsError(.invalidProviderToken))
        }
        let tokenBytes = utf8.dropFirst(7).drop(while: { $0 == UInt8(ascii: " ") })
        guard !tokenBytes.isEmpty else { return .failure(APNsError(.missingProviderToken)) }

        if let current, Self.bytes(of: authorization, from: utf8.distance(from: utf8.startIndex, to: tokenBytes.startIndex),
                                   equal: current.tokenString) {
            if now > current.lastValidSecond { return .failure(APNsError(.expiredProviderToken)) }
            if current.keyGeneration != keyGeneration {
                guard let key = lookupKey(current.provider.keyID), key == current.key else {
                    return .failure(APNsError(.invalidProviderToken))
                }
                self.current?.keyGeneration = keyGeneration
            }
            return .success(current.provider)
        }
        let tokenString = String(Substring(tokenBytes))

        let token: ProviderToken
        do { token = try ProviderToken(jwt: tokenString) } catch { return .failure(error) }
        guard let key = lookupKey(token.keyID), key.teamID == token.teamID else {
            return .failure(APNsError(.invalidProviderToken))
        }
        if let environment = key.environment, environment != configuration.environment {
            return .failure(APNsError(.badEnvironmentKeyIdInToken))
        }
        guard token.issuedAt.saturatingSubtract(now) <= configuration.allowedClockSkew else {
            return .failure(APNsError(.invalidProviderToken))
        }
        guard token.isSigned(by: key.publicKey) else { return .failure(APNsError(.invalidProviderToken)) }
        if now.saturatingSubtract(token.issuedAt) > configuration.maximumTokenAge { return .failure(APNsError(.expiredProviderToken)) }
        let provider = AuthenticatedProvider(teamID: key.teamID, keyID: key.keyID)
        if let binding, binding != provider { return .failure(APNsError(.unrelatedKeyIdInToken)) }
        if let current, now.saturatingSubtract(current.adoptedAt) < configuration.minimumRefreshInterval {
            return .failure(APNsError(.tooManyProviderTokenUpdates))
        }
        current = Current(tokenString: tokenString, lastValidSecond: token.issuedAt.saturatingAdd(configuration.maximumTokenAge),
                          provider: provider, adoptedAt: now, key: key, keyGeneration: keyGeneration)
        binding = provider
        return .success(provider)
    }

    /// Whether the UTF-8 bytes of `string` from `offset` on are those of `other`, compared as
    /// contiguous memory (the generic comparison of two UTF-8 views indexes byte by byte).
    private static func bytes(of string: String, from offset: Int, equal other: String) -> Bool {
        var string = string, other = other
        return string.withUTF8 { a in
            other.withUTF8 { b in
                guard a.count - offset == b.count else { return false }
                guard let aStart = a.baseAddress, let bStart = b.baseAddress else { return b.isEmpty }
                // `memcmp` (`elementsEqual` over the two buffers compared byte by byte: ≈ 1.4 % of
                // the gateway's CPU for a ≈ 200-byte token on every request).
                return memcmp(aStart + offset, bStart, b.count) == 0
            }
        }
    }
}
