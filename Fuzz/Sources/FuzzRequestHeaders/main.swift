import TidingsCore

/// Header validation: the input is split into NUL-separated name/value pairs.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let fields = UnsafeBufferPointer(start: data, count: size).split(separator: 0, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    var headers: [(name: String, value: String)] = [(name: ":method", value: "POST")]
    var i = 0
    while i + 1 < fields.count {
        headers.append((name: fields[i], value: fields[i + 1]))
        i += 2
    }
    switch ProviderRequestValidator.validate(headers: headers) {
    case .success(let head):
        // Whatever passes must be what the wire types accept on their own.
        precondition(Priority(rawValue: head.priority.rawValue) != nil)
        precondition(head.collapseID.map { $0.rawValue.utf8.count <= 64 } ?? true)
        precondition(head.deviceToken.hex.utf8.count % 2 == 0)
        _ = ProviderRequestValidator.validate(body: Array(fields.last?.utf8 ?? "".utf8), for: head)
    case .failure(let error):
        precondition(APNsReason(rawValue: error.error.reason.rawValue).status == error.error.status)
    }
    return 0
}
