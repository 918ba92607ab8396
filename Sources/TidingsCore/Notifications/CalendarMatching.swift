import Foundation

/// The date matching behind `UNCalendarNotificationTrigger`: the next instant whose
/// wall-clock reading matches **only the components that are set**, with Foundation's
/// `Calendar` semantics. Shared by `UNCalendarNotificationTrigger.nextTriggerDate()` and
/// the engine's scheduler.
public enum CalendarMatching {
    /// The components that take part in matching. `calendar` and `timeZone` select how
    /// they are read; everything else is ignored.
    static let matchableComponents: [Calendar.Component] = [
        .era, .year, .month, .day, .hour, .minute, .second, .nanosecond,
        .weekday, .weekdayOrdinal, .quarter, .weekOfMonth, .weekOfYear, .yearForWeekOfYear,
    ]

    /// The first instant strictly after `date` that matches `components`.
    ///
    /// - Calendar: `components.calendar` if set, else the Gregorian calendar.
    /// - Time zone: `components.timeZone` if set (a fixed zone: the trigger fires at that
    ///   instant wherever the device is), else `defaultTimeZone` — the device's zone, so
    ///   the components float with it, as on iOS. The calendar's own time zone is ignored.
    /// - A wall time that does not exist (a daylight-saving gap) matches the next existing
    ///   instant, as Foundation's `.nextTime` policy (02:30 on a spring-forward night where
    ///   02:00 jumps to 03:00 fires at 03:00 that night).
    /// - A wall time that occurs twice (the fall-back overlap) matches its first occurrence
    ///   only.
    /// - A date that does not exist this year (February 29) is skipped until it exists;
    ///   components that can never match (month 2 day 30, hour 25) and dates wholly in the
    ///   past return nil.
    /// - `isLeapMonth`: an instant in a leap month (Chinese calendar), found month by month
    ///   within `leapMonthHorizonYears`; nil past it, and in a calendar without leap months.
    public static func nextDate(after date: Date, matching components: DateComponents, defaultTimeZone: TimeZone) -> Date? {
        var calendar = components.calendar ?? Calendar(identifier: .gregorian)
        calendar.timeZone = components.timeZone ?? defaultTimeZone
        var matching = DateComponents()
        var hasAny = false
        for component in matchableComponents {
            if let value = components.value(for: component) {
                matching.setValue(value, for: component)
                hasAny = true
            }
        }
        if components.isLeapMonth == true { matching.isLeapMonth = true }
        // Nothing to match: Foundation would answer "the next instant"; Apple's trigger
        // has no date in that case.
        guard hasAny, isPlausible(matching) else { return nil }
        if matching.isLeapMonth == true {
            return nextInLeapMonth(after: date, matching: matching, calendar: calendar, horizonYears: leapMonthHorizonYears)
        }
        return search(after: date, matching: matching, calendar: calendar)
    }

    /// How far ahead a leap-month trigger is looked for: 200 years of the calendar's months
    /// (≈ 2,500 steps; ≈ 0.2 s in the Chinese calendar, release, when none matches). Every
    /// leap month of the Chinese calendar but the 12th (next in 2501) comes round within it.
    /// Foundation's own search for `isLeapMonth` never ended for some components (a day
    /// with no month, found by `FuzzTrigger`) and took seconds for others.
    public static let leapMonthHorizonYears = 200

    /// A leap month, found month by month: the first instant after `date` in a leap month
    /// (with the asked month number, if any) that matches the other components. Each step
    /// moves to the next month, or returns, or jumps: the other components' next match after
    /// a leap month's start is where the next candidate can begin. A calendar without leap
    /// months (Gregorian; Hebrew, as Foundation numbers its months) answers nil once the
    /// horizon's months are scanned (milliseconds: no month there is a leap month).
    static func nextInLeapMonth(after date: Date, matching: DateComponents, calendar: Calendar, horizonYears: Int) -> Date? {
        if let wanted = matching.month, let months = calendar.maximumRange(of: .month), !months.contains(wanted) { return nil }
        var others = matching
        others.isLeapMonth = nil
        others.month = nil
        let hasOthers = matchableComponents.contains { others.value(for: $0) != nil }
        guard let horizon = calendar.date(byAdding: .year, value: horizonYears, to: date),
              var start = calendar.dateInterval(of: .month, for: date)?.start else { return nil }
        while start < horizon {
            guard let end = calendar.date(byAdding: .month, value: 1, to: start), end > start else { return nil }
            let fields = calendar.dateComponents([.era, .year, .month, .isLeapMonth], from: start)
            // A leap month in another year or era is passed over here: Foundation's search for
            // a year of the 60-year cycle takes up to a second for each leap month it is asked from.
            guard fields.isLeapMonth == true, matching.month == nil || fields.month == matching.month,
                  matching.year == nil || fields.year == matching.year, matching.era == nil || fields.era == matching.era else {
                start = end
                continue
            }
            guard hasOthers else {
                // Only the month asked for: its first instant (the leap month under way began
                // before `date`, and its start is no answer).
                if start > date { return start }
                start = end
                continue
            }
            // The month's first instant matches too: search from just before it.
            var found = search(after: max(date, start.addingTimeInterval(-0.001)), matching: others, calendar: calendar)
            // A nanosecond component can match in the millisecond before the month.
            if let early = found, early < start {
                found = search(after: early, matching: others, calendar: calendar)
            }
            guard let found, found < horizon else { return nil }
            if found < end { return found }
            // The others' next match lies beyond this month: no leap month before it holds
            // one, so the scan goes on from the month it falls in.
            guard let landing = calendar.dateInterval(of: .month, for: found)?.start, landing >= end else { return nil }
            start = landing
        }
        return nil
    }

