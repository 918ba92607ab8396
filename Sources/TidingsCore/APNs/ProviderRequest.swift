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

    public init(error: APNsError, apnsIDEcho: String) {
        self.error = error
        self.apnsIDEcho = apnsIDEcho
    }
}

/// The header fields of one request that the provider API reads, gathered in one pass over
/// the HTTP/2 header list (`add` per field, then `validate()`): the values are kept as they
/// came (no copies), names are matched by length first, and nothing is allocated per field.
public struct ProviderRequestFields: Sendable {
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

    public init() {}

    /// One header field, in the order received; names are expected in lower case, as HTTP/2
    /// requires. Fields the provider API does not read are ignored.
    public mutating func add(name: String, value: String) {
        switch name.utf8.count {
        case 5: if name == ":path" { Self.set(&path, value, &duplicate) }
        case 7:
            if name == ":method" { Self.set(&method, value, &duplicate) } else if name == "apns-id" { Self.set(&apnsID, value, &duplicate) }
        case 10: if name == "apns-topic" { Self.set(&topic, value, &duplicate) }
        case 13:
            if name == "authorization" {
                Self.set(&authorization, value, &duplicate)
            } else if name == "apns-priority" {
                Self.set(&priority, value, &duplicate)
            }
        case 14: if name == "apns-push-type" { Self.set(&pushType, value, &duplicate) }
        case 15: if name == "apns-expiration" { Self.set(&expiration, value, &duplicate) }
        case 16: if name == "apns-collapse-id" { Self.set(&collapseID, value, &duplicate) }
        default: break
        }
    }

    @inline(__always)
    private static func set(_ slot: inout String?, _ value: String, _ duplicate: inout Bool) {
        if slot != nil { duplicate = true } else { slot = value }
    }

    /// Validates the fields, in the order of the reference's §3.6 (Pushy's mock): repeated
    /// headers, `apns-id`, `:method`, `apns-topic`, `apns-collapse-id`, `apns-priority`,
    /// `apns-push-type`, `:path`, `apns-expiration`, then the combinations (a background push
    /// at priority 10, a topic without its push type's suffix). `defaultTopic` stands in for a
    /// missing `apns-topic` (a client certificate's bundle id; token requests have none).
    public func validate(defaultTopic: String? = nil) -> Result<ProviderRequestHead, ProviderRequestError> {
        let generated: APNsID? = apnsID == nil ? APNsID.generate() : nil
        func fail(_ reason: APNsReason) -> Result<ProviderRequestHead, ProviderRequestError> {
            .failure(ProviderRequestError(error: APNsError(reason), apnsIDEcho: apnsID ?? generated!.rawValue))
        }
        if duplicate { return fail(.duplicateHeaders) }
        let id: APNsID
        if let apnsID {
            do { id = try APNsID(header: apnsID) } catch { return fail(error.reason) }
        } else {
            id = generated!
        }
        guard method == "POST" else { return fail(.methodNotAllowed) }
        guard let topic = topic ?? defaultTopic else { return fail(.missingTopic) }
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
        guard let path else { return fail(.badPath) }
        let token: DeviceToken
        switch Self.deviceToken(inPath: path) {
        case .success(let t): token = t
        case .failure(let error): return fail(error.reason)
        }
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

    /// The token in `/3/device/<token>[?query]`, compared byte by byte: another path is
    /// `BadPath`, as is a `/` after the prefix; the token itself as `DeviceToken(hex:)` parses it.
    static func deviceToken(inPath path: String) -> Result<DeviceToken, APNsError> {
        var path = path
        return path.withUTF8 { bytes -> Result<DeviceToken, APNsError> in
            let prefix: StaticString = "/3/device/"
            let prefixCount = prefix.utf8CodeUnitCount
            guard bytes.count >= prefixCount else { return .failure(APNsError(.badPath)) }
            for i in 0..<prefixCount where bytes[i] != prefix.utf8Start[i] { return .failure(APNsError(.badPath)) }
            var end = prefixCount
            while end < bytes.count, bytes[end] != UInt8(ascii: "?") {
                if bytes[end] == UInt8(ascii: "/") { return .failure(APNsError(.badPath)) }
                end += 1
            }
            let token = UnsafeBufferPointer(rebasing: bytes[prefixCount..<end])
            do throws(APNsError) { return .success(try DeviceToken(hexBytes: token)) } catch { return .failure(error) }
        }
    }
}

/// Validates a request head (`ProviderRequestFields.validate()` over `headers`).
///
/// `headers` are the HTTP/2 header fields in order, pseudo-headers included; names are
/// expected in lower case, as HTTP/2 requires.
public enum ProviderRequestValidator {
    public static let devicePathPrefix = "/3/device/"

    public static func validate(headers: some Sequence<(name: String, value: String)>) -> Result<ProviderRequestHead, ProviderRequestError> {
        var fields = ProviderRequestFields()
        for (name, value) in headers { fields.add(name: name, value: value) }
        return fields.validate()
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
