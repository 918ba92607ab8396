import Testing
import TidingsCore

/// The clamped arithmetic shared by token claims, durations from configuration and timeouts.
struct SaturatingTests {
    @Test func int64ClampsAtBothEnds() {
        #expect(Int64.max.saturatingAdd(1) == .max)
        #expect(Int64.min.saturatingAdd(-1) == .min)
        #expect(Int64.min.saturatingSubtract(1) == .min)
        #expect(Int64.max.saturatingSubtract(-1) == .max)
        #expect(Int64.max.saturatingMultiply(2) == .max)
        #expect(Int64.min.saturatingMultiply(2) == .min)
        #expect(Int64.min.saturatingMultiply(-1) == .max)
        #expect(Int64(-3).saturatingMultiply(4) == -12)
        #expect(Int64(7).saturatingSubtract(9) == -2)
    }

    @Test func durationsCountInWholeUnitsAndClamp() {
        #expect(Duration.milliseconds(1500).saturatingCount(perSecond: 1000) == 1500)
        #expect(Duration.nanoseconds(1_234_567_891).saturatingCount(perSecond: 1000) == 1234)
        #expect(Duration.seconds(2).saturatingCount(perSecond: 1_000_000_000) == 2_000_000_000)
        #expect(Duration.seconds(-2).saturatingCount(perSecond: 1000) == -2000)
        #expect(Duration.seconds(Int64.max).saturatingCount(perSecond: 1000) == .max)
        #expect(Duration.seconds(Int64.min).saturatingCount(perSecond: 1_000_000_000) == .min)
        #expect(Duration.seconds(9_300_000_000_000_000).saturatingCount(perSecond: 1000) == .max)
    }
}
