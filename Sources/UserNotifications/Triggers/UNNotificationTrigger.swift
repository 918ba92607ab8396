import Foundation
import TidingsCore

/// What makes a notification fire. Use one of the subclasses; the base class cannot be
/// created.
open class UNNotificationTrigger: NSObject, NSCopying, NSSecureCoding {
    /// Whether the notification fires again after it was delivered.
    public let repeats: Bool

    init(repeats: Bool) {
        self.repeats = repeats
        super.init()
    }

    /// The trigger as a value. Subclasses validate here (an invalid trigger makes `add`
    /// fail instead of crashing the app, as Apple does).
    @_spi(Tidings) public func value() throws(UNError) -> TriggerValue {
        throw UNError(.invalidTrigger, "\(Swift.type(of: self)) is not a trigger Tidings can schedule; use UNTimeIntervalNotificationTrigger, UNCalendarNotificationTrigger or UNLocationNotificationTrigger.")
    }

    /// A value that never fails, for archiving.
    var archivableValue: TriggerValue? { try? value() }

    open func copy(with zone: NSZone? = nil) -> Any { self }

    open override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? UNNotificationTrigger, Swift.type(of: other) == Swift.type(of: self) else { return false }
        return other.archivableValue == archivableValue
    }

    open override var hash: Int { archivableValue?.hashValue ?? repeats.hashValue }

    open class var supportsSecureCoding: Bool { true }

    open func encode(with coder: NSCoder) {
        if let value = archivableValue { ArchivedValue.encode(value, with: coder) }
    }

    /// Decodes the archived trigger's state; `UNNotificationTrigger.decoded(from:)` gives
    /// the right subclass.
    public required init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(TriggerValue.self, from: coder) else { return nil }
        repeats = value.repeats
        super.init()
    }
}

/// The trigger of a remote (push) notification. The system creates it; `request.trigger is
/// UNPushNotificationTrigger` tells remote notifications from local ones.
open class UNPushNotificationTrigger: UNNotificationTrigger {
    init(pushRepeats: Bool) {
        super.init(repeats: false)
    }

    public required init?(coder: NSCoder) { super.init(coder: coder) }

    @_spi(Tidings) public override func value() throws(UNError) -> TriggerValue { .push }

    open override var description: String { "<UNPushNotificationTrigger: repeats: NO>" }
}

/// Fires `timeInterval` seconds after the request is added (and every `timeInterval`
/// seconds when repeating).
///
/// Apple raises an exception for an interval ≤ 0, or a repeating interval under 60
/// seconds. Tidings keeps the value and lets `add` fail with `UNError.Code.invalidTrigger`.
open class UNTimeIntervalNotificationTrigger: UNNotificationTrigger {
    /// The interval as given (it does not count down).
    public let timeInterval: TimeInterval

    /// When the daemon will fire it: set on the triggers of pending requests
    /// (`getPendingNotificationRequests`); nil on a trigger the app created.
    let scheduledDate: Date?

    public init(timeInterval: TimeInterval, repeats: Bool) {
        self.timeInterval = timeInterval
        self.scheduledDate = nil
        super.init(repeats: repeats)
    }

    init(timeInterval: TimeInterval, repeats: Bool, scheduledDate: Date?) {
        self.timeInterval = timeInterval
        self.scheduledDate = scheduledDate
        super.init(repeats: repeats)
    }

    public required init?(coder: NSCoder) {
        guard case .timeInterval(let seconds, _)? = ArchivedValue.decode(TriggerValue.self, from: coder) else { return nil }
        timeInterval = seconds
        scheduledDate = nil
        super.init(coder: coder)
    }

    /// Why the interval cannot be scheduled, or nil when it can.
    var invalidReason: String? {
        if !timeInterval.isFinite || timeInterval <= 0 {
            return "time interval must be greater than 0 (got \(timeInterval))"
        }
        if repeats && timeInterval < 60 {
            return "time interval must be at least 60 if repeating (got \(timeInterval))"
        }
        return nil
    }

    /// The date the trigger next fires: for a pending request's trigger, the date the daemon
    /// scheduled; for a new trigger, counted from now; nil for an invalid interval.
    open func nextTriggerDate() -> Date? {
        scheduledDate ?? nextTriggerDate(after: Date())
    }

    /// The date the trigger next fires when counted from `date` (the moment it is added).
    @_spi(Tidings) public func nextTriggerDate(after date: Date) -> Date? {
        invalidReason == nil ? date.addingTimeInterval(timeInterval) : nil
    }

    @_spi(Tidings) public override func value() throws(UNError) -> TriggerValue {
        if let reason = invalidReason {
            throw UNError(.invalidTrigger, "UNTimeIntervalNotificationTrigger: \(reason).")
        }
        return .timeInterval(seconds: timeInterval, repeats: repeats)
    }

    override var archivableValue: TriggerValue? { .timeInterval(seconds: timeInterval, repeats: repeats) }

