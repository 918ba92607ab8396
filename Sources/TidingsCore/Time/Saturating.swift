/// Arithmetic on numbers that may come from outside (claims, configuration, the wire): each
/// clamps to `Int64`'s range instead of trapping.
extension Int64 {
    /// `self + other`, clamped.
    public func saturatingAdd(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other < 0 ? .min : .max
    }

    /// `self - other`, clamped.
    public func saturatingSubtract(_ other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other < 0 ? .max : .min
    }

    /// `self × other`, clamped.
    public func saturatingMultiply(_ other: Int64) -> Int64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        guard overflow else { return product }
        return (self < 0) == (other < 0) ? .max : .min
    }
}

extension Duration {
    /// The duration in whole units of `1 / perSecond` seconds (1,000: milliseconds;
    /// 1,000,000,000: nanoseconds), truncated toward zero and clamped to `Int64`'s range.
    public func saturatingCount(perSecond: Int64) -> Int64 {
        let (seconds, attoseconds) = components
        return seconds.saturatingMultiply(perSecond).saturatingAdd(attoseconds / (1_000_000_000_000_000_000 / perSecond))
    }
}
