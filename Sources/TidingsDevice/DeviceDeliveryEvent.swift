/// A later stage of a delivered push that the device reports (delivery inspection).
public struct DeviceDeliveryEvent: RawRepresentable, Sendable, Hashable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let presented = DeviceDeliveryEvent(rawValue: "presented")
    public static let answered = DeviceDeliveryEvent(rawValue: "answered")
}
