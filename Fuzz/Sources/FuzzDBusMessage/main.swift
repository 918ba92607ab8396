import TidingsDBus

/// Messages from the bus (docs/security.md, "D-Bus client"): the bytes a bus sends after
/// authentication, split by the client's framing (`DBusMessage.length`) under the default
/// limits and tiny ones, each message parsed. Nothing may crash or allocate without bound; a
/// message that parses re-encodes (little-endian) to bytes that parse to the same message.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    for limits in [DBusLimits(), DBusLimits(maximumMessageLength: 256, maximumArrayLength: 64, maximumDepth: 4)] {
        var rest = bytes
        while true {
            guard let length = try? DBusMessage.length(of: rest, limits: limits) else { break }
            guard length <= limits.maximumMessageLength else { fatalError("a message of \(length) bytes passed the limit") }
            guard rest.count >= length else { break }
            let frame = UnsafeRawBufferPointer(rebasing: rest[0 ..< length])
            if let message = try? DBusMessage(decoding: frame, limits: .specification) {
                let again = message.encoded()
                guard let decoded = try? again.withUnsafeBytes({ try DBusMessage(decoding: $0, limits: .specification) }) else {
                    fatalError("a message that parsed does not parse after re-encoding")
                }
                guard decoded.body == message.body || message.body.contains(where: containsNaN), decoded.member == message.member,
                      decoded.serial == message.serial, decoded.replySerial == message.replySerial else {
                    fatalError("a message does not round-trip")
                }
            }
            _ = try? DBusMessage(decoding: frame, limits: limits)
            rest = UnsafeRawBufferPointer(rebasing: rest[length...])
        }
    }
    _ = try? DBusSignature.parse(String(decoding: bytes.prefix(300), as: UTF8.self))
    return 0
}

/// NaN is not equal to itself, so a body holding one compares unequal after a faithful round trip.
func containsNaN(_ value: DBusValue) -> Bool {
    switch value {
    case .double(let d): d.isNaN
    case .array(_, let values), .structure(let values): values.contains(where: containsNaN)
    case .dictEntry(let k, let v): containsNaN(k) || containsNaN(v)
    case .variant(let inner): containsNaN(inner)
    default: false
    }
}
