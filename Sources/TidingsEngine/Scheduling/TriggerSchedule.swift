import Foundation
import TidingsCore

/// When triggers fire: Apple's rules, as pure functions of dates.
public enum TriggerSchedule {
    /// Apple raises an exception for these; Tidings reports a clear error instead.
    public static func validate(_ trigger: TriggerValue?) throws(NotificationError) {
        switch trigger {
        case .timeInterval(let seconds, let repeats)?:
            guard seconds.isFinite, seconds > 0 else {
                throw NotificationError(.invalidTrigger, "time interval must be greater than 0 (got \(seconds))")
            }
            if repeats, seconds < 60 {
                throw NotificationError(.invalidTrigger, "time interval must be at least 60 if repeating (got \(seconds))")
            }
        case .calendar(let components, _)?:
            // Out-of-range values are refused before Foundation searches for a match: some
            // (a weekdayOrdinal of 6) make its search run forever.
            guard CalendarMatching.isPlausible(components) else {
                throw NotificationError(.invalidTrigger, "the date components contain a value out of range")
            }
        case .location(let region, _)?:
            guard region.radius.isFinite, region.radius > 0,
                  (-90...90).contains(region.latitude), (-180...180).contains(region.longitude) else {
                throw NotificationError(.invalidTrigger, "the region needs a positive radius and a valid coordinate")
            }
            guard region.notifyOnEntry || region.notifyOnExit else {
                throw NotificationError(.invalidTrigger, "the region notifies on neither entry nor exit")
            }
        case .push?:
            throw NotificationError(.invalidTrigger, "UNPushNotificationTrigger is created by the system; apps cannot schedule with it")
        case nil:
            break
        }
    }

    /// Whether a position from a location source can be used: finite, on the globe.
    public static func isValidPosition(latitude: Double, longitude: Double) -> Bool {
        (-90...90).contains(latitude) && (-180...180).contains(longitude)
    }

    /// The first fire date of a request added at `now`; nil for a location trigger, which
    /// waits for a region event. A calendar trigger that never matches throws
    /// `notificationInvalidNoDate`.
    public static func firstFire(_ trigger: TriggerValue?, now: Date, timeZone: TimeZone) throws(NotificationError) -> Date? {
        switch trigger {
        case nil:
            return now
        case .timeInterval(let seconds, _)?:
            return now.addingTimeInterval(seconds)
        case .calendar(let components, _)?:
            guard let date = CalendarMatching.nextDate(after: now, matching: components, defaultTimeZone: timeZone) else {
                throw NotificationError(.notificationInvalidNoDate, "no date matches the trigger's date components")
            }
            return date
        case .location?, .push?:
            return nil
        }
    }

    /// The fire date after a repeating request fired at `fired`, never at or before `now`:
    /// fires missed while the daemon was down collapse into the one that just happened.
    public static func nextFire(_ trigger: TriggerValue, fired: Date, now: Date, timeZone: TimeZone) -> Date? {
        guard trigger.repeats else { return nil }
        switch trigger {
        case .timeInterval(let seconds, _):
            // Validated at `add`; a record from elsewhere (an older store) must still not
            // divide by zero or fire in a loop.
            guard seconds.isFinite, seconds > 0 else { return nil }
            var next = fired.addingTimeInterval(seconds)
            if next <= now {
                let missed = ((now.timeIntervalSince(fired)) / seconds).rounded(.down)
                next = fired.addingTimeInterval((missed + 1) * seconds)
                if next <= now { next = next.addingTimeInterval(seconds) }
            }
            return next > now ? next : nil
        case .calendar(let components, _):
            return CalendarMatching.nextDate(after: max(now, fired), matching: components, defaultTimeZone: timeZone)
        case .location, .push:
            return nil
        }
    }
}

/// Great-circle distance, for circular regions.
public enum Geo {
    /// Metres between two coordinates (haversine on a sphere of the mean Earth radius).
    public static func distance(latitude1: Double, longitude1: Double, latitude2: Double, longitude2: Double) -> Double {
        let r = 6_371_008.8
        let φ1 = latitude1 * .pi / 180, φ2 = latitude2 * .pi / 180
        let dφ = (latitude2 - latitude1) * .pi / 180
        let dλ = (longitude2 - longitude1) * .pi / 180
        let a = sin(dφ / 2) * sin(dφ / 2) + cos(φ1) * cos(φ2) * sin(dλ / 2) * sin(dλ / 2)
        return 2 * r * atan2(a.squareRoot(), (1 - a).squareRoot())
    }

    public static func contains(_ region: CircularRegionValue, latitude: Double, longitude: Double) -> Bool {
        distance(latitude1: region.latitude, longitude1: region.longitude, latitude2: latitude, longitude2: longitude) <= region.radius
    }
}
