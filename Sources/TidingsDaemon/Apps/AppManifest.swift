import Foundation
import TidingsCore
import TidingsEngine

/// An app's manifest: the Info.plist of Linux. JSON, next to (or naming) the executable.
///
///     {
///       "bundleIdentifier": "com.example.sample",
///       "displayName": "Sample",
///       "executable": "bin/SampleApp",
///       "arguments": [],
///       "extensions": [
///         { "bundleIdentifier": "com.example.sample.service",
///           "point": "service", "executable": "bin/SampleService" }
///       ],
///       "localizations": { "en": { "greeting": "Hello %@" } }
///     }
///
/// Relative paths are relative to the manifest's folder. See docs/app-manifest.md.
public struct AppManifest: Sendable, Hashable, Codable {
    public struct Extension: Sendable, Hashable, Codable {
        public var bundleIdentifier: String
        /// `service`, `content`, or the full extension point identifier.
        public var point: String
        public var executable: String
        public var attributes: [String: PropertyListValue]?

        /// Read from the raw JSON (any property-list value), not by `Codable`.
        enum CodingKeys: String, CodingKey { case bundleIdentifier, point, executable }
    }

    public var bundleIdentifier: String
    public var displayName: String?
    public var executable: String
    public var arguments: [String]?
    public var extensions: [Extension]?
    public var localizations: [String: [String: String]]?

    /// Reads and checks a manifest file, resolving paths against its folder.
    public static func load(path: String, now: Date = Date()) throws(ManifestError) -> AppRecord {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ManifestError("cannot read the manifest \(url.path): \(error.localizedDescription)")
        }
        var manifest: AppManifest
        do {
            manifest = try JSONDecoder().decode(AppManifest.self, from: data)
        } catch {
            throw ManifestError("\(url.path) is not a valid manifest: \(describe(error))")
        }
        // Extension attributes are free-form: take them from the parsed JSON.
        if let raw = try? JSONValue(parsing: data), let extensions = raw["extensions"]?.arrayValue {
            for (index, ext) in extensions.enumerated() where index < manifest.extensions?.count ?? 0 {
                if case .dictionary(let attributes)? = ext["attributes"]?.propertyListValue {
                    manifest.extensions?[index].attributes = attributes
                }
            }
        }
        return try manifest.record(directory: url.deletingLastPathComponent().path, now: now)
    }

    public func record(directory: String, now: Date) throws(ManifestError) -> AppRecord {
        try Self.checkBundleIdentifier(bundleIdentifier, what: "bundleIdentifier")
        let executablePath = try Self.executable(executable, directory: directory, what: "executable")
        var extensionRecords: [AppExtensionRecord] = []
        for ext in extensions ?? [] {
            try Self.checkBundleIdentifier(ext.bundleIdentifier, what: "extension bundleIdentifier")
            guard ext.bundleIdentifier.hasPrefix(bundleIdentifier + ".") else {
                throw ManifestError("extension \(ext.bundleIdentifier) must have the app's bundle identifier \(bundleIdentifier) as its prefix, as on iOS")
            }
            let point: AppExtensionRecord.Point
            switch ext.point {
            case "service", AppExtensionRecord.Point.service.rawValue: point = .service
            case "content", AppExtensionRecord.Point.content.rawValue: point = .content
            default: throw ManifestError("extension \(ext.bundleIdentifier) has an unknown point \"\(ext.point)\" (service or content)")
            }
            let path = try Self.executable(ext.executable, directory: directory, what: "executable of \(ext.bundleIdentifier)")
            let record = AppExtensionRecord(bundleIdentifier: ext.bundleIdentifier, point: point, executable: path, attributes: ext.attributes ?? [:])
            if point == .content {
                // The Info.plist keys of a content extension (docs/content-extensions.md).
                do {
                    _ = try ContentExtensionDeclaration(extension: record)
                } catch {
                    throw ManifestError(error.description)
                }
            }
            extensionRecords.append(record)
        }
        return AppRecord(
            bundleIdentifier: bundleIdentifier,
            displayName: displayName ?? bundleIdentifier,
            executable: executablePath,
            arguments: arguments ?? [],
            directory: directory,
            extensions: extensionRecords,
            localizedStrings: localizations ?? [:],
            installedAt: now)
    }

    static func checkBundleIdentifier(_ identifier: String, what: String) throws(ManifestError) {
        guard BundleIdentifier.isValid(identifier) else {
            throw ManifestError("\(what) \"\(identifier)\" is not a reverse-DNS identifier like com.example.app (letters, digits, '-' and '.')")
        }
    }

    static func executable(_ path: String, directory: String, what: String) throws(ManifestError) -> String {
        guard !path.isEmpty else { throw ManifestError("\(what) is empty") }
        let absolute = path.hasPrefix("/") ? path : directory + "/" + path
        let resolved = URL(fileURLWithPath: absolute).resolvingSymlinksInPath().standardizedFileURL.path
        guard FileManager.default.isExecutableFile(atPath: resolved) else {
            throw ManifestError("\(what) \(resolved) does not exist or is not executable")
        }
        return resolved
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "missing key \"\(key.stringValue)\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context), DecodingError.dataCorrupted(let context):
            context.codingPath.map(\.stringValue).joined(separator: ".") + ": " + context.debugDescription
        default: "\(error)"
        }
    }
}

public struct ManifestError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
