import Foundation

/// A push as the device keeps it between receipt and presentation: what the device channel
/// delivered (`DevicePush`), typed once at receipt — push type, priority, topic and the app it
/// names, collapse id, expiry — with the payload as the provider's bytes (parsed once, by the
/// engine's `RemoteNotificationMapping.plan`).
public struct RemotePush: Sendable, Hashable, Codable {
    public var apnsID: String
    /// The gateway's sequence number (with `apnsID`, the key the device dedupes by).
    public var sequence: Int64

    /// The push's identity on this device (apns-id and the gateway's sequence), as the
    /// delivered notification it became records it.
    public var deliveryKey: String { "\(apnsID)#\(sequence)" }

    /// The apns-id and sequence a `deliveryKey` was made of; nil for anything else.
    public static func push(ofDeliveryKey key: String) -> (apnsID: String, sequence: Int64)? {
        guard let hash = key.lastIndex(of: "#"), let sequence = Int64(key[key.index(after: hash)...]) else { return nil }
        return (String(key[..<hash]), sequence)
    }

    /// The provider's `apns-topic`: the app's bundle ID plus its push type's suffix.
    public let topic: Topic
    /// The app: the topic without its push type's suffix.
    public let bundleIdentifier: String
    public let pushType: PushType
    public var priority: Priority
    /// `apns-collapse-id` (an empty one is none).
    public var collapseID: CollapseID?
    /// Milliseconds since 1970; equal to `acceptedAt` for `apns-expiration: 0` (deliver now, never store).
    public var expiresAt: Int64
    public var acceptedAt: Int64
    /// The provider's JSON body, byte for byte.
    public var payload: [UInt8]

    /// Throws `TopicDisallowed` when the topic lacks the suffix its push type needs.
    public init(apnsID: String, sequence: Int64, topic: Topic, pushType: PushType = .alert, priority: Priority = .immediate,
                collapseID: CollapseID? = nil, expiresAt: Int64, acceptedAt: Int64, payload: [UInt8]) throws(APNsError) {
        self.apnsID = apnsID
        self.sequence = sequence
        self.topic = topic
        self.bundleIdentifier = try topic.bundleID(for: pushType)
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.expiresAt = expiresAt
        self.acceptedAt = acceptedAt
        self.payload = payload
    }

    /// A push for the app `bundleIdentifier` (its topic is the bundle ID plus the push type's
    /// suffix); nil when that is not a valid topic.
    public init?(apnsID: String, sequence: Int64, bundleIdentifier: String, pushType: PushType = .alert, priority: Priority = .immediate,
                 collapseID: CollapseID? = nil, expiresAt: Int64, acceptedAt: Int64, payload: [UInt8]) {
        guard let topic = Topic(rawValue: bundleIdentifier + pushType.topicSuffix),
              let push = try? RemotePush(apnsID: apnsID, sequence: sequence, topic: topic, pushType: pushType, priority: priority,
                                         collapseID: collapseID, expiresAt: expiresAt, acceptedAt: acceptedAt, payload: payload),
              push.bundleIdentifier == bundleIdentifier else { return nil }
        self = push
    }

    /// The push as the device channel delivered it, typed; nil when its topic is malformed
    /// or does not fit its push type, or its collapse id is longer than 64 bytes (the
    /// gateway refuses such pushes, so it never sends one).
    public init?(_ push: DevicePush) {
        var collapseID: CollapseID?
        if let raw = push.collapseID, !raw.isEmpty {
            guard let id = CollapseID(rawValue: raw) else { return nil }
            collapseID = id
        }
        guard let topic = Topic(rawValue: push.topic),
              let typed = try? RemotePush(apnsID: push.apnsID, sequence: push.sequence, topic: topic, pushType: push.pushType,
                                          priority: push.priority, collapseID: collapseID, expiresAt: push.expiresAt,
                                          acceptedAt: push.acceptedAt, payload: push.payload) else { return nil }
        self = typed
    }

    /// The request identifier iOS gives the notification: `apns-collapse-id` when present
    /// (a later push with the same one replaces it), else the `apns-id`.
    public var requestIdentifier: String { collapseID?.rawValue ?? apnsID }

