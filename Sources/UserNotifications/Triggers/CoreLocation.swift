import Foundation
import TidingsCore

// Linux has no CoreLocation. These are the few CoreLocation types that
// `UNLocationNotificationTrigger` needs, with CoreLocation's names and semantics, so code
// written for iOS compiles unchanged.

/// Degrees of latitude or longitude.
public typealias CLLocationDegrees = Double
/// A distance in metres.
public typealias CLLocationDistance = Double

/// A geographic coordinate (WGS 84).
public struct CLLocationCoordinate2D: Sendable, Hashable {
    public var latitude: CLLocationDegrees
    public var longitude: CLLocationDegrees

    public init() {
        latitude = 0
        longitude = 0
    }

    public init(latitude: CLLocationDegrees, longitude: CLLocationDegrees) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// Whether a coordinate is a valid latitude (−90…90) and longitude (−180…180).
public func CLLocationCoordinate2DIsValid(_ coord: CLLocationCoordinate2D) -> Bool {
    coord.latitude.isFinite && coord.longitude.isFinite
        && (-90...90).contains(coord.latitude) && (-180...180).contains(coord.longitude)
}

public func CLLocationCoordinate2DMake(_ latitude: CLLocationDegrees, _ longitude: CLLocationDegrees) -> CLLocationCoordinate2D {
    CLLocationCoordinate2D(latitude: latitude, longitude: longitude)
}

/// A geographic region. Use `CLCircularRegion`; a plain `CLRegion` has no geometry.
open class CLRegion: NSObject, NSCopying, NSSecureCoding {
    /// The region's identifier.
    public let identifier: String
    /// Fire when the device enters the region. Default true.
    open var notifyOnEntry: Bool = true
    /// Fire when the device leaves the region. Default true.
    open var notifyOnExit: Bool = true

    public override init() {
        identifier = ""
        super.init()
    }

    init(identifier: String) {
        self.identifier = identifier
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any {
        let copy = CLRegion(identifier: identifier)
        copy.notifyOnEntry = notifyOnEntry
        copy.notifyOnExit = notifyOnExit
        return copy
    }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? CLRegion, Swift.type(of: other) == Swift.type(of: self) else { return false }
        return other.identifier == identifier && other.notifyOnEntry == notifyOnEntry && other.notifyOnExit == notifyOnExit
    }

    open override var hash: Int { identifier.hashValue }

    open override var description: String { "CLRegion (identifier:'\(identifier)')" }

    open class var supportsSecureCoding: Bool { true }

    open func encode(with coder: NSCoder) {
        coder.encode(identifier as NSString, forKey: "identifier")
        coder.encode(notifyOnEntry, forKey: "notifyOnEntry")
        coder.encode(notifyOnExit, forKey: "notifyOnExit")
    }

    public required init?(coder: NSCoder) {
        identifier = (coder.decodeObject(of: NSString.self, forKey: "identifier") as String?) ?? ""
        super.init()
        notifyOnEntry = coder.decodeBool(forKey: "notifyOnEntry")
        notifyOnExit = coder.decodeBool(forKey: "notifyOnExit")
    }
}

/// A circle on the Earth's surface: a center and a radius in metres.
open class CLCircularRegion: CLRegion {
    public let center: CLLocationCoordinate2D
    public let radius: CLLocationDistance

    public init(center: CLLocationCoordinate2D, radius: CLLocationDistance, identifier: String) {
        self.center = center
        self.radius = radius
        super.init(identifier: identifier)
    }

    convenience init(value: CircularRegionValue) {
        self.init(center: CLLocationCoordinate2D(latitude: value.latitude, longitude: value.longitude), radius: value.radius, identifier: value.identifier)
        notifyOnEntry = value.notifyOnEntry
        notifyOnExit = value.notifyOnExit
    }

    var value: CircularRegionValue {
        CircularRegionValue(identifier: identifier, latitude: center.latitude, longitude: center.longitude, radius: radius, notifyOnEntry: notifyOnEntry, notifyOnExit: notifyOnExit)
    }

    /// Whether `coordinate` lies inside the circle (great-circle distance ≤ radius).
    open func contains(_ coordinate: CLLocationCoordinate2D) -> Bool {
        Self.distance(center, coordinate) <= radius
    }

    /// Great-circle (haversine) distance in metres on a sphere of the Earth's mean radius.
    static func distance(_ a: CLLocationCoordinate2D, _ b: CLLocationCoordinate2D) -> CLLocationDistance {
        let earthRadius = 6_371_008.8
        let toRadians = Double.pi / 180
        let dLat = (b.latitude - a.latitude) * toRadians
        let dLon = (b.longitude - a.longitude) * toRadians
        let h = sin(dLat / 2) * sin(dLat / 2)
            + cos(a.latitude * toRadians) * cos(b.latitude * toRadians) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * earthRadius * asin(min(1, sqrt(h)))
    }

    open override func copy(with zone: NSZone? = nil) -> Any {
        CLCircularRegion(value: value)
    }

    open override func isEqual(_ object: Any?) -> Bool {
        (object as? CLCircularRegion)?.value == value
    }

    open override var hash: Int { value.hashValue }

    open override var description: String {
        "CLCircularRegion (identifier:'\(identifier)', center:<\(center.latitude),\(center.longitude)>, radius:\(radius))"
    }

    open override func encode(with coder: NSCoder) {
        super.encode(with: coder)
        coder.encode(center.latitude, forKey: "latitude")
        coder.encode(center.longitude, forKey: "longitude")
        coder.encode(radius, forKey: "radius")
    }

    public required init?(coder: NSCoder) {
        center = CLLocationCoordinate2D(latitude: coder.decodeDouble(forKey: "latitude"), longitude: coder.decodeDouble(forKey: "longitude"))
        radius = coder.decodeDouble(forKey: "radius")
        super.init(coder: coder)
    }
}
