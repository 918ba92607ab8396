import Foundation
import Testing
import TidingsCore
import TidingsDaemon
import TidingsTesting

@Suite("App manifests")
struct ManifestTests {
    func write(_ json: String) throws -> String {
        let dir = TemporaryDirectories.make(prefix: "manifest-")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let bin = dir.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for name in ["App", "Service", "Content"] {
            let path = bin.appendingPathComponent(name).path
            FileManager.default.createFile(atPath: path, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o755])
        }
        let path = dir.appendingPathComponent("manifest.json").path
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("a full manifest: relative paths resolved, extensions with their attributes")
    func full() throws {
        let path = try write("""
            {"bundleIdentifier": "com.example.chat", "displayName": "Chat", "executable": "bin/App",
             "extensions": [
               {"bundleIdentifier": "com.example.chat.service", "point": "service", "executable": "bin/Service"},
               {"bundleIdentifier": "com.example.chat.content", "point": "content", "executable": "bin/Content",
                "attributes": {"UNNotificationExtensionCategory": ["chat", "call"],
                               "UNNotificationExtensionInitialContentSizeRatio": 0.5,
                               "UNNotificationExtensionDefaultContentHidden": true}}
             ],
             "localizations": {"en": {"hello": "Hello %@"}}}
            """)
        let record = try AppManifest.load(path: path)
        let dir = (path as NSString).deletingLastPathComponent
        #expect(record.bundleIdentifier == "com.example.chat")
        #expect(record.displayName == "Chat")
        #expect(record.executable == URL(fileURLWithPath: dir + "/bin/App").resolvingSymlinksInPath().path)
        #expect(record.extensions.map(\.point) == [.service, .content])
        #expect(record.extensions[1].attributes["UNNotificationExtensionCategory"] == .array([.string("chat"), .string("call")]))
        #expect(record.extensions[1].attributes["UNNotificationExtensionInitialContentSizeRatio"] == .double(0.5))
        #expect(record.extensions[1].attributes["UNNotificationExtensionDefaultContentHidden"] == .bool(true))
        #expect(record.localizedStrings["en"]?["hello"] == "Hello %@")
    }

    @Test("bad manifests name the problem", arguments: [
        (#"{"executable": "bin/App"}"#, "missing key \"bundleIdentifier\""),
        (#"{"bundleIdentifier": "app", "executable": "bin/App"}"#, "reverse-DNS"),
        (#"{"bundleIdentifier": "com.example.a", "executable": "bin/Nope"}"#, "does not exist or is not executable"),
        (#"{"bundleIdentifier": "com.example.a", "executable": "bin/App", "extensions": [{"bundleIdentifier": "com.other.x", "point": "service", "executable": "bin/Service"}]}"#, "prefix"),
        (#"{"bundleIdentifier": "com.example.a", "executable": "bin/App", "extensions": [{"bundleIdentifier": "com.example.a.x", "point": "widget", "executable": "bin/Service"}]}"#, "unknown point"),
        ("not json", "is not a valid manifest"),
        (#"{"bundleIdentifier": "com.example.a", "executable": "bin/App", "extensions": [{"bundleIdentifier": "com.example.a.c", "point": "content", "executable": "bin/Service"}]}"#, "needs UNNotificationExtensionCategory"),
        (#"{"bundleIdentifier": "com.example.a", "executable": "bin/App", "extensions": [{"bundleIdentifier": "com.example.a.c", "point": "content", "executable": "bin/Service", "attributes": {"UNNotificationExtensionCategory": "x", "UNNotificationExtensionInitialContentSizeRatio": -1}}]}"#, "must be above 0"),
    ])
    func invalid(json: String, message: String) throws {
        let path = try write(json)
        #expect {
            _ = try AppManifest.load(path: path)
        } throws: { error in
            "\(error)".contains(message)
        }
    }
}
