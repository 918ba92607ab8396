import Dispatch
import Foundation
import Synchronization
import TidingsCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The attachment data store: on `add`, attachment files move into a per-app folder the
/// daemon owns (copied when they lie inside the app's own directory or its own folder of
/// the store); they are deleted when no pending or delivered notification refers to them
/// any more.
///
/// A source file is opened once, by a walk from `/` in which the kernel resolves no
/// symbolic link (a link to a directory is read and its text walked, so every directory
/// above the file is seen and checked; the file itself may not be a link), and everything after — the file's kind and size, its bytes, the copy into the store, the
/// removal of the original — is done on that descriptor and that directory, never by path
/// again: swapping the file, or a directory above it, during an `add` changes nothing that
/// was checked (docs/security.md, "Attachments (daemon)").
public struct AttachmentStore: Sendable {
    public let root: URL
    /// Bytes one app may keep in the store.
    public let quota: Int64
    /// Directories no attachment may be taken from (the store itself is always one): the
    /// daemon's data directory. Compared by device and inode, so no spelling of a path
    /// gets around them.
    public let protectedDirectories: [String]
    /// Directories inside a protected one that attachments may still come from: a service
    /// extension's own container, for its call only (`allowing`).
    public private(set) var allowedDirectories: [String]
    /// Called after a source is opened and checked, before its bytes are read: tests swap
    /// files here to show that the swap changes nothing.
    public let afterOpen: (@Sendable (String) -> Void)?
    /// Attachments one request may carry: each distinct directory they lie in is held open
    /// until the request's files are all stored. More is `invalidRequest`. Default 100 (a
    /// banner shows one).
    public let maximumAttachmentsPerRequest: Int
    /// Bytes being copied into each app's folder by `ingest`s not yet finished: shared by
    /// every copy of this store, so concurrent adds of one app cannot together pass the quota.
    private let reservations: Reservations

    public init(root: URL, quota: Int64 = 512 * 1024 * 1024, maximumAttachmentsPerRequest: Int = 100, protectedDirectories: [String] = [], allowedDirectories: [String] = [], afterOpen: (@Sendable (String) -> Void)? = nil) {
        self.root = root.standardizedFileURL
        self.quota = quota
        self.maximumAttachmentsPerRequest = maximumAttachmentsPerRequest
        self.protectedDirectories = protectedDirectories
        self.allowedDirectories = allowedDirectories
        self.afterOpen = afterOpen
        self.reservations = Reservations()
    }

    /// This store (the same files, quota and reservations) with `directories` as the only
    /// ones inside a protected directory that attachments may come from: a service
    /// extension's own container, for the files of that extension's call.
    public func allowing(_ directories: [String]) -> AttachmentStore {
        var copy = self
        copy.allowedDirectories = directories
        return copy
    }

    /// The app's folder of the store. Only for a valid bundle identifier
    /// (`BundleIdentifier.check`): anything else could name another folder (`..`).
    public func directory(for bundleIdentifier: String) -> URL {
        root.appendingPathComponent(bundleIdentifier, isDirectory: true)
    }

