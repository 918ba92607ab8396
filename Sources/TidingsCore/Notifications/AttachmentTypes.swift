import Foundation

/// The media kinds a notification attachment may be, with Apple's size limits.
public enum AttachmentKind: String, Sendable, Hashable, Codable, CaseIterable {
    case image, audio, movie

    /// Apple's limit for one attachment of this kind: image 10 MB, audio 5 MB, movie 50 MB.
    /// (Apple's documentation says "MB"; the limits are applied as 10·2²⁰ etc.)
    public var maximumSize: Int64 {
        switch self {
        case .image: 10 * 1024 * 1024
        case .audio: 5 * 1024 * 1024
        case .movie: 50 * 1024 * 1024
        }
    }
}

/// One supported attachment file type: its uniform type identifier, kind, file name
/// extensions and the signature its bytes must carry.
public struct AttachmentFileType: Sendable, Hashable {
    /// The uniform type identifier, as `UNNotificationAttachment.type` reports it.
    public var uti: String
    public var kind: AttachmentKind
    /// Lower-case file name extensions that select this type.
    public var extensions: [String]
    /// Other spellings accepted as a type hint (MIME types, legacy identifiers).
    public var aliases: [String]

    public init(uti: String, kind: AttachmentKind, extensions: [String], aliases: [String] = []) {
        self.uti = uti
        self.kind = kind
        self.extensions = extensions
        self.aliases = aliases
    }

    /// Whether `header` (the first bytes of a file, at least 16 when the file has them)
    /// carries this type's signature.
    public func matches(header: [UInt8]) -> Bool {
        AttachmentTypes.signatureMatches(uti: uti, header: header)
    }
}

/// Attachment type detection and validation, shared by `UNNotificationAttachment`'s
/// initializer (in the app) and the daemon, which checks again on `add`.
///
/// Apple's supported types (the `UNNotificationAttachment` documentation):
/// images — JPEG, GIF, PNG (≤ 10 MB); audio — AIFF, WAV, MP3, MPEG-4 audio (≤ 5 MB);
/// movies — MPEG, MPEG-2 video, MPEG-4, AVI (≤ 50 MB).
public enum AttachmentTypes {
    public static let all: [AttachmentFileType] = [
        AttachmentFileType(uti: "public.jpeg", kind: .image, extensions: ["jpg", "jpeg", "jpe"], aliases: ["image/jpeg", "image/jpg"]),
        AttachmentFileType(uti: "public.png", kind: .image, extensions: ["png"], aliases: ["image/png"]),
        AttachmentFileType(uti: "com.compuserve.gif", kind: .image, extensions: ["gif"], aliases: ["image/gif", "public.gif"]),
        AttachmentFileType(uti: "public.aiff-audio", kind: .audio, extensions: ["aif", "aiff", "aifc"], aliases: ["audio/aiff", "audio/x-aiff", "public.aifc-audio"]),
        AttachmentFileType(uti: "com.microsoft.waveform-audio", kind: .audio, extensions: ["wav", "wave"], aliases: ["audio/wav", "audio/x-wav", "audio/wave"]),
        AttachmentFileType(uti: "public.mp3", kind: .audio, extensions: ["mp3"], aliases: ["audio/mpeg", "audio/mp3"]),
        AttachmentFileType(uti: "public.mpeg-4-audio", kind: .audio, extensions: ["m4a"], aliases: ["audio/mp4", "audio/x-m4a", "com.apple.m4a-audio"]),
        AttachmentFileType(uti: "public.mpeg", kind: .movie, extensions: ["mpg", "mpeg", "mpe"], aliases: ["video/mpeg"]),
        AttachmentFileType(uti: "public.mpeg-2-video", kind: .movie, extensions: ["m2v"], aliases: ["video/mpeg2"]),
        AttachmentFileType(uti: "public.mpeg-4", kind: .movie, extensions: ["mp4", "m4v", "mpg4"], aliases: ["video/mp4", "com.apple.m4v-video"]),
        AttachmentFileType(uti: "public.avi", kind: .movie, extensions: ["avi"], aliases: ["video/avi", "video/x-msvideo", "public.avi-movie"]),
    ]

    /// The type a file name extension selects (case-insensitive), or nil.
    public static func type(forExtension ext: String) -> AttachmentFileType? {
        let ext = ext.lowercased()
        guard !ext.isEmpty else { return nil }
        return all.first { $0.extensions.contains(ext) }
    }

    /// The type a `UNNotificationAttachmentOptionsTypeHintKey` value names: a uniform type
    /// identifier, a MIME type or a file name extension (case-insensitive), or nil.
    public static func type(forHint hint: String) -> AttachmentFileType? {
        let hint = hint.lowercased().trimmingCharacters(in: .whitespaces)
        return all.first { $0.uti == hint || $0.aliases.contains(hint) } ?? type(forExtension: hint)
    }

    /// The type with this uniform type identifier, or nil.
    public static func type(forUTI uti: String) -> AttachmentFileType? {
        all.first { $0.uti == uti }
    }

    /// Picks the file type the way `UNNotificationAttachment` does: the type hint when one
    /// is given, otherwise the file name extension.
    public static func resolve(pathExtension: String, typeHint: String?) throws(NotificationError) -> AttachmentFileType {
        if let typeHint {
            guard let type = type(forHint: typeHint) else {
                throw NotificationError(.attachmentUnrecognizedType, "The attachment type hint '\(typeHint)' is not a supported type; supported: \(supportedList).")
            }
            return type
        }
        guard let type = type(forExtension: pathExtension) else {
            let what = pathExtension.isEmpty ? "has no file name extension" : "has the unsupported extension '.\(pathExtension)'"
            throw NotificationError(.attachmentUnrecognizedType, "The attachment file \(what); give it a supported extension or set UNNotificationAttachmentOptionsTypeHintKey (supported: \(supportedList)).")
        }
        return type
    }

