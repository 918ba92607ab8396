import Foundation

/// An APNs error reason: the `reason` string of an error response body, with its HTTP status.
///
/// An open struct so that a reason this version does not know (a newer Apple string, a
/// misspelt one a peer sends) survives a round trip: `APNsReason(rawValue:)` keeps it and
/// `status` falls back to 400. The wire spelling of every documented reason appears once, here.
public struct APNsReason: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    /// The HTTP status code Apple sends with this reason.
    public let status: Int

    public init(rawValue: String) {
        self.rawValue = rawValue
        self.status = APNsReason.known[rawValue]?.status ?? 400
    }

    private init(_ rawValue: String, _ status: Int) {
        self.rawValue = rawValue
        self.status = status
    }

    public var description: String { rawValue }

    /// Whether Apple documents this reason (or it is one of the well-known observed variants).
    public var isKnown: Bool { APNsReason.known[rawValue] != nil }

    /// Apple's description of the reason, for logs and CLI output.
    public var explanation: String { APNsReason.known[rawValue]?.explanation ?? "Unknown reason." }

    // 400
    public static let badCollapseId = APNsReason("BadCollapseId", 400)
    public static let badDeviceToken = APNsReason("BadDeviceToken", 400)
    public static let badExpirationDate = APNsReason("BadExpirationDate", 400)
    public static let badMessageId = APNsReason("BadMessageId", 400)
    public static let badPriority = APNsReason("BadPriority", 400)
    public static let badTopic = APNsReason("BadTopic", 400)
    public static let deviceTokenNotForTopic = APNsReason("DeviceTokenNotForTopic", 400)
    public static let duplicateHeaders = APNsReason("DuplicateHeaders", 400)
    public static let idleTimeout = APNsReason("IdleTimeout", 400)
    public static let invalidPushType = APNsReason("InvalidPushType", 400)
    public static let missingDeviceToken = APNsReason("MissingDeviceToken", 400)
    public static let missingTopic = APNsReason("MissingTopic", 400)
    public static let payloadEmpty = APNsReason("PayloadEmpty", 400)
    public static let topicDisallowed = APNsReason("TopicDisallowed", 400)
    /// Not in Apple's device-API table: the broadcast API's reason for an unparseable JSON
    /// body. Apple does not document what the device API answers to a non-JSON body.
    public static let badRequestPayload = APNsReason("BadRequestPayload", 400)
    // 403
    public static let badCertificate = APNsReason("BadCertificate", 403)
    public static let badCertificateEnvironment = APNsReason("BadCertificateEnvironment", 403)
    public static let expiredProviderToken = APNsReason("ExpiredProviderToken", 403)
    public static let forbidden = APNsReason("Forbidden", 403)
    public static let invalidProviderToken = APNsReason("InvalidProviderToken", 403)
    public static let missingProviderToken = APNsReason("MissingProviderToken", 403)
    public static let unrelatedKeyIdInToken = APNsReason("UnrelatedKeyIdInToken", 403)
    public static let badEnvironmentKeyIdInToken = APNsReason("BadEnvironmentKeyIdInToken", 403)
    /// The observed (undocumented) spelling of `BadEnvironmentKeyIdInToken`.
    public static let badEnvironmentKeyInToken = APNsReason("BadEnvironmentKeyInToken", 403)
    // 404, 405
    public static let badPath = APNsReason("BadPath", 404)
    public static let methodNotAllowed = APNsReason("MethodNotAllowed", 405)
    // 410
    public static let expiredToken = APNsReason("ExpiredToken", 410)
    public static let unregistered = APNsReason("Unregistered", 410)
    // 413
    public static let payloadTooLarge = APNsReason("PayloadTooLarge", 413)
    // 429
    public static let tooManyProviderTokenUpdates = APNsReason("TooManyProviderTokenUpdates", 429)
    public static let tooManyRequests = APNsReason("TooManyRequests", 429)
    // 5xx
    public static let internalServerError = APNsReason("InternalServerError", 500)
    public static let serviceUnavailable = APNsReason("ServiceUnavailable", 503)
    public static let shutdown = APNsReason("Shutdown", 503)

    /// Every reason this module knows, in Apple's table order (plus the observed extras).
    public static let allKnown: [APNsReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed, .badRequestPayload,
        .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden,
        .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken,
        .badEnvironmentKeyInToken, .badPath, .methodNotAllowed, .expiredToken, .unregistered,
        .payloadTooLarge, .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError,
        .serviceUnavailable, .shutdown,
    ]

    private static let known: [String: (status: Int, explanation: String)] = {
        let explanations: [String: String] = [
            "BadCollapseId": "The collapse identifier exceeds the maximum allowed size.",
            "BadDeviceToken": "The specified device token is invalid. Verify that the request contains a valid token and that the token matches the environment.",
            "BadExpirationDate": "The apns-expiration value is invalid.",
            "BadMessageId": "The apns-id value is invalid.",
            "BadPriority": "The apns-priority value is invalid.",
            "BadTopic": "The apns-topic value is invalid.",
            "DeviceTokenNotForTopic": "The device token doesn't match the specified topic.",
            "DuplicateHeaders": "One or more headers are repeated.",
            "IdleTimeout": "Idle timeout.",
            "InvalidPushType": "The apns-push-type value is invalid.",
            "MissingDeviceToken": "The device token isn't specified in the request :path.",
            "MissingTopic": "The apns-topic header of the request isn't specified and is required.",
            "PayloadEmpty": "The message payload is empty.",
            "TopicDisallowed": "Pushing to this topic is not allowed.",
            "BadRequestPayload": "The JSON request payload is unparseable.",
            "BadCertificate": "The certificate is invalid.",
            "BadCertificateEnvironment": "The client certificate doesn't match the environment.",
            "ExpiredProviderToken": "The provider token is stale and a new token should be generated.",
            "Forbidden": "The specified action is not allowed.",
            "InvalidProviderToken": "The provider token is not valid, or the token signature can't be verified.",
            "MissingProviderToken": "No provider certificate was used to connect to APNs, and the authorization header is missing or no provider token is specified.",
            "UnrelatedKeyIdInToken": "The key ID in the provider token isn't related to the key ID of the token used in the first push of this connection.",
            "BadEnvironmentKeyIdInToken": "The key ID in the provider token doesn't match the environment.",
            "BadEnvironmentKeyInToken": "The key in the provider token doesn't match the environment.",
            "BadPath": "The request contained an invalid :path value.",
            "MethodNotAllowed": "The specified :method value isn't POST.",
            "ExpiredToken": "The device token has expired.",
            "Unregistered": "The device token is inactive for the specified topic.",
            "PayloadTooLarge": "The message payload is too large.",
            "TooManyProviderTokenUpdates": "The provider's authentication token is being updated too often.",
            "TooManyRequests": "Too many requests were made consecutively to the same device token.",
            "InternalServerError": "An internal server error occurred.",
            "ServiceUnavailable": "The service is unavailable.",
            "Shutdown": "The APNs server is shutting down.",
        ]
        var table: [String: (Int, String)] = [:]
        for reason in allKnown { table[reason.rawValue] = (reason.status, explanations[reason.rawValue] ?? "") }
        return table
    }()
}

/// An APNs error response: a reason plus, for 410, the millisecond timestamp at which the
/// token stopped being valid for the topic.
public struct APNsError: Error, Sendable, Hashable, CustomStringConvertible {
    public var reason: APNsReason
    /// Milliseconds since 1970, sent only with 410.
    public var timestamp: Int64?

    public init(_ reason: APNsReason, timestamp: Int64? = nil) {
        self.reason = reason
        self.timestamp = timestamp
    }

    public var status: Int { reason.status }

    /// The response body: `{"reason":"…"}` or `{"reason":"…","timestamp":123}`, compact and
    /// small (APNSwift reads at most 1024 bytes).
    public var jsonBody: String {
        var body = "{\"reason\":\"" + APNsError.escape(reason.rawValue) + "\""
        if let timestamp { body += ",\"timestamp\":\(timestamp)" }
        return body + "}"
    }

    public var description: String {
        if let timestamp { return "\(status) \(reason.rawValue) (timestamp \(timestamp))" }
        return "\(status) \(reason.rawValue)"
    }

    static func escape(_ string: String) -> String {
        var out = ""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
