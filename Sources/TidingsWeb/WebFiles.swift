import Foundation
import TidingsCore
import TidingsEngine

#if canImport(Glibc)
import Glibc
#endif

/// The files the center serves besides its own assets, each only from one folder:
/// attachments from the app's folder of the attachment store, named sounds from the app's
/// `Library/Sounds` (or `Sounds`), the app's icon (`icon.png` beside its manifest).
/// A name is one path component of safe characters; the file must be a regular file (not a
/// symbolic link) directly in that folder, of a type the center knows.
enum WebFiles {
    /// One path component: letters, digits, `.`, `-`, `_`, space; no leading dot; ≤ 255 bytes.
    static func isSafeName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 255, !name.hasPrefix(".") else { return false }
        return name.unicodeScalars.allSatisfy { scalar in
            CharacterSet.alphanumerics.contains(scalar) && scalar.isASCII || "._- ".unicodeScalars.contains(scalar)
        }
    }

    static let soundTypes: [String: String] = [
        "wav": "audio/wav", "wave": "audio/wav", "aif": "audio/aiff", "aiff": "audio/aiff", "aifc": "audio/aiff",
        "caf": "audio/x-caf", "mp3": "audio/mpeg", "m4a": "audio/mp4",
    ]

    static func mimeType(forAttachment name: String) -> String? {
        guard let type = AttachmentTypes.type(forExtension: (name as NSString).pathExtension) else { return nil }
        return type.aliases.first { $0.contains("/") }
    }

    /// The path of `name` in `directory` if it is a regular file there (not a link), with its size.
    static func regularFile(_ name: String, in directory: String) -> (path: String, size: Int)? {
        guard isSafeName(name) else { return nil }
        let path = directory + "/" + name
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        // The folder itself must not be a link either.
        var folder = stat()
        guard lstat(directory, &folder) == 0, (folder.st_mode & S_IFMT) == S_IFDIR else { return nil }
        return (path, Int(info.st_size))
    }

    static func attachment(app: String, name: String, root: String) -> (path: String, size: Int, type: String)? {
        guard BundleIdentifier.isValid(app), let type = mimeType(forAttachment: name),
              let file = regularFile(name, in: root + "/" + app) else { return nil }
        return (file.path, file.size, type)
    }

    static func sound(name: String, appDirectory: String) -> (path: String, size: Int, type: String)? {
        guard let type = soundTypes[(name as NSString).pathExtension.lowercased()] else { return nil }
        for folder in ["Library/Sounds", "Sounds"] {
            if let file = regularFile(name, in: appDirectory + "/" + folder) { return (file.path, file.size, type) }
        }
        return nil
    }

    static func icon(appDirectory: String) -> (path: String, size: Int, type: String)? {
        regularFile("icon.png", in: appDirectory).map { ($0.path, $0.size, "image/png") }
    }
}
