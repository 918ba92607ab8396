import Foundation
import TidingsCore

/// App socket frames (docs/app-ipc.md): the bytes a peer sends, split by the daemon's frame
/// decoder (`AppFraming.next`, as `AppFrameDecoder` calls it) under the real limit and a tiny
/// one, each frame — and the whole input as one frame body — through the daemon's request
/// decoder (JSON `AppEnvelope` or the binary `add`). Nothing may crash or allocate without
/// bound; a binary `add` that decodes re-encodes to a request that decodes to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    decode(bytes)
    for limit in [AppFraming.maximumFrameLength, 64] {
        var rest = bytes
        while true {
            guard let next = try? AppFraming.next(in: rest, limit: limit) else { break }
            guard case .frame(let length) = next else {
                if case .incomplete(let needed) = next, needed > AppFraming.headerLength + limit {
                    fatalError("the decoder asked for \(needed) bytes, over the limit of \(limit)")
                }
                break
            }
            guard length <= limit else { fatalError("a frame of \(length) bytes passed the limit of \(limit)") }
            let body = UnsafeRawBufferPointer(rebasing: rest[AppFraming.headerLength ..< AppFraming.headerLength + length])
            decode(body)
            rest = UnsafeRawBufferPointer(rebasing: rest[(AppFraming.headerLength + length)...])
        }
    }
    return 0
}

func decode(_ body: UnsafeRawBufferPointer) {
    guard let received = try? AppFraming.decodeRequest(body) else { return }
    guard let encoded = received.encodedRequest, case .add(let request) = received.request else { return }
    guard let again = try? BinaryRequestCodec.encode(request),
          let decoded = try? again.withUnsafeBytes({ try BinaryRequestCodec.decode($0) }), decoded == request else {
        fatalError("a binary add that decoded (\(encoded.count) bytes) does not round-trip")
    }
}