    /// Whether the push's lifetime is over at `now`. A push sent with `apns-expiration: 0`
    /// (expiry = acceptance) is shown when it arrives, as the gateway sends it only then.
    public func isExpired(at now: Date) -> Bool {
        expiresAt > acceptedAt && Int64((now.timeIntervalSince1970 * 1000).rounded(.down)) >= expiresAt
    }
}

/// What the device does with a push: the pure part of the remote pipeline.
public struct RemoteNotificationPlan: Sendable, Hashable {
    /// The notification to deliver (trigger `.push`); nil for a push with nothing to show.
    public var request: NotificationRequestValue?
    /// `mutable-content` with an alert: the app's service extension may change the content first.
    public var wantsServiceExtension: Bool
    /// `content-available`: the app's background callback gets `userInfo`.
    public var wakesApp: Bool
    /// A silent push only: `content-available` without alert, badge or sound.
    public var isBackgroundOnly: Bool
    /// The whole payload, as `userInfo` and the background callback see it.
    public var userInfo: [String: PropertyListValue]
}

/// Payload → notification, as iOS builds it before any service extension runs.
public enum RemoteNotificationMapping {
    /// Plans a push: its request (identifier from `apns-collapse-id` or `apns-id`, content
    /// from every `aps` key with loc keys resolved from `localizedStrings` in the first of
    /// `languages` that has a table, trigger `UNPushNotificationTrigger`) and whether it
    /// wakes the app.
    public static func plan(_ push: RemotePush, localizedStrings: [String: [String: String]] = [:],
                            languages: [String] = preferredLanguages()) throws(APNsPayloadError) -> RemoteNotificationPlan {
        // What `APNsPayload(json:)` and its `notificationContent` make of the payload, parsed
        // once: straight into `userInfo`, with `aps` read from it by the same rules.
        let userInfo = try APNsPayload.userInfo(json: push.payload)
        let aps = APS(payloadMember: userInfo["aps"])
        let table = localizationTable(localizedStrings, languages: languages)
        var content = aps.notificationContent(localize: { table[$0] })
        content.userInfo = userInfo
        let hasAlertContent = content.hasAlertContent
        let showsSomething = hasAlertContent || content.badge != nil || content.sound != nil
        return RemoteNotificationPlan(
            // The content's last use: moved into the request, not copied.
            request: showsSomething ? NotificationRequestValue(identifier: push.requestIdentifier, content: content, trigger: .push) : nil,
            wantsServiceExtension: aps.wantsServiceExtension && hasAlertContent,
            wakesApp: aps.contentAvailable,
            isBackgroundOnly: aps.isBackgroundUpdate,
            userInfo: userInfo)
    }

    /// The strings table for the person's languages: the first of `languages` (`de-CH`, then
    /// `de`) that the app has, else `en`, else `Base`, else none (keys show as themselves).
    public static func localizationTable(_ tables: [String: [String: String]], languages: [String]) -> [String: String] {
        if tables.isEmpty { return [:] }  // most apps: no strings, nothing to look for
        var candidates: [String] = []
        for language in languages {
            let normalized = language.replacingOccurrences(of: "_", with: "-")
            candidates.append(normalized)
            if let base = normalized.split(separator: "-").first { candidates.append(String(base)) }
        }
        candidates += ["en", "Base"]
        for candidate in candidates {
            if let table = tables[candidate] ?? tables.first(where: { $0.key.caseInsensitiveCompare(candidate) == .orderedSame })?.value {
                return table
            }
        }
        return [:]
    }

    /// The person's languages from the POSIX locale variables (`LANGUAGE`, `LC_ALL`,
    /// `LC_MESSAGES`, `LANG`): `de_CH.UTF-8` → `de-CH`.
    public static func preferredLanguages(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        var out: [String] = []
        if let list = environment["LANGUAGE"], !list.isEmpty { out += list.split(separator: ":").map(String.init) }
        for key in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            if let value = environment[key], !value.isEmpty { out.append(value); break }
        }
        return out.compactMap { value in
            let name = value.split(separator: ".").first.map(String.init) ?? value
            guard name != "C", name != "POSIX", !name.isEmpty else { return nil }
            return name.replacingOccurrences(of: "_", with: "-")
        }
    }
}
