import Foundation
import TidingsCore

/// Option key: a `String` uniform type identifier (`"public.jpeg"`, a MIME type or an
/// extension also work) that overrides the type taken from the file name extension.
public let UNNotificationAttachmentOptionsTypeHintKey: String = "UNNotificationAttachmentOptionsTypeHintKey"
/// Option key: a `Bool`/`NSNumber`, hide the attachment's thumbnail.
public let UNNotificationAttachmentOptionsThumbnailHiddenKey: String = "UNNotificationAttachmentOptionsThumbnailHiddenKey"
/// Option key: a normalized rectangle (all values 0…1) that clips the thumbnail — a
/// `CGRect`, or a `CGRect` dictionary representation (`"X"`, `"Y"`, `"Width"`, `"Height"`).
public let UNNotificationAttachmentOptionsThumbnailClippingRectKey: String = "UNNotificationAttachmentOptionsThumbnailClippingRectKey"
/// Option key: the thumbnail's frame number (animated image) or time in seconds (movie) —
/// a number, or a `CMTime` dictionary (`"value"`, `"timescale"`).
public let UNNotificationAttachmentOptionsThumbnailTimeKey: String = "UNNotificationAttachmentOptionsThumbnailTimeKey"

/// A media file (image, audio or movie) shown with a notification. Immutable.
///
/// The initializer validates like Apple's: the URL must be the file URL of an existing
/// local file (else `attachmentInvalidURL`); its type comes from the type hint option or
/// the file name extension (else `attachmentUnrecognizedType`); its size must be within
/// the limit of its kind — image 10 MB, audio 5 MB, movie 50 MB (else
/// `attachmentInvalidFileSize`); and its first bytes must be of that type (else
/// `attachmentCorrupt`). On `add`, the daemon checks again and moves the file into the
/// app's attachment store (copying it when it lies inside the app's own directory).
public final class UNNotificationAttachment: NSObject, NSCopying, NSSecureCoding, Sendable {
    /// The identifier given at creation (a UUID when an empty string was given).
    public let identifier: String
    /// The file's URL: the app's original file, or — in a delivered notification — the
    /// file in the attachment store. Read it between
    /// `startAccessingSecurityScopedResource()` and `stopAccessingSecurityScopedResource()`.
    public let url: URL
    /// The uniform type identifier of the file, e.g. `public.png`.
    public let type: String
    let options: AttachmentOptions

    /// Creates an attachment for the local file at `URL`. Throws `UNError`.
    public init(identifier: String, url URL: URL, options: [AnyHashable: Any]? = nil) throws {
        let parsed = try Self.parse(options ?? [:])
        guard URL.isFileURL else {
            throw UNError(.attachmentInvalidURL, "The attachment URL \(URL.absoluteString) is not a file URL; download remote media to a local file first.")
        }
        let path = URL.standardizedFileURL.path
        let fileType: AttachmentFileType
        do {
            fileType = try AttachmentTypes.validateFile(atPath: path, typeHint: parsed.typeHint)
        } catch {
            throw UNError(error)
        }
        self.identifier = identifier.isEmpty ? UUID().uuidString : identifier
        self.url = URL.standardizedFileURL
        self.type = fileType.uti
        self.options = parsed
    }

    init(value: AttachmentValue) {
        identifier = value.identifier
        url = URL(fileURLWithPath: value.path)
        type = value.type
        options = value.options
    }

    var value: AttachmentValue {
        AttachmentValue(identifier: identifier, path: url.path, type: type, options: options)
    }

    static func parse(_ options: [AnyHashable: Any]) throws(UNError) -> AttachmentOptions {
        var result = AttachmentOptions()
        if let hint = options[UNNotificationAttachmentOptionsTypeHintKey] {
            guard let string = hint as? String ?? (hint as? NSString).map({ $0 as String }) else {
                throw UNError(.attachmentUnrecognizedType, "UNNotificationAttachmentOptionsTypeHintKey must be a String uniform type identifier, not \(Swift.type(of: hint)).")
            }
            result.typeHint = string
        }
        if let hidden = options[UNNotificationAttachmentOptionsThumbnailHiddenKey] {
            guard let flag = boolValue(hidden) else {
                throw UNError(.invalidRequest, "UNNotificationAttachmentOptionsThumbnailHiddenKey must be a Bool or NSNumber, not \(Swift.type(of: hidden)).")
            }
            result.thumbnailHidden = flag
        }
        if let rect = options[UNNotificationAttachmentOptionsThumbnailClippingRectKey] {
            let values: [Double]?
            if let rect = rect as? CGRect {
                values = [Double(rect.origin.x), Double(rect.origin.y), Double(rect.size.width), Double(rect.size.height)]
            } else if let dict = rect as? [AnyHashable: Any] {
                let keys = ["X", "Y", "Width", "Height"]
                let numbers = keys.compactMap { key in dict[key].flatMap(doubleValue) }
                values = numbers.count == 4 ? numbers : nil
            } else {
                values = nil
            }
            guard let values else {
                throw UNError(.invalidRequest, "UNNotificationAttachmentOptionsThumbnailClippingRectKey must be a CGRect or its dictionary representation (X, Y, Width, Height).")
            }
            let (x, y, w, h) = (values[0], values[1], values[2], values[3])
            guard values.allSatisfy({ $0.isFinite }), x >= 0, y >= 0, w > 0, h > 0, x + w <= 1, y + h <= 1 else {
                throw UNError(.invalidRequest, "The thumbnail clipping rectangle must be normalized (origin and size within 0…1, size > 0); got x \(x), y \(y), width \(w), height \(h).")
            }
            result.thumbnailClippingRect = values
        }
        if let time = options[UNNotificationAttachmentOptionsThumbnailTimeKey] {
            result.thumbnailTime = try thumbnailTime(time)
        }
        return result
    }