    open override var description: String {
        "<UNTimeIntervalNotificationTrigger: repeats: \(repeats ? "YES" : "NO"), timeInterval: \(timeInterval)>"
    }
}

/// Fires when the date matches **only the components that are set**: `hour = 8, minute =
/// 30` with `repeats` fires every day at 08:30; `weekday = 2, hour = 8` every Monday at
/// 08:00. Components without a time zone float with the device's time zone.
open class UNCalendarNotificationTrigger: UNNotificationTrigger {
    public let dateComponents: DateComponents

    public init(dateMatching dateComponents: DateComponents, repeats: Bool) {
        self.dateComponents = dateComponents
        super.init(repeats: repeats)
    }

    public required init?(coder: NSCoder) {
        guard case .calendar(let components, _)? = ArchivedValue.decode(TriggerValue.self, from: coder) else { return nil }
        dateComponents = components
        super.init(coder: coder)
    }

    /// The next date that matches, after now, in the device's time zone.
    open func nextTriggerDate() -> Date? {
        nextTriggerDate(after: Date(), timeZone: .current)
    }

    /// The next matching date after `date`, with `timeZone` as the device's zone.
    @_spi(Tidings) public func nextTriggerDate(after date: Date, timeZone: TimeZone) -> Date? {
        CalendarMatching.nextDate(after: date, matching: dateComponents, defaultTimeZone: timeZone)
    }

    @_spi(Tidings) public override func value() throws(UNError) -> TriggerValue {
        guard CalendarMatching.isPlausible(dateComponents) else {
            throw UNError(.invalidTrigger, "UNCalendarNotificationTrigger: the date components \(Self.describe(dateComponents)) contain a value out of range.")
        }
        return .calendar(dateComponents, repeats: repeats)
    }

    override var archivableValue: TriggerValue? { .calendar(dateComponents, repeats: repeats) }

    static func describe(_ c: DateComponents) -> String {
        let fields: [(String, Int?)] = [
            ("era", c.era), ("year", c.year), ("month", c.month), ("day", c.day), ("hour", c.hour),
            ("minute", c.minute), ("second", c.second), ("nanosecond", c.nanosecond), ("weekday", c.weekday),
            ("weekdayOrdinal", c.weekdayOrdinal), ("quarter", c.quarter), ("weekOfMonth", c.weekOfMonth),
            ("weekOfYear", c.weekOfYear), ("yearForWeekOfYear", c.yearForWeekOfYear),
        ]
        var parts = fields.compactMap { name, value in value.map { "\(name): \($0)" } }
        if let zone = c.timeZone { parts.append("timeZone: \(zone.identifier)") }
        return "{" + parts.joined(separator: ", ") + "}"
    }

    open override var description: String {
        "<UNCalendarNotificationTrigger: repeats: \(repeats ? "YES" : "NO"), dateComponents: \(Self.describe(dateComponents))>"
    }
}

/// Fires when the device enters or leaves a region (`notifyOnEntry`, `notifyOnExit`).
/// Only `CLCircularRegion` can be scheduled; a plain `CLRegion` makes `add` fail with
/// `invalidTrigger`.
open class UNLocationNotificationTrigger: UNNotificationTrigger {
    private let storedRegion: CLRegion

    /// A copy of the region given at creation.
    public var region: CLRegion { storedRegion.copy() as! CLRegion }

    public init(region: CLRegion, repeats: Bool) {
        storedRegion = region.copy() as! CLRegion
        super.init(repeats: repeats)
    }

    public required init?(coder: NSCoder) {
        guard case .location(let region, _)? = ArchivedValue.decode(TriggerValue.self, from: coder) else { return nil }
        storedRegion = CLCircularRegion(value: region)
        super.init(coder: coder)
    }

    @_spi(Tidings) public override func value() throws(UNError) -> TriggerValue {
        guard let circle = storedRegion as? CLCircularRegion else {
            throw UNError(.invalidTrigger, "UNLocationNotificationTrigger needs a CLCircularRegion (center, radius, identifier); a plain CLRegion has no geometry.")
        }
        guard CLLocationCoordinate2DIsValid(circle.center) else {
            throw UNError(.invalidTrigger, "UNLocationNotificationTrigger: the region's center (\(circle.center.latitude), \(circle.center.longitude)) is not a valid coordinate.")
        }
        guard circle.radius.isFinite, circle.radius > 0 else {
            throw UNError(.invalidTrigger, "UNLocationNotificationTrigger: the region's radius must be a positive number of metres (got \(circle.radius)).")
        }
        guard circle.notifyOnEntry || circle.notifyOnExit else {
            throw UNError(.invalidTrigger, "UNLocationNotificationTrigger: the region notifies neither on entry nor on exit, so it can never fire.")
        }
        return .location(circle.value, repeats: repeats)
    }

    override var archivableValue: TriggerValue? { try? value() }

    open override var description: String {
        "<UNLocationNotificationTrigger: repeats: \(repeats ? "YES" : "NO"), region: \(storedRegion)>"
    }
}
