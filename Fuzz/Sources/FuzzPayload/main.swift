import TidingsCore

/// The payload parser and its mapping to notification content: must never crash, and a
/// parsed document must survive a serialize/parse round trip. The device's path
/// (`RemoteNotificationMapping.plan`, one parse straight into `userInfo`) must refuse what
/// `APNsPayload(json:)` refuses, with the same error, and otherwise make the same content.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let isObject: Bool = if case .object? = try? JSONValue(parsing: bytes) { true } else { false }
    precondition(JSONValue.isObject(bytes) == isObject, "the hot-path scanner and the parser disagree")
    let push = RemotePush(apnsID: "a", sequence: 1, bundleIdentifier: "com.example.fuzz", expiresAt: 2, acceptedAt: 1, payload: bytes)!
    let strings = ["K": "%@ %1$@ %%", "Key": "%2$@ %@"]
    let plan: Result<RemoteNotificationPlan, APNsPayloadError> = Result { () throws(APNsPayloadError) in
        try RemoteNotificationMapping.plan(push, localizedStrings: ["en": strings], languages: ["en"])
    }
    let payload: APNsPayload
    do {
        payload = try APNsPayload(json: bytes)
    } catch {
        guard case .failure(let planError) = plan, planError == error else { fatalError("the device's parse accepts what APNsPayload refuses, or refuses it otherwise") }
        return 0
    }
    guard case .success(let planned) = plan else { fatalError("the device's parse refuses what APNsPayload accepts") }
    let content = payload.notificationContent(localize: { strings[$0] })
    precondition(planned.userInfo == content.userInfo, "the device's userInfo differs")
    precondition(planned.request.map { $0.content == content } ?? true, "the device's content differs")
    precondition(planned.wakesApp == payload.aps.contentAvailable && planned.isBackgroundOnly == payload.isBackgroundUpdate, "the device's flags differ")
    _ = payload.wantsServiceExtension
    let text = payload.json.jsonText
    guard let again = try? JSONValue(parsing: Array(text.utf8)), again.jsonText == text else {
        fatalError("round trip changed the document")
    }
    return 0
}
