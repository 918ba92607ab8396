import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

@Suite("Triggers")
struct TriggerTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(arguments: [
        (0.0, false), (-5.0, false), (.infinity, false), (.nan, false), (59.0, true), (0.5, true),
    ])
    func invalidTimeIntervalsDoNotCrashAndFailWithInvalidTrigger(interval: Double, repeats: Bool) {
        let trigger = UNTimeIntervalNotificationTrigger(timeInterval: interval, repeats: repeats)
        #expect(trigger.timeInterval.isNaN || trigger.timeInterval == interval)
        #expect(trigger.repeats == repeats)
        #expect(trigger.nextTriggerDate(after: now) == nil)
        #expect { try trigger.value() } throws: { ($0 as? UNError)?.code == .invalidTrigger }
    }

    @Test func validTimeIntervals() throws {
        let once = UNTimeIntervalNotificationTrigger(timeInterval: 5, repeats: false)
        #expect(try once.value() == .timeInterval(seconds: 5, repeats: false))
        #expect(once.nextTriggerDate(after: now) == now.addingTimeInterval(5))
        let hourly = UNTimeIntervalNotificationTrigger(timeInterval: 60, repeats: true)
        #expect(try hourly.value() == .timeInterval(seconds: 60, repeats: true))
        #expect(hourly.nextTriggerDate() != nil)
        #expect(hourly.description.contains("timeInterval: 60"))
    }

    @Test func invalidTimeIntervalMessagesSayWhy() throws {
        do {
            _ = try UNTimeIntervalNotificationTrigger(timeInterval: 30, repeats: true).value()
            Issue.record("expected an error")
        } catch {
            #expect(error.message.contains("at least 60 if repeating"))
        }
        do {
            _ = try UNTimeIntervalNotificationTrigger(timeInterval: 0, repeats: false).value()
            Issue.record("expected an error")
        } catch {
            #expect(error.message.contains("greater than 0"))
        }
    }

    @Test func calendarTriggerMatchesOnlyTheSetComponents() throws {
        let utc = TimeZone(identifier: "UTC")!
        // 2027-01-15 00:00:00 UTC is a Friday.
        let friday = Date(timeIntervalSince1970: Double(1_800_000_000 - 1_800_000_000 % 86_400))
        let mondays = UNCalendarNotificationTrigger(dateMatching: DateComponents(hour: 8, weekday: 2), repeats: true)
        let next = try #require(mondays.nextTriggerDate(after: friday, timeZone: utc))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = utc
        #expect(calendar.component(.weekday, from: next) == 2)
        #expect(calendar.component(.hour, from: next) == 8)
        #expect(calendar.component(.minute, from: next) == 0)
        #expect(next > friday && next.timeIntervalSince(friday) < 7 * 86_400)
        #expect(try mondays.value() == .calendar(DateComponents(hour: 8, weekday: 2), repeats: true))
        #expect(mondays.nextTriggerDate() != nil)
    }

    @Test func calendarTriggerWithOutOfRangeComponentsFailsOnAdd() {
        let trigger = UNCalendarNotificationTrigger(dateMatching: DateComponents(hour: 25), repeats: false)
        #expect(trigger.nextTriggerDate() == nil)
        #expect { try trigger.value() } throws: { ($0 as? UNError)?.code == .invalidTrigger }
    }

    @Test func circularRegionContainment() {
        let center = CLLocationCoordinate2D(latitude: 48.8584, longitude: 2.2945)
        let region = CLCircularRegion(center: center, radius: 500, identifier: "eiffel")
        #expect(region.contains(center))
        #expect(region.contains(CLLocationCoordinate2D(latitude: 48.8600, longitude: 2.2945))) // ~180 m north
        #expect(!region.contains(CLLocationCoordinate2D(latitude: 48.8740, longitude: 2.2950))) // ~1.7 km
        #expect(region.notifyOnEntry && region.notifyOnExit)
        #expect(CLLocationCoordinate2DIsValid(center))
        #expect(!CLLocationCoordinate2DIsValid(CLLocationCoordinate2D(latitude: 91, longitude: 0)))
    }

    @Test func locationTriggerCopiesItsRegionAndValidates() throws {
        let region = CLCircularRegion(center: CLLocationCoordinate2DMake(1, 2), radius: 100, identifier: "r")
        region.notifyOnExit = false
        let trigger = UNLocationNotificationTrigger(region: region, repeats: true)
        region.notifyOnEntry = false
        #expect(trigger.region.notifyOnEntry)
        #expect(try trigger.value() == .location(CircularRegionValue(identifier: "r", latitude: 1, longitude: 2, radius: 100, notifyOnEntry: true, notifyOnExit: false), repeats: true))

        let plain = UNLocationNotificationTrigger(region: CLRegion(), repeats: false)
        #expect { try plain.value() } throws: { ($0 as? UNError)?.code == .invalidTrigger }
        let silent = UNLocationNotificationTrigger(region: region, repeats: false)
        #expect { try silent.value() } throws: { ($0 as? UNError)?.code == .invalidTrigger }
        let zero = UNLocationNotificationTrigger(region: CLCircularRegion(center: CLLocationCoordinate2DMake(1, 2), radius: 0, identifier: "z"), repeats: false)
        #expect { try zero.value() } throws: { ($0 as? UNError)?.code == .invalidTrigger }
    }

    @Test func triggersRoundTripThroughValues() throws {
        let triggers: [UNNotificationTrigger] = [
            UNTimeIntervalNotificationTrigger(timeInterval: 120, repeats: false),
            UNCalendarNotificationTrigger(dateMatching: DateComponents(month: 2, day: 29), repeats: true),
            UNLocationNotificationTrigger(region: CLCircularRegion(center: CLLocationCoordinate2DMake(10, 20), radius: 50, identifier: "x"), repeats: false),
        ]
        for trigger in triggers {
            let back = UNNotificationTrigger.make(try trigger.value())
            #expect(back == trigger)
            #expect(type(of: back) == type(of: trigger))
        }
        let push = UNNotificationTrigger.make(.push)
        #expect(push is UNPushNotificationTrigger)
        #expect(!push.repeats)
    }
}
