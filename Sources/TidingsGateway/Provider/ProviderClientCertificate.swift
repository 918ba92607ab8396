import NIOCore
import NIOSSL
import TidingsCore
import TidingsStorage

/// Certificate-based provider authentication (mutual TLS), the second way to authenticate
/// beside the provider token: a provider connection's client certificate as the handshake
/// left it, verified once per connection (`ProviderCertificateVerifier`).
///
/// As at Apple: a connection with a certificate is authenticated by it alone (the
/// `authorization` header is ignored); its topics are the subject's `UID` and the topics
/// extension, and `apns-topic` may be omitted (the `UID`); a topic it does not name is
/// `400 TopicDisallowed`; a bad certificate is `403 BadCertificate` (or
/// `BadCertificateEnvironment`) on every request of the connection.
struct ProviderClientCertificate {
    let verdict: Result<ProviderCertificateIdentity, APNsError>
    /// The certificate's expiry, checked per request (a connection may outlive it).
    private let notValidAfter: EpochMilliseconds
    /// What every request of an accepted certificate is authenticated as (built once).
    private let provider: AuthenticatedProvider?

    /// The peer certificate of the connection's TLS handler; `nil` when the client sent none
    /// (or the connection has no TLS): the provider token authenticates it.
    static func read(from pipeline: ChannelPipeline.SynchronousOperations, verifier: ProviderCertificateVerifier?) -> ProviderClientCertificate? {
        guard let verifier, let peer = try? pipeline.nioSSL_peerCertificate() else { return nil }
        guard let der = try? peer.toDERBytes() else { return ProviderClientCertificate(verdict: .failure(APNsError(.badCertificate))) }
        return ProviderClientCertificate(verdict: verifier.verify(der: der))
    }

    init(verdict: Result<ProviderCertificateIdentity, APNsError>) {
        self.verdict = verdict
        if case .success(let identity) = verdict {
            notValidAfter = EpochMilliseconds(identity.notValidAfter.timeIntervalSince1970 * 1000)
            provider = AuthenticatedProvider(teamID: identity.teamID, keyID: "certificate " + identity.serialNumber)
        } else {
            notValidAfter = 0
            provider = nil
        }
    }

    /// A request's head on this connection: `apns-topic` defaults to the certificate's bundle
    /// id; a refused certificate's reason comes before any other (Apple refuses such a
    /// connection before it reads a request).
    func validate(_ fields: ProviderRequestFields) -> Result<ProviderRequestHead, ProviderRequestError> {
        switch verdict {
        case .success(let identity):
            return fields.validate(defaultTopic: identity.bundleID)
        case .failure(let refused):
            switch fields.validate() {
            case .success(let head): return .failure(ProviderRequestError(error: refused, apnsIDEcho: head.apnsID.rawValue))
            case .failure(let failure): return .failure(ProviderRequestError(error: refused, apnsIDEcho: failure.apnsIDEcho))
            }
        }
    }

    /// The team and certificate a request is authenticated as, or the certificate's error.
    func authenticate(_ head: ProviderRequestHead, now: EpochMilliseconds) -> Result<AuthenticatedProvider, APNsError> {
        switch verdict {
        case .failure(let error): return .failure(error)
        case .success(let identity):
            guard now <= notValidAfter else { return .failure(APNsError(.badCertificate)) }
            guard identity.topics.contains(head.topic.rawValue), let provider else { return .failure(APNsError(.topicDisallowed)) }
            return .success(provider)
        }
    }
}
