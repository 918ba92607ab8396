import TidingsCore

/// The payload parser and its mapping to notification content: must never crash, and a
/// parsed document must survive a serialize/parse round trip.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let isObject: Bool = if case .object? = try? JSONValue(parsing: bytes) { true } else { false }
    precondition(JSONValue.isObject(bytes) == isObject, "the hot-path scanner and the parser disagree")
    guard let payload = try? APNsPayload(json: bytes) else { return 0 }
    _ = payload.notificationContent(localize: { $0.hasPrefix("K") ? "%@ %1$@ %%" : nil })
    _ = payload.wantsServiceExtension
    let text = payload.json.jsonText
    guard let again = try? JSONValue(parsing: Array(text.utf8)), again.jsonText == text else {
        fatalError("round trip changed the document")
    }
    return 0
}
