import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

@Suite("Triggers at their extremes")
struct TriggerExtremesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let utc = TimeZone(identifier: "UTC")!

    @Test("a 6th or 7th weekday of the month is out of range: nextTriggerDate() answers nil at once instead of searching forever")
    func weekdayOrdinalOutOfRange() throws {
        for ordinal in [6, 7, 0, -1, Int.min] {
            let trigger = UNCalendarNotificationTrigger(dateMatching: DateComponents(weekday: 2, weekdayOrdinal: ordinal), repeats: true)
            #expect(trigger.nextTriggerDate(after: now, timeZone: utc) == nil)
            #expect { try trigger.value() } throws: { ($0 as? UNError)?.code == .invalidTrigger }
        }
        let fifth = UNCalendarNotificationTrigger(dateMatching: DateComponents(weekday: 2, weekdayOrdinal: 5), repeats: true)
        #expect(fifth.nextTriggerDate(after: now, timeZone: utc) != nil)
    }

    @Test("a past year with a nanosecond has no next date (Foundation answers a date in that year)")
    func pastYearWithNanosecond() throws {
        for components in [DateComponents(year: 12, nanosecond: 1), DateComponents(year: 2020, nanosecond: 5), DateComponents(year: 2020, month: 3, nanosecond: 5)] {
            let trigger = UNCalendarNotificationTrigger(dateMatching: components, repeats: true)
            #expect(trigger.nextTriggerDate(after: now, timeZone: utc) == nil, "\(components)")
        }
        // The same in the future still matches.
        let future = UNCalendarNotificationTrigger(dateMatching: DateComponents(year: 2030, nanosecond: 5), repeats: false)
        let next = try #require(future.nextTriggerDate(after: now, timeZone: utc))
        #expect(next > now)
    }

    @Test("far-future triggers have their exact next dates")
    func farFuture() throws {
        let interval = UNTimeIntervalNotificationTrigger(timeInterval: 1e10, repeats: false)
        #expect(try interval.value() == .timeInterval(seconds: 1e10, repeats: false))
        #expect(interval.nextTriggerDate(after: now) == now.addingTimeInterval(1e10))
        let max = UNTimeIntervalNotificationTrigger(timeInterval: .greatestFiniteMagnitude, repeats: true)
        #expect(max.nextTriggerDate(after: now) == now.addingTimeInterval(.greatestFiniteMagnitude))

        let y2400 = UNCalendarNotificationTrigger(dateMatching: DateComponents(year: 2400, month: 1, day: 1), repeats: false)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = utc
        #expect(y2400.nextTriggerDate(after: now, timeZone: utc) == calendar.date(from: DateComponents(year: 2400, month: 1, day: 1)))
        let beyond = UNCalendarNotificationTrigger(dateMatching: DateComponents(year: CalendarMatching.maximumYear + 1, month: 1), repeats: false)
        #expect(beyond.nextTriggerDate(after: now, timeZone: utc) == nil)
        #expect { try beyond.value() } throws: { ($0 as? UNError)?.code == .invalidTrigger }
    }
}
