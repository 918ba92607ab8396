import Foundation
import TidingsCore

/// The attachment data store: on `add`, attachment files move into a per-app folder the
/// daemon owns (copied when they lie inside the app's own directory); they are deleted when
/// no pending or delivered notification refers to them any more.
public struct AttachmentStore: Sendable {
    public let root: URL
    /// Bytes one app may keep in the store.
    public let quota: Int64

    public init(root: URL, quota: Int64 = 512 * 1024 * 1024) {
        self.root = root.standardizedFileURL
        self.quota = quota
    }

    public func directory(for bundleIdentifier: String) -> URL {
        root.appendingPathComponent(bundleIdentifier, isDirectory: true)
    }

    /// Validates the attachments and moves (or copies) them into the store. On any error
    /// nothing stays changed: files already moved go back where they were.
    public func ingest(_ attachments: [AttachmentValue], bundleIdentifier: String, appDirectory: String?) throws(NotificationError) -> [AttachmentValue] {
        guard !attachments.isEmpty else { return [] }
        let fm = FileManager.default
        let folder = directory(for: bundleIdentifier)
        do {
            try fm.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw NotificationError(.attachmentMoveIntoDataStoreFailed, "cannot create the attachment store at \(folder.path): \(error)")
        }
        var budget = quota - usage(bundleIdentifier)
        var done: [(stored: String, original: String, moved: Bool)] = []
        var result: [AttachmentValue] = []
        func rollback() {
            for item in done.reversed() {
                if item.moved {
                    try? fm.moveItem(atPath: item.stored, toPath: item.original)
                } else {
                    try? fm.removeItem(atPath: item.stored)
                }
            }
        }
        for attachment in attachments {
            do throws(NotificationError) {
                let source = try checkedSource(attachment.path)
                let type = try AttachmentTypes.validateFile(atPath: source, typeHint: attachment.options.typeHint)
                let size = (try? fm.attributesOfItem(atPath: source)[.size] as? NSNumber)?.int64Value ?? 0
                guard size <= budget else {
                    throw NotificationError(.attachmentMoveIntoDataStoreFailed,
                        "the app's attachment store is full: \(attachment.identifier) needs \(size) bytes, \(max(budget, 0)) of \(quota) left")
                }
                let ext = (source as NSString).pathExtension.isEmpty ? (type.extensions.first ?? "bin") : (source as NSString).pathExtension.lowercased()
                let destination = folder.appendingPathComponent("\(UUID().uuidString.lowercased()).\(ext)").path
                let copy = mustCopy(source, appDirectory: appDirectory)
                do {
                    if copy {
                        try fm.copyItem(atPath: source, toPath: destination)
                    } else {
                        try move(source, to: destination)
                    }
                } catch {
                    throw NotificationError(.attachmentMoveIntoDataStoreFailed, "cannot move \(source) into the attachment store: \(error.localizedDescription)")
                }
                done.append((destination, source, !copy))
                budget -= size
                var stored = attachment
                stored.path = destination
                stored.type = type.uti
                result.append(stored)
            } catch {
                rollback()
                throw error
            }
        }
        return result
    }

    /// Deletes stored files; paths outside this app's folder are never touched.
    public func delete(_ attachments: [AttachmentValue], bundleIdentifier: String) {
        let folder = directory(for: bundleIdentifier).path + "/"
        for attachment in attachments {
            let path = URL(fileURLWithPath: attachment.path).standardizedFileURL.path
            guard path.hasPrefix(folder), !path.dropFirst(folder.count).contains("/") else { continue }
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// Whether a path is a file inside this app's folder of the store.
    public func contains(_ path: String, bundleIdentifier: String) -> Bool {
        let folder = directory(for: bundleIdentifier).path + "/"
        return URL(fileURLWithPath: path).standardizedFileURL.path.hasPrefix(folder)
    }

    public func usage(_ bundleIdentifier: String) -> Int64 {
        let folder = directory(for: bundleIdentifier)
        guard let items = try? FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
        return items.reduce(0) { $0 + Int64((try? $1.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0) }
    }

    private func checkedSource(_ path: String) throws(NotificationError) -> String {
        guard path.hasPrefix("/") else {
            throw NotificationError(.attachmentInvalidURL, "attachment URL must be an absolute file URL (got \(path))")
        }
        let standardized = URL(fileURLWithPath: path).standardizedFileURL.path
        var info = stat()
        guard lstat(standardized, &info) == 0 else {
            throw NotificationError(.attachmentInvalidURL, "no file at \(standardized)")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            return standardized
        case S_IFLNK:
            throw NotificationError(.attachmentInvalidURL, "\(standardized) is a symbolic link; attach the file itself")
        default:
            throw NotificationError(.attachmentInvalidURL, "\(standardized) is not a regular file")
        }
    }

    /// Files inside the app's own directory (its bundle) and files already in the store are copied.
    private func mustCopy(_ source: String, appDirectory: String?) -> Bool {
        if source.hasPrefix(root.path + "/") { return true }
        guard let appDirectory, !appDirectory.isEmpty else { return false }
        let dir = URL(fileURLWithPath: appDirectory).standardizedFileURL.path
        return source.hasPrefix(dir.hasSuffix("/") ? dir : dir + "/")
    }

    private func move(_ source: String, to destination: String) throws {
        if rename(source, destination) == 0 { return }
        guard errno == EXDEV else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        try FileManager.default.copyItem(atPath: source, toPath: destination)
        try FileManager.default.removeItem(atPath: source)
    }
}
