import Foundation
import TidingsCore

/// Milliseconds since 1970: every gateway timestamp (410 bodies use the same unit).
public typealias EpochMilliseconds = Int64

/// A registered provider signing key (`tidings keys create`).
public struct ProviderKeyRecord: Sendable, Hashable, Codable {
    public var keyID: String
    public var teamID: String
    /// The P-256 public key, X9.63 uncompressed.
    public var publicKey: Data
    /// `nil`: usable in both environments.
    public var environment: APNsEnvironment?
    public var createdAt: EpochMilliseconds

    public init(keyID: String, teamID: String, publicKey: Data, environment: APNsEnvironment?, createdAt: EpochMilliseconds) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
        self.environment = environment
        self.createdAt = createdAt
    }
}

/// What the gateway keeps for a device that is offline.
public struct StoragePolicy: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard rawValue == "apns" || rawValue == "all" else { return nil }
        self.rawValue = rawValue
    }
    private init(_ raw: String) { rawValue = raw }
    /// Apple's: only the most recent notification per app and device.
    public static let apns = StoragePolicy("apns")
    /// Every unexpired notification, coalesced by `apns-collapse-id`.
    public static let all = StoragePolicy("all")
    public var description: String { rawValue }
}

/// An app (a bundle ID) registered to a team (`tidings apps register`).
public struct GatewayAppRecord: Sendable, Hashable, Codable {
    public var bundleID: String
    public var teamID: String
    public var storagePolicy: StoragePolicy
    public var createdAt: EpochMilliseconds

    public init(bundleID: String, teamID: String, storagePolicy: StoragePolicy = .apns, createdAt: EpochMilliseconds) {
        self.bundleID = bundleID
        self.teamID = teamID
        self.storagePolicy = storagePolicy
        self.createdAt = createdAt
    }
}

/// A device known to the gateway by its P-256 device key.
public struct GatewayDeviceRecord: Sendable, Hashable, Codable {
    /// Lower-case hex SHA-256 of the public key's X9.63 representation.
    public var deviceID: String
    public var publicKey: Data
    public var createdAt: EpochMilliseconds

    public init(deviceID: String, publicKey: Data, createdAt: EpochMilliseconds) {
        self.deviceID = deviceID
        self.publicKey = publicKey
        self.createdAt = createdAt
    }
}

/// A device token issued for one (device, app, environment).
public struct DeviceTokenRecord: Sendable, Hashable, Codable {
    public var token: String
    public var deviceID: String
    public var bundleID: String
    public var environment: APNsEnvironment
    public var createdAt: EpochMilliseconds
    /// Set when the app was removed from the device: pushes then get 410 `Unregistered`
    /// with this timestamp.
    public var unregisteredAt: EpochMilliseconds?

    public init(token: String, deviceID: String, bundleID: String, environment: APNsEnvironment, createdAt: EpochMilliseconds, unregisteredAt: EpochMilliseconds? = nil) {
        self.token = token
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.environment = environment
        self.createdAt = createdAt
        self.unregisteredAt = unregisteredAt
    }
}

/// An accepted push on its way to being stored: typed once at the provider edge
/// (`ProviderRequestHead`), stored and sent to the device as these types; strings only where
/// the wire has strings (the apns-id, the token's hex, the bundle ID).
public struct NewPush: Sendable, Hashable {
    public var apnsID: String
    public var token: String
    public var deviceID: String
    public var bundleID: String
    public var topic: Topic
    public var pushType: PushType
    public var priority: Priority
    public var collapseID: CollapseID?
    /// When the push stops being deliverable. Equal to `acceptedAt` for `apns-expiration: 0`
    /// (deliver once if the device is connected, never store).
    public var expiresAt: EpochMilliseconds
    public var payload: [UInt8]
    public var acceptedAt: EpochMilliseconds