    /// `UNNotificationAttachmentOptionsThumbnailTimeKey`: a number (an animated image's frame,
    /// a movie's seconds) or a `CMTime` dictionary as `CMTimeCopyAsDictionary` makes it
    /// (`value` an integer, `timescale` an integer 1…Int32.max, optional `flags` with
    /// `kCMTimeFlags_Valid` and no infinity/indefinite bit, `epoch` ignored). Negative, NaN,
    /// infinite, another type or an invalid `CMTime` is `invalidRequest`. A time past the
    /// movie's end or the image's last frame shows the last frame (the page clamps it).
    static func thumbnailTime(_ time: Any) throws(UNError) -> Double {
        let invalid = "UNNotificationAttachmentOptionsThumbnailTimeKey must be a non-negative number (an animated image's frame, a movie's seconds) or a CMTime dictionary (value, timescale)"
        if let dict = time as? [AnyHashable: Any] {
            guard let value = dict["value"].flatMap(doubleValue), let scale = dict["timescale"].flatMap(doubleValue) else {
                throw UNError(.invalidRequest, "\(invalid); the dictionary has no numeric value and timescale.")
            }
            guard value.isFinite, value.rounded() == value, abs(value) < 0x1p63,
                  scale.rounded() == scale, scale >= 1, scale <= Double(Int32.max) else {
                throw UNError(.invalidRequest, "\(invalid); a CMTime's value must be an integer and its timescale an integer 1…\(Int32.max) (got \(value)/\(scale)).")
            }
            if let flags = dict["flags"] {
                // kCMTimeFlags_Valid = 1; PositiveInfinity 4, NegativeInfinity 8, Indefinite 16.
                guard let bits = doubleValue(flags), bits.rounded() == bits, bits >= 0, bits < 0x1p32,
                      UInt32(bits) & 1 != 0, UInt32(bits) & (4 | 8 | 16) == 0 else {
                    throw UNError(.invalidRequest, "\(invalid); the CMTime is not a valid, finite time (flags \(flags)).")
                }
            }
            let seconds = value / scale
            guard seconds >= 0 else { throw UNError(.invalidRequest, "\(invalid); got \(seconds) s.") }
            return seconds
        }
        guard let seconds = doubleValue(time) else {
            throw UNError(.invalidRequest, "\(invalid); got a \(Swift.type(of: time)).")
        }
        guard seconds.isFinite, seconds >= 0 else { throw UNError(.invalidRequest, "\(invalid); got \(seconds).") }
        return seconds
    }

    private static func boolValue(_ any: Any) -> Bool? {
        switch any {
        case let b as Bool: b
        case let n as NSNumber: n.boolValue
        case let i as Int: i != 0
        default: nil
        }
    }

    private static func doubleValue(_ any: Any) -> Double? {
        switch any {
        case let d as Double: d
        case let f as Float: Double(f)
        case let i as Int: Double(i)
        case let c as CGFloat: Double(c)
        case let n as NSNumber: n.doubleValue
        case let i as any BinaryInteger: Double(i)   // Int64 and Int32, as CMTime's value and timescale
        default: nil
        }
    }

    // MARK: NSObject

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? UNNotificationAttachment else { return false }
        return other.value == value
    }

    public override var hash: Int { value.hashValue }

    public override var description: String {
        "<UNNotificationAttachment: identifier: \(identifier), url: \(url.absoluteString), type: \(type)>"
    }

    public func copy(with zone: NSZone? = nil) -> Any { self }

    public static var supportsSecureCoding: Bool { true }

    public func encode(with coder: NSCoder) { ArchivedValue.encode(value, with: coder) }

    public convenience init?(coder: NSCoder) {
        guard let value = ArchivedValue.decode(AttachmentValue.self, from: coder) else { return nil }
        self.init(value: value)
    }
}