    static var supportedList: String {
        all.map { "\($0.uti) (.\($0.extensions[0]))" }.joined(separator: ", ")
    }

    /// Validates a local file as an attachment: it exists and is a regular file (not a
    /// symbolic link: the daemon refuses one at `add`, so it is refused here, where the
    /// attachment is created), its type is supported (extension or hint), its size is
    /// within the kind's limit, and its first bytes carry the type's signature. Returns the type.
    ///
    /// Errors: `attachmentInvalidURL` (missing, a symbolic link, not a regular file, unreadable),
    /// `attachmentUnrecognizedType`, `attachmentInvalidFileSize`, `attachmentCorrupt`.
    public static func validateFile(atPath path: String, typeHint: String?) throws(NotificationError) -> AttachmentFileType {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw NotificationError(.attachmentInvalidURL, "No attachment file exists at \(path).")
        }
        guard !isDirectory.boolValue else {
            throw NotificationError(.attachmentInvalidURL, "The attachment URL \(path) is a directory, not a file.")
        }
        let type = try resolve(pathExtension: (path as NSString).pathExtension, typeHint: typeHint)
        let size: Int64
        do {
            // The path itself (lstat): a symbolic link is refused, as the daemon refuses it.
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            if let fileType = attributes[.type] as? FileAttributeType, fileType == .typeSymbolicLink {
                throw NotificationError(.attachmentInvalidURL, "\(path) is a symbolic link; attach the file itself")
            }
            if let fileType = attributes[.type] as? FileAttributeType, fileType != .typeRegular {
                throw NotificationError(.attachmentInvalidURL, "The attachment at \(path) is not a regular file.")
            }
            size = (attributes[.size] as? NSNumber)?.int64Value ?? 0
        } catch let error as NotificationError {
            throw error
        } catch {
            throw NotificationError(.attachmentInvalidURL, "Cannot read the attachment file at \(path): \(error.localizedDescription)")
        }
        try check(size: size, type: type, path: path)
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw NotificationError(.attachmentInvalidURL, "The attachment file \(path) cannot be opened for reading.")
        }
        defer { try? handle.close() }
        let header: [UInt8]
        do {
            header = [UInt8](try handle.read(upToCount: 64) ?? Data())
        } catch {
            throw NotificationError(.attachmentInvalidURL, "Cannot read the attachment file at \(path): \(error.localizedDescription)")
        }
        try check(header: header, type: type, path: path)
        return type
    }

    /// A file of `size` bytes may be an attachment of `type`: not empty
    /// (`attachmentCorrupt`), within its kind's limit (`attachmentInvalidFileSize`).
    public static func check(size: Int64, type: AttachmentFileType, path: String) throws(NotificationError) {
        guard size <= type.kind.maximumSize else {
            throw NotificationError(.attachmentInvalidFileSize, "The \(type.kind.rawValue) attachment \(path) is \(size) bytes; the limit for \(type.kind.rawValue) attachments is \(type.kind.maximumSize) bytes (\(type.kind.maximumSize / (1024 * 1024)) MB).")
        }
        guard size > 0 else {
            throw NotificationError(.attachmentCorrupt, "The attachment file \(path) is empty.")
        }
    }

    /// A file that starts with `header` (its first 64 bytes, or all of it) carries the
    /// signature of `type`, else `attachmentCorrupt`.
    public static func check(header: [UInt8], type: AttachmentFileType, path: String) throws(NotificationError) {
        guard type.matches(header: header) else {
            throw NotificationError(.attachmentCorrupt, "The attachment file \(path) does not contain \(type.uti) data (its first bytes do not carry the \(type.uti) signature).")
        }
    }

    /// Signature checks per type. `header` is the start of the file.
    static func signatureMatches(uti: String, header h: [UInt8]) -> Bool {
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            h.count >= offset + bytes.count && Array(h[offset..<offset + bytes.count]) == bytes
        }
        func ascii(_ s: String, at offset: Int = 0) -> Bool { starts(Array(s.utf8), at: offset) }
        func ftypBrand() -> String? {
            guard ascii("ftyp", at: 4), h.count >= 12 else { return nil }
            return String(decoding: h[8..<12], as: UTF8.self)
        }
        switch uti {
        case "public.jpeg":
            return starts([0xFF, 0xD8, 0xFF])
        case "public.png":
            return starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        case "com.compuserve.gif":
            return ascii("GIF87a") || ascii("GIF89a")
        case "public.aiff-audio":
            return ascii("FORM") && (ascii("AIFF", at: 8) || ascii("AIFC", at: 8))
        case "com.microsoft.waveform-audio":
            return ascii("RIFF") && ascii("WAVE", at: 8)
        case "public.mp3":
            // An ID3v2 tag, or an MPEG audio frame header (11 sync bits, layer III).
            if ascii("ID3") { return true }
            return h.count >= 2 && h[0] == 0xFF && (h[1] & 0xE0) == 0xE0 && (h[1] & 0x06) == 0x02
        case "public.mpeg-4-audio":
            return ftypBrand() != nil
        case "public.mpeg-4":
            return ftypBrand() != nil
        case "public.mpeg", "public.mpeg-2-video":
            // MPEG program stream pack header or video sequence header.
            return starts([0x00, 0x00, 0x01, 0xBA]) || starts([0x00, 0x00, 0x01, 0xB3])
                || (uti == "public.mpeg" && h.count >= 1 && h[0] == 0x47) // MPEG transport stream sync byte
        case "public.avi":
            return ascii("RIFF") && ascii("AVI ", at: 8)
        default:
            return false
        }
    }
}