    public init(apnsID: String, token: String, deviceID: String, bundleID: String, topic: Topic, pushType: PushType,
                priority: Priority, collapseID: CollapseID?, expiresAt: EpochMilliseconds, payload: [UInt8], acceptedAt: EpochMilliseconds) {
        self.apnsID = apnsID
        self.token = token
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.expiresAt = expiresAt
        self.payload = payload
        self.acceptedAt = acceptedAt
    }
}

/// A durable push: its sequence number orders delivery per device.
public struct StoredPush: Sendable, Hashable {
    public var sequence: Int64
    public var push: NewPush
    public var storedAt: EpochMilliseconds

    public init(sequence: Int64, push: NewPush, storedAt: EpochMilliseconds) {
        self.sequence = sequence
        self.push = push
        self.storedAt = storedAt
    }
}

/// Why a stored push will never be delivered.
public struct DiscardReason: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Replaced by a later push under the storage policy.
    public static let coalesced = DiscardReason(rawValue: "coalesced")
    /// Its expiration passed before the device acknowledged it.
    public static let expired = DiscardReason(rawValue: "expired")
    /// The app was removed from the device.
    public static let unregistered = DiscardReason(rawValue: "unregistered")
    public var description: String { rawValue }
}

/// The later stages a device reports about a delivered push.
public struct DeliveryEvent: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let presented = DeliveryEvent(rawValue: "presented")
    public static let answered = DeliveryEvent(rawValue: "answered")
    public var description: String { rawValue }
}

/// The path of one push: accepted → stored → delivered (→ presented → answered), or
/// discarded with a reason.
public struct PushStatus: Sendable, Hashable, Codable {
    public var sequence: Int64
    public var apnsID: String
    public var bundleID: String
    public var topic: String
    public var pushType: String
    /// The first 8 hex digits of the device token.
    public var tokenPrefix: String
    public var acceptedAt: EpochMilliseconds
    public var storedAt: EpochMilliseconds
    public var expiresAt: EpochMilliseconds
    public var deliveredAt: EpochMilliseconds?
    public var presentedAt: EpochMilliseconds?
    public var answeredAt: EpochMilliseconds?
    public var discardedAt: EpochMilliseconds?
    public var discardReason: DiscardReason?

    public init(sequence: Int64, apnsID: String, bundleID: String, topic: String, pushType: String, tokenPrefix: String,
                acceptedAt: EpochMilliseconds, storedAt: EpochMilliseconds, expiresAt: EpochMilliseconds,
                deliveredAt: EpochMilliseconds? = nil, presentedAt: EpochMilliseconds? = nil, answeredAt: EpochMilliseconds? = nil,
                discardedAt: EpochMilliseconds? = nil, discardReason: DiscardReason? = nil) {
        self.sequence = sequence
        self.apnsID = apnsID
        self.bundleID = bundleID
        self.topic = topic
        self.pushType = pushType
        self.tokenPrefix = tokenPrefix
        self.acceptedAt = acceptedAt
        self.storedAt = storedAt
        self.expiresAt = expiresAt
        self.deliveredAt = deliveredAt
        self.presentedAt = presentedAt
        self.answeredAt = answeredAt
        self.discardedAt = discardedAt
        self.discardReason = discardReason
    }

    /// The furthest stage reached, for display.
    public var stage: String {
        if let discardReason { return "discarded (\(discardReason))" }
        if answeredAt != nil { return "answered" }
        if presentedAt != nil { return "presented" }
        if deliveredAt != nil { return "delivered" }
        return "stored"
    }
}

/// A gateway storage failure.
public struct GatewayStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Kind: Hashable { case duplicate, notFound, backend }
    private let kind: Kind
    public let message: String

    public static func duplicate(_ what: String) -> GatewayStoreError { .init(kind: .duplicate, message: "\(what) already exists") }
    public static func notFound(_ what: String) -> GatewayStoreError { .init(kind: .notFound, message: "\(what) not found") }
    public static func backend(_ message: String) -> GatewayStoreError { .init(kind: .backend, message: message) }

    public var isDuplicate: Bool { kind == .duplicate }
    public var isNotFound: Bool { kind == .notFound }
    public var description: String { message }
}
