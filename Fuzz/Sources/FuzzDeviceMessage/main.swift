import TidingsCore

/// Device-channel messages: decoding never crashes; the fast decoder accepts and rejects
/// exactly what the reference decoder does, with the same result; what decodes re-encodes
/// (hand-written encoder) to the same message, and to what the reference encoder gives.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let fast = Result { () throws(DeviceProtocolError) in try DeviceMessage(decoding: bytes) }
    let reference = Result { () throws(DeviceProtocolError) in try DeviceMessage.referenceDecoded(bytes) }
    guard fast == reference else { fatalError("the fast decoder disagrees with the reference: \(fast) vs \(reference)") }
    guard case .success(let message) = fast else { return 0 }
    guard let again = try? DeviceMessage(decoding: message.encoded()), again == message,
          let viaReference = try? DeviceMessage(decoding: message.referenceEncoded()), viaReference == message else {
        fatalError("device message round trip failed")
    }
    return 0
}
