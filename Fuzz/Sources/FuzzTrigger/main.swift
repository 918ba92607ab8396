import Foundation
import TidingsCore
import TidingsEngine

/// Trigger values as an app can send them → validation → first and next fire dates
/// (Foundation's calendar search included) and region tests: never a trap, never a hang
/// (run with libFuzzer's -timeout), and every date the scheduler gets lies after now.
///
/// The first byte picks the form: even, the rest is a trigger as JSON (calendar and location
/// triggers cross the app socket so, with a DateComponents' calendar and time zone); odd,
/// the rest is read field by field, so that every extreme (NaN, ±∞, Int.min/max, the edges
/// of each component's range) is a few bytes away.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let form = bytes.first else { return 0 }
    var reader = Reader(bytes: bytes.dropFirst())
    let trigger: TriggerValue?
    if form & 1 == 0 {
        trigger = try? JSONDecoder().decode(TriggerValue.self, from: Data(bytes.dropFirst()))
    } else {
        trigger = reader.trigger()
    }
    guard let trigger else { return 0 }
    exercise(trigger, position: (reader.double(), reader.double()))
    return 0
}

let now = Date(timeIntervalSince1970: 1_795_348_800)
let utc = TimeZone(identifier: "UTC")!

func exercise(_ trigger: TriggerValue, position: (Double, Double)) {
    // What an app's process computes on its own (`nextTriggerDate()`), valid or not.
    if case .calendar(let components, _) = trigger {
        _ = CalendarMatching.nextDate(after: now, matching: components, defaultTimeZone: utc)
    }
    do {
        try TriggerSchedule.validate(trigger)
    } catch {
        return
    }
    guard let first = try? TriggerSchedule.firstFire(trigger, now: now, timeZone: utc) else {
        if case .location(let region, _) = trigger, TriggerSchedule.isValidPosition(latitude: position.0, longitude: position.1) {
            _ = Geo.contains(region, latitude: position.0, longitude: position.1)
        }
        return
    }
    precondition(first >= now && !first.timeIntervalSinceReferenceDate.isNaN, "a first fire date before now: \(first)")
    // A repeating trigger goes on after each fire, always forward (no fire loop), and a
    // fire found late (the daemon was down) collapses into one.
    var fired = first
    for late: TimeInterval in [0, 1, 86_400 * 400] {
        let at = fired.addingTimeInterval(late)
        guard let next = TriggerSchedule.nextFire(trigger, fired: fired, now: at, timeZone: utc) else { break }
        precondition(next > at, "a next fire date not after now: \(next) at \(at)")
        fired = next
    }
}

struct Reader {
    var bytes: ArraySlice<UInt8>

    mutating func byte() -> UInt8 { bytes.popFirst() ?? 0 }

    mutating func int64() -> Int64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(byte()) }
        return Int64(bitPattern: value)
    }

    mutating func double() -> Double {
        let pick = byte()
        let special: [Double] = [.nan, .infinity, -.infinity, 0, -0.0, 1, 59, 59.999, 60, 1e10, 1e300,
                                 .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude, 90, -90, 180, -180]
        if Int(pick) < special.count { return special[Int(pick)] }
        return Double(bitPattern: UInt64(bitPattern: int64()))
    }

    /// A component value: one of each range's edges, or any 64-bit integer.
    mutating func int() -> Int {
        let pick = byte()
        let special = [0, 1, -1, 2, 4, 5, 6, 7, 8, 12, 13, 14, 23, 24, 28, 29, 30, 31, 32, 52, 53, 54, 59, 60, 61, 1000, 1001,
                       2026, 2400, 99_999, 100_000, 100_001, 999_999_999, 1_000_000_000, Int(Int32.max), Int.min, Int.max]
        if Int(pick) < special.count { return special[Int(pick)] }
        return Int(int64())
    }

    mutating func trigger() -> TriggerValue? {
        let kind = byte()
        let repeats = kind & 0x80 != 0
        switch kind & 0x3 {
        case 0:
            return .timeInterval(seconds: double(), repeats: repeats)
        case 1:
            var components = DateComponents()
            let mask = UInt16(byte()) << 8 | UInt16(byte())
            let fields: [Calendar.Component] = [.era, .year, .month, .day, .hour, .minute, .second, .nanosecond,
                                                .weekday, .weekdayOrdinal, .quarter, .weekOfMonth, .weekOfYear, .yearForWeekOfYear]
            for (bit, field) in fields.enumerated() where mask & (1 << bit) != 0 {
                components.setValue(int(), for: field)
            }
            if mask & 0x4000 != 0 { components.isLeapMonth = true }
            let calendars: [Calendar.Identifier] = [.gregorian, .iso8601, .hebrew, .chinese, .islamic, .islamicUmmAlQura, .japanese, .buddhist, .persian, .indian, .coptic, .ethiopicAmeteAlem]
            let calendarPick = Int(byte())
            if calendarPick < calendars.count { components.calendar = Calendar(identifier: calendars[calendarPick]) }
            let zones = ["UTC", "Europe/Berlin", "America/New_York", "Pacific/Chatham", "Asia/Kolkata", "Pacific/Kiritimati", "America/St_Johns"]
            let zonePick = Int(byte())
            if zonePick < zones.count {
                components.timeZone = TimeZone(identifier: zones[zonePick])
            } else if zonePick < 64 {
                components.timeZone = TimeZone(secondsFromGMT: Int(int64() % 200_000))
            }
            return .calendar(components, repeats: repeats)
        case 2:
            let region = CircularRegionValue(identifier: "r", latitude: double(), longitude: double(), radius: double(),
                                             notifyOnEntry: kind & 0x10 != 0, notifyOnExit: kind & 0x20 != 0)
            return .location(region, repeats: repeats)
        default:
            return .push
        }
    }
}

/// A hang is a finding here (Foundation's calendar search once never ended): unless told
/// otherwise, an input that takes longer than 10 s fails, instead of libFuzzer's 1,200 s.
@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>) -> CInt {
    let count = Int(argc.pointee)
    let given = (0..<count).compactMap { argv.pointee[$0].map { String(cString: $0) } }
    guard !given.contains(where: { $0.hasPrefix("-timeout=") }) else { return 0 }
    let extended = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: count + 2)
    for index in 0..<count { extended[index] = argv.pointee[index] }
    extended[count] = strdup("-timeout=10")
    extended[count + 1] = nil
    argv.pointee = extended
    argc.pointee = CInt(count + 1)
    return 0
}