    /// `ingest` on a thread of its own, off the caller's actor: file I/O may block (a slow
    /// or network file system) and must never stall the engine.
    public func ingestOffActor(_ attachments: [AttachmentValue], bundleIdentifier: String, appDirectory: String?) async throws(NotificationError) -> [AttachmentValue] {
        guard !attachments.isEmpty else { return [] }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[AttachmentValue], NotificationError>, Never>) in
            DispatchQueue.global(qos: .utility).async {
                continuation.resume(returning: Result { () throws(NotificationError) in
                    try ingest(attachments, bundleIdentifier: bundleIdentifier, appDirectory: appDirectory)
                })
            }
        }
        return try result.get()
    }

    /// Validates the attachments and moves (or copies) them into the store. On any error
    /// nothing stays changed: the copies made so far are deleted and no original was
    /// removed (originals go only once every attachment is in the store). Blocks on file
    /// I/O: call `ingestOffActor` from an actor.
    public func ingest(_ attachments: [AttachmentValue], bundleIdentifier: String, appDirectory: String?) throws(NotificationError) -> [AttachmentValue] {
        guard !attachments.isEmpty else { return [] }
        guard attachments.count <= maximumAttachmentsPerRequest else {
            throw NotificationError(.invalidRequest, "a notification may carry at most \(maximumAttachmentsPerRequest) attachments (got \(attachments.count))")
        }
        try BundleIdentifier.check(bundleIdentifier)
        let folder = directory(for: bundleIdentifier)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw NotificationError(.attachmentMoveIntoDataStoreFailed, "cannot create the attachment store at \(folder.path): \(error)")
        }
        let folderDescriptor = open(folder.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard folderDescriptor >= 0 else {
            throw NotificationError(.attachmentMoveIntoDataStoreFailed, "cannot open the attachment store at \(folder.path): \(String(cString: strerror(errno)))")
        }
        defer { close(folderDescriptor) }
        let places = Places(store: self, ownFolder: folder.path, appDirectory: appDirectory)
        var copies: [String] = []
        var sources: [Source] = []
        // One descriptor per distinct directory the files lie in, held until the originals go.
        var directories = OpenDirectories()
        defer { directories.closeAll() }
        // Bytes this request reserved in the app's folder: released once its files are in
        // the store (and counted by `usage`) or deleted.
        var reserved: Int64 = 0
        defer { if reserved > 0 { reservations.release(reserved, for: bundleIdentifier) } }
        var result: [AttachmentValue] = []
        do throws(NotificationError) {
            for attachment in attachments {
                let source = try Source.open(attachment.path, places: places, directories: &directories)
                // The file's descriptor only for this attachment; its directory's until the end.
                defer { source.closeFile() }
                sources.append(source)
                let type = try AttachmentTypes.resolve(pathExtension: (source.name as NSString).pathExtension, typeHint: attachment.options.typeHint)
                try AttachmentTypes.check(size: source.size, type: type, path: source.path)
                // Reserved first, then the folder counted: of two adds of one app, the later
                // reservation sees the earlier one, reserved or stored (docs/security.md).
                let others = reservations.reserve(source.size, for: bundleIdentifier) - reserved
                reserved += source.size
                let left = quota - usage(bundleIdentifier) - others
                guard source.size <= left else {
                    throw NotificationError(.attachmentMoveIntoDataStoreFailed,
                        "the app's attachment store is full: \(attachment.identifier) needs \(source.size) bytes, \(max(left, 0)) of \(quota) left")
                }
                afterOpen?(source.path)
                let ext = (source.name as NSString).pathExtension.isEmpty ? (type.extensions.first ?? "bin") : (source.name as NSString).pathExtension.lowercased()
                let name = "\(UUID().uuidString.lowercased()).\(ext)"
                // The bytes are checked as copied: what is stored is what was checked,
                // whatever happens to the original meanwhile; no more than was reserved.
                _ = try source.copy(to: name, in: folderDescriptor, folder: folder.path, type: type, limit: source.size) { copies.append($0) }
                var stored = attachment
                stored.path = folder.appendingPathComponent(name).path
                stored.type = type.uti
                result.append(stored)
            }
        } catch {
            for copy in copies { unlinkat(folderDescriptor, copy, 0) }
            throw error
        }
        // Every file is in the store: now the originals that move (not those copied from
        // the app's bundle or its own store) go, if their names still hold the same files.
        for source in sources where !source.mustCopy { source.removeOriginal() }
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
}

/// A directory's identity: device and inode.
private struct FileID: Hashable {
    var device: UInt64
    var inode: UInt64

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        self.init(info)
    }
}

/// The directories a walk watches for: where files are refused, where they are copied.
private struct Places {
    var protected: Set<FileID>
    var allowed: Set<FileID>
    var ownFolder: FileID?
    var appDirectory: FileID?

    init(store: AttachmentStore, ownFolder: String, appDirectory: String?) {
        protected = Set(([store.root.path] + store.protectedDirectories).compactMap { FileID(path: $0) })
        allowed = Set(store.allowedDirectories.compactMap { FileID(path: $0) })
        self.ownFolder = FileID(path: ownFolder)
        self.appDirectory = appDirectory.flatMap { $0.isEmpty ? nil : FileID(path: $0) }
    }
}

/// An attachment's source file, opened without following links, with the directory that
/// holds it.
private struct Source {
    let path: String
    let name: String
    let descriptor: Int32
    let parent: Int32
    let id: FileID
    let size: Int64
    /// In the app's own directory or its own folder of the store: copied, not moved.
    let mustCopy: Bool

    private static func errorText() -> String { String(cString: strerror(errno)) }

