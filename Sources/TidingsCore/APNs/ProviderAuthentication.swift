import Crypto

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
public struct ProviderAuthenticationStateMachine: Sendable {
    public struct Configuration: Sendable {
        public var environment: APNsEnvironment
        public var maximumTokenAge: Int64 = 3600
        public var minimumRefreshInterval: Int64 = 20 * 60
        public var allowedClockSkew: Int64 = 60
        public init(environment: APNsEnvironment) { self.environment = environment }
    }

    private struct Current: Sendable {
        var tokenString: String
        var issuedAt: Int64
        var provider: AuthenticatedProvider
        var adoptedAt: Int64
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
    /// `lookupKey` finds a registered key by key id.
    public mutating func authenticate(
        authorization: String?,
        now: Int64,
        lookupKey: (String) -> ProviderKey?
    ) -> Result<AuthenticatedProvider, APNsError> {
        guard let authorization, !authorization.isEmpty else { return .failure(APNsError(.missingProviderToken)) }
        guard authorization.utf8.count >= 7, authorization.prefix(7).lowercased() == "bearer " else {
            return .failure(APNsError(.invalidProviderToken))
        }
        let tokenString = String(authorization.dropFirst(7).drop(while: { $0 == " " }))
        guard !tokenString.isEmpty else { return .failure(APNsError(.missingProviderToken)) }

        if let current, current.tokenString == tokenString {
            if now - current.issuedAt > configuration.maximumTokenAge { return .failure(APNsError(.expiredProviderToken)) }
            return .success(current.provider)
        }

        let token: ProviderToken
        do { token = try ProviderToken(jwt: tokenString) } catch { return .failure(error) }
        guard let key = lookupKey(token.keyID), key.teamID == token.teamID else {
            return .failure(APNsError(.invalidProviderToken))
        }
        if let environment = key.environment, environment != configuration.environment {
            return .failure(APNsError(.badEnvironmentKeyIdInToken))
        }
        guard token.issuedAt <= now + configuration.allowedClockSkew else { return .failure(APNsError(.invalidProviderToken)) }
        guard token.isSigned(by: key.publicKey) else { return .failure(APNsError(.invalidProviderToken)) }
        if now - token.issuedAt > configuration.maximumTokenAge { return .failure(APNsError(.expiredProviderToken)) }
        let provider = AuthenticatedProvider(teamID: key.teamID, keyID: key.keyID)
        if let binding, binding != provider { return .failure(APNsError(.unrelatedKeyIdInToken)) }
        if let current, now - current.adoptedAt < configuration.minimumRefreshInterval {
            return .failure(APNsError(.tooManyProviderTokenUpdates))
        }
        current = Current(tokenString: tokenString, issuedAt: token.issuedAt, provider: provider, adoptedAt: now)
        binding = provider
        return .success(provider)
    }
}