    /// Components without a leap month: Foundation's search, its answers checked.
    private static func search(after date: Date, matching: DateComponents, calendar: Calendar) -> Date? {
        // `.nextTime` moves a missing wall time (DST gap) forward to the next existing
        // instant — but it also turns a missing *day* (Feb 29 in a common year) into the
        // start of the next day. Keep its answer only when every date-level component
        // still matches; otherwise search strictly, which skips to a year that has the day.
        //
        // Foundation sometimes answers a date that is not after `date` (year 12 with a
        // nanosecond set gives a date in year 12): such an answer is no answer, or a
        // repeating trigger would fire again at once, without end (found by `FuzzTrigger`).
        if let candidate = calendar.nextDate(after: date, matching: matching, matchingPolicy: .nextTime, repeatedTimePolicy: .first, direction: .forward),
           candidate > date, dateLevelComponentsMatch(candidate, matching, calendar) {
            return candidate
        }
        guard let strict = calendar.nextDate(after: date, matching: matching, matchingPolicy: .strict, repeatedTimePolicy: .first, direction: .forward),
              strict > date else { return nil }
        return strict
    }

    /// Whether `components` can be used for matching at all: every value is in its
    /// component's range (Gregorian ranges, applied to every calendar: they are wide
    /// enough for the Hebrew calendar's 13 months).
    ///
    /// The ranges are also what keeps matching finite: Foundation's search for a
    /// `weekdayOrdinal` of 6 or 7 never ends (in every calendar), so the ordinal is 1–5
    /// (negative ordinals never match in Foundation either); nor does its search for week 0
    /// of a month in the ISO 8601 calendar (in the Gregorian one it never matches), so
    /// `weekOfMonth` is 1–6. Values far outside any range
    /// (`Int.min`, `Int.max`) are refused here, before Foundation sees them. The fuzz
    /// target `FuzzTrigger` checks that no accepted value hangs or traps.
    public static func isPlausible(_ components: DateComponents) -> Bool {
        func inRange(_ value: Int?, _ range: ClosedRange<Int>) -> Bool { value.map(range.contains) ?? true }
        return inRange(components.era, 0...1_000)
            && inRange(components.year, 1...maximumYear)
            && inRange(components.yearForWeekOfYear, 1...maximumYear)
            && inRange(components.month, 1...13)
            && inRange(components.day, 1...31)
            && inRange(components.hour, 0...23)
            && inRange(components.minute, 0...59)
            && inRange(components.second, 0...60)
            && inRange(components.nanosecond, 0...999_999_999)
            && inRange(components.weekday, 1...7)
            && inRange(components.weekdayOrdinal, 1...5)
            && inRange(components.quarter, 1...4)
            && inRange(components.weekOfMonth, 1...6)
            && inRange(components.weekOfYear, 1...53)
    }

    /// The latest year a calendar trigger may name: dates up to it are exact in a `Date`
    /// (a `Double` of seconds) and in Foundation's calendars.
    public static let maximumYear = 100_000

    private static func dateLevelComponentsMatch(_ date: Date, _ matching: DateComponents, _ calendar: Calendar) -> Bool {
        let dateLevel: [Calendar.Component] = [.era, .year, .month, .day, .weekday, .weekdayOrdinal, .quarter, .weekOfMonth, .weekOfYear, .yearForWeekOfYear]
        let actual = calendar.dateComponents(Set(dateLevel), from: date)
        for component in dateLevel {
            if let wanted = matching.value(for: component), actual.value(for: component) != wanted {
                return false
            }
        }
        return true
    }
}