    static func open(_ given: String, places: Places, directories: inout OpenDirectories) throws(NotificationError) -> Source {
        guard given.hasPrefix("/") else {
            throw NotificationError(.attachmentInvalidURL, "attachment URL must be an absolute file URL (got \(given))")
        }
        // `.` and `..` resolved in the text: with no link followed, that is what the walk would do.
        let path = URL(fileURLWithPath: given).standardizedFileURL.path
        let components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let name = components.last, name != "..", name != "." else {
            throw NotificationError(.attachmentInvalidURL, "\(path) is not a file")
        }
        var directory = Glibc.open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw NotificationError(.attachmentInvalidURL, "cannot open /: \(errorText())") }
        // The directories from `/` to the current one, as walked: a symbolic link to a
        // directory is read and its text walked the same way (never followed by the kernel),
        // so every directory the file lies under is seen and checked, however it is named.
        var chain: [FileID] = []
        var rootInfo = stat()
        if fstat(directory, &rootInfo) == 0 { chain.append(FileID(rootInfo)) }
        var pending = ArraySlice(components.dropLast())
        var links = 0
        var walked = ""
        while let component = pending.first {
            pending = pending.dropFirst()
            if component == "." { continue }
            walked += "/" + component
            let next = openat(directory, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 {
                let code = errno
                if let target = Self.linkText(directory, component) {
                    links += 1
                    guard links <= maximumLinks else {
                        Glibc.close(directory)
                        throw NotificationError(.attachmentInvalidURL, "\(path): too many symbolic links in its directories")
                    }
                    if target.hasPrefix("/") {
                        let root = Glibc.open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                        guard root >= 0 else { Glibc.close(directory); throw NotificationError(.attachmentInvalidURL, "cannot open /: \(errorText())") }
                        Glibc.close(directory)
                        directory = root
                        chain.removeSubrange(1...)
                    }
                    pending = ArraySlice(target.split(separator: "/", omittingEmptySubsequences: true).map(String.init)) + pending
                    continue
                }
                Glibc.close(directory)
                if code == ENOENT { throw NotificationError(.attachmentInvalidURL, "no file at \(path)") }
                throw NotificationError(.attachmentInvalidURL, "cannot open \(walked) on the way to \(path): \(String(cString: strerror(code)))")
            }
            Glibc.close(directory)
            directory = next
            var info = stat()
            guard fstat(directory, &info) == 0 else {
                Glibc.close(directory)
                throw NotificationError(.attachmentInvalidURL, "cannot inspect \(walked): \(errorText())")
            }
            if component == ".." {
                if chain.count > 1 { chain.removeLast() }
            } else {
                chain.append(FileID(info))
            }
        }
        let inProtected = chain.contains { places.protected.contains($0) }
        let inAllowed = chain.contains { places.allowed.contains($0) }
        let inOwnFolder = places.ownFolder.map { chain.contains($0) } ?? false
        let inAppDirectory = places.appDirectory.map { chain.contains($0) } ?? false
        // A look before opening, so that a device or a FIFO is not even opened; the check
        // that counts is on the opened descriptor below.
        var before = stat()
        if fstatat(directory, name, &before, AT_SYMLINK_NOFOLLOW) == 0 {
            if let refusal = Self.refusal(before, path: path) {
                Glibc.close(directory)
                throw refusal
            }
        }
        let descriptor = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        if descriptor < 0 {
            let code = errno
            Glibc.close(directory)
            if code == ELOOP { throw NotificationError(.attachmentInvalidURL, "\(path) is a symbolic link; attach the file itself") }
            if code == ENOENT { throw NotificationError(.attachmentInvalidURL, "no file at \(path)") }
            throw NotificationError(.attachmentInvalidURL, "cannot open \(path): \(String(cString: strerror(code)))")
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            Glibc.close(descriptor)
            Glibc.close(directory)
            throw NotificationError(.attachmentInvalidURL, "cannot inspect \(path): \(errorText())")
        }
        if let refusal = Self.refusal(info, path: path) {
            Glibc.close(descriptor)
            Glibc.close(directory)
            throw refusal
        }
        // In the app's own folder of the store: a copy (an attachment of a delivered
        // notification added again). Anywhere else in the store or the data directory —
        // another app's files, the daemon's own — is refused, however the path is spelled.
        if inProtected, !inOwnFolder, !inAllowed {
            Glibc.close(descriptor)
            Glibc.close(directory)
            throw NotificationError(.attachmentInvalidURL, "\(path) lies in the notification daemon's data directory, which holds other apps' attachments and the daemon's own files; attach a file of the app's own")
        }
        // Files of one directory share its descriptor: a request holds one per directory.
        var parentInfo = stat()
        let parent = directories.keep(directory, id: fstat(directory, &parentInfo) == 0 ? FileID(parentInfo) : nil)
        return Source(path: path, name: name, descriptor: descriptor, parent: parent, id: FileID(info),
                      size: Int64(info.st_size), mustCopy: inOwnFolder || inAppDirectory)
    }

    /// Symbolic links followed in one path's directories, as the kernel's own limit (40).
    static let maximumLinks = 40

