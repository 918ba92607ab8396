import TidingsCore

/// Device-channel messages: decoding never crashes; what decodes re-encodes to the same message.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let message = try? DeviceMessage(decoding: bytes) else { return 0 }
    guard let again = try? DeviceMessage(decoding: message.encoded()), again == message else {
        fatalError("device message round trip failed")
    }
    return 0
}
