import Foundation
import Testing
@testable import TidingsCore

@Suite("CalendarMatching.nextDate")
struct CalendarMatchingTests {
    static let newYork = TimeZone(identifier: "America/New_York")!
    static let berlin = TimeZone(identifier: "Europe/Berlin")!
    static let tokyo = TimeZone(identifier: "Asia/Tokyo")!
    static let utc = TimeZone(identifier: "UTC")!

    /// An instant from a wall-clock reading in `zone`.
    static func date(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0, _ second: Int = 0, in zone: TimeZone) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        return calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))!
    }

    static func wall(_ date: Date?, in zone: TimeZone) -> String {
        guard let date else { return "nil" }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let offset = zone.secondsFromGMT(for: date) / 3600
        return String(format: "%04d-%02d-%02d %02d:%02d:%02d %+d", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!, offset)
    }

    func next(_ components: DateComponents, after date: Date, zone: TimeZone = newYork) -> String {
        Self.wall(CalendarMatching.nextDate(after: date, matching: components, defaultTimeZone: zone), in: components.timeZone ?? zone)
    }

    @Test func dailyAtAWallTime() {
        let start = Self.date(2026, 11, 22, 9, 0, in: Self.newYork)
        #expect(next(DateComponents(hour: 8, minute: 30), after: start) == "2026-11-23 08:30:00 -5")
        #expect(next(DateComponents(hour: 9, minute: 30), after: start) == "2026-11-22 09:30:00 -5")
    }

    @Test func strictlyAfterTheGivenDate() {
        let exactly = Self.date(2026, 11, 22, 8, 30, in: Self.newYork)
        #expect(next(DateComponents(hour: 8, minute: 30), after: exactly) == "2026-11-23 08:30:00 -5")
    }

    @Test func weekdayAndHourMeansEveryMondayMorning() {
        // 2026-11-22 is a Sunday.
        let sunday = Self.date(2026, 11, 22, 12, in: Self.newYork)
        #expect(next(DateComponents(hour: 8, weekday: 2), after: sunday) == "2026-11-23 08:00:00 -5")
        let mondayLater = Self.date(2026, 11, 23, 9, in: Self.newYork)
        #expect(next(DateComponents(hour: 8, weekday: 2), after: mondayLater) == "2026-11-30 08:00:00 -5")
    }

    @Test func unsetLowerComponentsAreZero() {
        let start = Self.date(2026, 11, 22, 9, 15, 42, in: Self.newYork)
        #expect(next(DateComponents(hour: 10), after: start) == "2026-11-22 10:00:00 -5")
        #expect(next(DateComponents(second: 0), after: start) == "2026-11-22 09:16:00 -5")
    }

    @Test func fullDateFiresOnceAndPastDatesNever() {
        let start = Self.date(2026, 11, 22, in: Self.newYork)
        #expect(next(DateComponents(year: 2027, month: 1, day: 1, hour: 0), after: start) == "2027-01-01 00:00:00 -5")
        #expect(CalendarMatching.nextDate(after: start, matching: DateComponents(year: 2020, month: 1, day: 1), defaultTimeZone: Self.newYork) == nil)
    }

    @Test func springForwardGapFiresAtTheNextValidInstant() {
        // 2026-03-08 in New York: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
        let before = Self.date(2026, 3, 7, 12, in: Self.newYork)
        #expect(next(DateComponents(hour: 2, minute: 30), after: before) == "2026-03-08 03:00:00 -4")
        // The day before the gap still fires at 02:30.
        let earlier = Self.date(2026, 3, 6, 12, in: Self.newYork)
        #expect(next(DateComponents(hour: 2, minute: 30), after: earlier) == "2026-03-07 02:30:00 -5")
        // And the day after.
        let after = Self.date(2026, 3, 8, 12, in: Self.newYork)
        #expect(next(DateComponents(hour: 2, minute: 30), after: after) == "2026-03-09 02:30:00 -4")
    }

    @Test func fallBackOverlapFiresOnTheFirstOccurrenceOnly() {
        // 2026-11-01 in New York: 01:00–02:00 happens twice (EDT, then EST).
        let before = Self.date(2026, 10, 31, 12, in: Self.newYork)
        let first = CalendarMatching.nextDate(after: before, matching: DateComponents(hour: 1, minute: 30), defaultTimeZone: Self.newYork)
        #expect(Self.wall(first, in: Self.newYork) == "2026-11-01 01:30:00 -4")
        // A repeating trigger asks again after it fired: the EST 01:30 an hour later is skipped.
        let second = CalendarMatching.nextDate(after: first!, matching: DateComponents(hour: 1, minute: 30), defaultTimeZone: Self.newYork)
        #expect(Self.wall(second, in: Self.newYork) == "2026-11-02 01:30:00 -5")
        #expect(second!.timeIntervalSince(first!) == 25 * 3600)
    }

    @Test func february29thOnlyInLeapYears() {
        let start = Self.date(2026, 1, 1, in: Self.utc)
        #expect(next(DateComponents(month: 2, day: 29, hour: 9), after: start, zone: Self.utc) == "2028-02-29 09:00:00 +0")
        let afterLeapDay = Self.date(2028, 3, 1, in: Self.utc)
        #expect(next(DateComponents(month: 2, day: 29, hour: 9), after: afterLeapDay, zone: Self.utc) == "2032-02-29 09:00:00 +0")
        // A year without February 29 never matches.
        #expect(CalendarMatching.nextDate(after: start, matching: DateComponents(year: 2027, month: 2, day: 29), defaultTimeZone: Self.utc) == nil)
        // The 31st skips short months.
        let april = Self.date(2026, 4, 1, in: Self.utc)
        #expect(next(DateComponents(day: 31, hour: 12), after: april, zone: Self.utc) == "2026-05-31 12:00:00 +0")
    }

    @Test func impossibleComponentsNeverMatch() {
        let start = Self.date(2026, 1, 1, in: Self.utc)
        #expect(CalendarMatching.nextDate(after: start, matching: DateComponents(month: 2, day: 30), defaultTimeZone: Self.utc) == nil)
        #expect(CalendarMatching.nextDate(after: start, matching: DateComponents(hour: 25), defaultTimeZone: Self.utc) == nil)
        #expect(CalendarMatching.nextDate(after: start, matching: DateComponents(month: 14), defaultTimeZone: Self.utc) == nil)
        #expect(CalendarMatching.nextDate(after: start, matching: DateComponents(), defaultTimeZone: Self.utc) == nil)
        #expect(!CalendarMatching.isPlausible(DateComponents(minute: 60)))
        #expect(CalendarMatching.isPlausible(DateComponents(hour: 23, minute: 59, weekday: 7)))
    }

    @Test func componentsFloatWithTheDeviceTimeZone() {
        let instant = Self.date(2026, 11, 21, 12, in: Self.utc)
        let nineAM = DateComponents(hour: 9)
        let inTokyo = CalendarMatching.nextDate(after: instant, matching: nineAM, defaultTimeZone: Self.tokyo)
        let inBerlin = CalendarMatching.nextDate(after: instant, matching: nineAM, defaultTimeZone: Self.berlin)
        #expect(Self.wall(inTokyo, in: Self.tokyo) == "2026-11-22 09:00:00 +9")
        #expect(Self.wall(inBerlin, in: Self.berlin) == "2026-11-22 09:00:00 +1")
        #expect(inTokyo != inBerlin)
    }

    @Test func componentsOwnTimeZoneWinsOverTheDevices() {
        let instant = Self.date(2026, 11, 21, 12, in: Self.utc)
        var components = DateComponents(hour: 9)
        components.timeZone = Self.tokyo
        let a = CalendarMatching.nextDate(after: instant, matching: components, defaultTimeZone: Self.berlin)
        let b = CalendarMatching.nextDate(after: instant, matching: components, defaultTimeZone: Self.newYork)
        #expect(a == b)
        #expect(Self.wall(a, in: Self.tokyo) == "2026-11-22 09:00:00 +9")
    }

    @Test func componentsOwnCalendarIsUsedButNotItsTimeZone() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = Self.tokyo
        var components = DateComponents(hour: 9)
        components.calendar = calendar
        let instant = Self.date(2026, 11, 21, 12, in: Self.utc)
        let result = CalendarMatching.nextDate(after: instant, matching: components, defaultTimeZone: Self.berlin)
        #expect(Self.wall(result, in: Self.berlin) == "2026-11-22 09:00:00 +1")

        // A non-Gregorian calendar reads the components in its own terms: day 1 of a
        // Hebrew month.
        var hebrew = DateComponents(day: 1, hour: 12)
        hebrew.calendar = Calendar(identifier: .hebrew)
        let rosh = CalendarMatching.nextDate(after: instant, matching: hebrew, defaultTimeZone: Self.utc)
        var hebrewCalendar = Calendar(identifier: .hebrew)
        hebrewCalendar.timeZone = Self.utc
        #expect(rosh.map { hebrewCalendar.component(.day, from: $0) } == 1)
    }

    @Test func repeatingSequenceIsMonotonic() {
        var date = Self.date(2026, 1, 1, in: Self.newYork)
        var fires: [Date] = []
        for _ in 0..<400 {
            guard let nextDate = CalendarMatching.nextDate(after: date, matching: DateComponents(hour: 2, minute: 30), defaultTimeZone: Self.newYork) else { break }
            fires.append(nextDate)
            date = nextDate
        }
        #expect(fires.count == 400)
        // One fire per calendar day, including the spring-forward and fall-back days.
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = Self.newYork
        let days = Set(fires.map { calendar.startOfDay(for: $0) })
        #expect(days.count == 400)
    }

    /// Leap months (Chinese calendar), searched month by month: Foundation's own search for a
    /// day in any leap month ran 9 s and answered nil (`FuzzTrigger`, CI of 52e8e99).
    @Test func leapMonthsOfTheChineseCalendar() {
        let start = Self.date(2026, 11, 26, in: Self.utc)
        func chinese(month: Int? = nil, day: Int? = nil, minute: Int? = nil, leap: Bool) -> DateComponents {
            var components = DateComponents(month: month, day: day, minute: minute)
            components.calendar = Calendar(identifier: .chinese)
            if leap { components.isLeapMonth = true }
            return components
        }
        // Day 4 of the regular fifth month, then of the leap fifth month of 2028 (the month
        // after the regular one), as Foundation answers when a month is named.
        #expect(next(chinese(month: 5, day: 4, leap: false), after: start, zone: Self.utc) == "2027-06-08 00:00:00 +0")
        #expect(next(chinese(month: 5, day: 4, leap: true), after: start, zone: Self.utc) == "2028-06-26 00:00:00 +0")
        #expect(next(chinese(month: 5, leap: true), after: start, zone: Self.utc) == "2028-06-23 00:00:00 +0")
        // No month: day 4 of each leap month in turn (2028's fifth, 2031's third, 2033's eleventh).
        var date = start
        var fires: [String] = []
        for _ in 0..<3 {
            guard let fire = CalendarMatching.nextDate(after: date, matching: chinese(day: 4, minute: 2, leap: true), defaultTimeZone: Self.utc) else { break }
            fires.append(Self.wall(fire, in: Self.utc))
            date = fire
        }
        #expect(fires == ["2028-06-26 00:02:00 +0", "2031-04-25 00:02:00 +0", "2033-12-25 00:02:00 +0"])
        // A year of the 60-year cycle: 2028 is its 45th, and has a leap month; its 46th has none.
        var cycleYear = chinese(day: 4, leap: true)
        cycleYear.year = 45
        #expect(next(cycleYear, after: start, zone: Self.utc) == "2028-06-26 00:00:00 +0")
        cycleYear.year = 46
        #expect(CalendarMatching.nextDate(after: start, matching: cycleYear, defaultTimeZone: Self.utc) == nil)
        // The rarest within the horizon: a leap first month, in 2148; a leap twelfth month
        // (next in 2501) lies beyond it.
        let first = CalendarMatching.nextDate(after: start, matching: chinese(month: 1, day: 4, leap: true), defaultTimeZone: Self.utc)
        #expect(Self.wall(first, in: Self.utc) == "2148-02-23 00:00:00 +0")
        #expect(CalendarMatching.nextDate(after: start, matching: chinese(month: 12, leap: true), defaultTimeZone: Self.utc) == nil)
        // Months that are never leap: no thirteenth month in this calendar, none in the Gregorian one.
        #expect(CalendarMatching.nextDate(after: start, matching: chinese(month: 13, leap: true), defaultTimeZone: Self.utc) == nil)
        var gregorian = DateComponents(day: 4)
        gregorian.isLeapMonth = true
        #expect(CalendarMatching.nextDate(after: start, matching: gregorian, defaultTimeZone: Self.utc) == nil)
    }

    /// The search's bound: a leap month past the horizon is no date.
    @Test func leapMonthSearchStopsAtItsHorizon() {
        var calendar = Calendar(identifier: .chinese)
        calendar.timeZone = Self.utc
        var components = DateComponents(day: 4)
        components.isLeapMonth = true
        let start = Self.date(2026, 11, 26, in: Self.utc)
        // The first leap month from here begins in June 2028.
        #expect(CalendarMatching.nextInLeapMonth(after: start, matching: components, calendar: calendar, horizonYears: 1) == nil)
        let within = CalendarMatching.nextInLeapMonth(after: start, matching: components, calendar: calendar, horizonYears: 2)
        #expect(Self.wall(within, in: Self.utc) == "2028-06-26 00:00:00 +0")
        #expect(CalendarMatching.leapMonthHorizonYears == 200)
    }
}