    /// The text of the symbolic link `name` in `directory`, or nil if it is none.
    private static func linkText(_ directory: Int32, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBytes { readlinkat(directory, name, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    private static func refusal(_ info: stat, path: String) -> NotificationError? {
        switch info.st_mode & S_IFMT {
        case S_IFREG: nil
        case S_IFLNK: NotificationError(.attachmentInvalidURL, "\(path) is a symbolic link; attach the file itself")
        case S_IFDIR: NotificationError(.attachmentInvalidURL, "The attachment URL \(path) is a directory, not a file.")
        default: NotificationError(.attachmentInvalidURL, "\(path) is not a regular file")
        }
    }

    /// Copies the opened file into `name` in the store's folder, at most `limit` bytes, and
    /// checks the bytes copied: their size, and the type's signature at their start.
    /// Returns the size. `created` is told the name once the file exists (for rollback).
    func copy(to name: String, in folder: Int32, folder folderPath: String, type: AttachmentFileType, limit: Int64, created: (String) -> Void) throws(NotificationError) -> Int64 {
        let output = openat(folder, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard output >= 0 else {
            throw NotificationError(.attachmentMoveIntoDataStoreFailed, "cannot create \(name) in the attachment store at \(folderPath): \(Self.errorText())")
        }
        created(name)
        defer { Glibc.close(output) }
        var header: [UInt8] = []
        var total: Int64 = 0
        var offset: off_t = 0
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw NotificationError(.attachmentInvalidURL, "cannot read \(path): \(Self.errorText())")
            }
            if n == 0 { break }
            offset += off_t(n)
            total += Int64(n)
            // The file grew since it was checked: past its kind's limit, or past what was
            // reserved for it in the app's quota.
            guard total <= limit else {
                var now = stat()
                let grown = fstat(descriptor, &now) == 0 ? max(Int64(now.st_size), total) : total
                if grown > type.kind.maximumSize {
                    throw NotificationError(.attachmentInvalidFileSize, "The \(type.kind.rawValue) attachment \(path) grew past the limit of \(type.kind.maximumSize) bytes while it was read.")
                }
                throw NotificationError(.attachmentMoveIntoDataStoreFailed, "\(path) grew while it was read (it had \(limit) bytes when checked); attach a file that is no longer being written")
            }
            if header.count < 64 { header += chunk[0..<min(n, 64 - header.count)] }
            var written = 0
            while written < n {
                let w = chunk.withUnsafeBytes { write(output, $0.baseAddress! + written, n - written) }
                if w < 0 {
                    if errno == EINTR { continue }
                    throw NotificationError(.attachmentMoveIntoDataStoreFailed, "cannot write into the attachment store at \(folderPath): \(Self.errorText())")
                }
                written += w
            }
        }
        try AttachmentTypes.check(size: total, type: type, path: path)
        try AttachmentTypes.check(header: header, type: type, path: path)
        guard fsync(output) == 0 else {
            throw NotificationError(.attachmentMoveIntoDataStoreFailed, "cannot write into the attachment store at \(folderPath): \(Self.errorText())")
        }
        return total
    }

    /// Removes the original's name, if it still names the file that was opened (an app
    /// that put another file there keeps it).
    func removeOriginal() {
        var info = stat()
        guard fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) == 0, FileID(info) == id else { return }
        unlinkat(parent, name, 0)
    }

    func closeFile() {
        Glibc.close(descriptor)
    }
}

/// The directories a request's files lie in, each opened once (by device and inode): up
/// to 100 attachments in one folder hold one descriptor, not 100.
private struct OpenDirectories {
    private var byID: [FileID: Int32] = [:]
    private var others: [Int32] = []

    /// The descriptor to keep for a directory just opened: an open one of the same
    /// directory (and the new one closed), or this one.
    mutating func keep(_ descriptor: Int32, id: FileID?) -> Int32 {
        guard let id else {
            others.append(descriptor)
            return descriptor
        }
        if let open = byID[id] {
            Glibc.close(descriptor)
            return open
        }
        byID[id] = descriptor
        return descriptor
    }

    mutating func closeAll() {
        for descriptor in byID.values { Glibc.close(descriptor) }
        for descriptor in others { Glibc.close(descriptor) }
        byID = [:]
        others = []
    }
}

/// Bytes reserved per app by `ingest`s in progress.
private final class Reservations: Sendable {
    private let bytes = Mutex<[String: Int64]>([:])

    /// Adds `size` to the app's reservations; returns what was reserved before.
    func reserve(_ size: Int64, for bundle: String) -> Int64 {
        bytes.withLock { bytes in
            let before = bytes[bundle, default: 0]
            bytes[bundle] = before + size
            return before
        }
    }

    func release(_ size: Int64, for bundle: String) {
        bytes.withLock { bytes in
            let left = bytes[bundle, default: 0] - size
            bytes[bundle] = left > 0 ? left : nil
        }
    }
}
