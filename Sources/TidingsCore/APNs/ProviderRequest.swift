/// The validated head of a `POST /3/device/<token>` request: everything that can be checked
/// from the request headers alone, before authentication and before the body.
public struct ProviderRequestHead: Sendable, Hashable {
    /// The `apns-id` to answer with: the request's, byte for byte, or a generated one.
    public var apnsID: APNsID
    public var deviceToken: DeviceToken
    public var topic: Topic
    /// The bundle ID the topic names (the topic without its push-type suffix).
    public var bundleID: String
    public var pushType: PushType
    public var priority: Priority
    /// `nil`: the header was absent (store per the storage policy, up to 30 days).
    public var expiration: Expiration?
    public var collapseID: CollapseID?
    /// The `authorization` header value, checked later by the connection's
    /// `ProviderAuthenticationStateMachine`.
    public var authorization: String?

    public init(apnsID: APNsID, deviceToken: DeviceToken, topic: Topic, bundleID: String, pushType: PushType,
                priority: Priority, expiration: Expiration?, collapseID: CollapseID?, authorization: String?) {
        self.apnsID = apnsID
        self.deviceToken = deviceToken
        self.topic = topic
        self.bundleID = bundleID
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.authorization = authorization
    }

    /// The largest body this request may carry.
    public var maximumPayloadSize: Int { pushType.maximumPayloadSize }
}

/// A header-validation failure, with the `apns-id` to echo in the error response.
public struct ProviderRequestError: Error, Sendable, Hashable {
    public var error: APNsError
    /// The request's `apns-id` as received (even when it is the invalid header), or a
    /// generated one.
    public var apnsIDEcho: String
}

/// Validates a request head, in the order of the reference's §3.6 (Pushy's mock): repeated
/// headers, `apns-id`, `:method`, `apns-topic`, `apns-collapse-id`, `apns-priority`,
/// `apns-push-type`, `:path`, `apns-expiration`, then the combinations (a background push
/// at priority 10, a topic without its push type's suffix).
///
/// `headers` are the HTTP/2 header fields in order, pseudo-headers included; names are
/// expected in lower case, as HTTP/2 requires.
public enum ProviderRequestValidator {
    public static let devicePathPrefix = "/3/device/"

    public static func validate(headers: some Sequence<(name: String, value: String)>) -> Result<ProviderRequestHead, ProviderRequestError> {
        var method: String?
        var path: String?
        var authorization: String?
        var apnsID: String?
        var pushType: String?
        var expiration: String?
        var priority: String?
        var topic: String?
        var collapseID: String?
        var duplicate = false

        @inline(__always) func set(_ slot: inout String?, _ value: String) {
            if slot != nil { duplicate = true } else { slot = value }
        }
        for (name, value) in headers {
            switch name {
            case ":method": set(&method, value)
            case ":path": set(&path, value)
            case "authorization": set(&authorization, value)
            case "apns-id": set(&apnsID, value)
            case "apns-push-type": set(&pushType, value)
            case "apns-expiration": set(&expiration, value)
            case "apns-priority": set(&priority, value)
            case "apns-topic": set(&topic, value)
            case "apns-collapse-id": set(&collapseID, value)
            default: continue
            }
        }
        let echo = apnsID ?? APNsID.generate().rawValue
        func fail(_ reason: APNsReason) -> Result<ProviderRequestHead, ProviderRequestError> {
            .failure(ProviderRequestError(error: APNsError(reason), apnsIDEcho: echo))
        }
        if duplicate { return fail(.duplicateHeaders) }
        let id: APNsID
        if let apnsID {
            do { id = try APNsID(header: apnsID) } catch { return fail(error.reason) }
        } else {
            id = (try? APNsID(header: echo)) ?? APNsID.generate()
        }
        guard method == "POST" else { return fail(.methodNotAllowed) }
        guard let topic else { return fail(.missingTopic) }
        let parsedTopic: Topic
        do { parsedTopic = try Topic(header: topic) } catch { return fail(error.reason) }
        var parsedCollapseID: CollapseID?
        if let collapseID {
            do { parsedCollapseID = try CollapseID(header: collapseID) } catch { return fail(error.reason) }
        }
        var parsedPriority: Priority?
        if let priority {
            do { parsedPriority = try Priority(header: priority) } catch { return fail(error.reason) }
        }
        let parsedPushType: PushType
        if let pushType {
            guard let type = PushType(rawValue: pushType) else { return fail(.invalidPushType) }
            parsedPushType = type
        } else {
            parsedPushType = PushType.inferred(fromTopic: topic)
        }
        guard let path, path.hasPrefix(devicePathPrefix) else { return fail(.badPath) }
        var tokenPart = path.dropFirst(devicePathPrefix.count)
        if let query = tokenPart.firstIndex(of: "?") { tokenPart = tokenPart[..<query] }
        if tokenPart.contains("/") { return fail(.badPath) }
        let token: DeviceToken
        do { token = try DeviceToken(hex: tokenPart) } catch { return fail(error.reason) }
        var parsedExpiration: Expiration?
        if let expiration {
            do { parsedExpiration = try Expiration(header: expiration) } catch { return fail(error.reason) }
        }
        let resolvedPriority = parsedPriority ?? (parsedPushType == .background ? .considerPower : .immediate)
        guard parsedPushType.allows(resolvedPriority) else { return fail(.badPriority) }
        let bundleID: String
        do { bundleID = try parsedTopic.bundleID(for: parsedPushType) } catch { return fail(error.reason) }
        return .success(ProviderRequestHead(
            apnsID: id, deviceToken: token, topic: parsedTopic, bundleID: bundleID, pushType: parsedPushType,
            priority: resolvedPriority, expiration: parsedExpiration, collapseID: parsedCollapseID,
            authorization: authorization))
    }

    /// The gateway's check of a complete body: the same rules as `validate(body:for:)`,
    /// without building the payload (the body is stored and forwarded as received).
    public static func check(body: some Collection<UInt8>, for head: ProviderRequestHead) -> APNsError? {
        if body.isEmpty { return APNsError(.payloadEmpty) }
        if body.count > head.maximumPayloadSize { return APNsError(.payloadTooLarge) }
        return JSONValue.isObject(body) ? nil : APNsError(.badRequestPayload)
    }

    /// Checks a complete body against the head: empty → `PayloadEmpty`, over the push type's
    /// limit → `PayloadTooLarge`, not a JSON object → `BadRequestPayload`.
    public static func validate(body: some Collection<UInt8>, for head: ProviderRequestHead) -> Result<APNsPayload, APNsError> {
        if body.isEmpty { return .failure(APNsError(.payloadEmpty)) }
        if body.count > head.maximumPayloadSize { return .failure(APNsError(.payloadTooLarge)) }
        do { return .success(try APNsPayload(json: body)) } catch { return .failure(APNsError(error.reason)) }
    }
}
