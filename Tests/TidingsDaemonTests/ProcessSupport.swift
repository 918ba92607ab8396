import Foundation
import Synchronization
import TidingsTesting

/// The package's built executables: siblings of the test bundle.
enum Built {
    static var directory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    }
    static var tidings: String { directory.appendingPathComponent("tidings").path }
    static var sampleApp: String { directory.appendingPathComponent("SampleApp").path }
}

/// A child process whose output goes to a file the test reads; killed by the test.
final class Child: Sendable {
    let process: Process
    let outputPath: String

    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: URL) throws {
        outputPath = directory.appendingPathComponent("\((executable as NSString).lastPathComponent)-\(UUID().uuidString.prefix(8)).log").path
        FileManager.default.createFile(atPath: outputPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    func waitForOutput(_ text: String) async -> Bool {
        await eventually { self.output.contains(text) }
    }

    func kill(signal: Int32 = SIGTERM) {
        if process.isRunning { Foundation.kill(process.processIdentifier, signal) }
        process.waitUntilExit()
    }
}

/// Runs the `tidings` CLI to completion.
func tidings(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Built.tidings)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// A temporary data directory (short, for the socket path limit) and a manifest for the sample app.
struct DaemonFixture {
    let directory: URL
    var dataDirectory: String { directory.appendingPathComponent("data").path }
    var socket: String { dataDirectory + "/daemon.sock" }
    var manifest: String { directory.appendingPathComponent("manifest.json").path }

    init() throws {
        directory = URL(fileURLWithPath: "/tmp/tdt-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let manifest = """
            {"bundleIdentifier": "com.example.tidings.sample", "displayName": "Tidings Sample",
             "executable": "\(Built.sampleApp)", "arguments": ["--listen"]}
            """
        try manifest.write(toFile: self.manifest, atomically: true, encoding: .utf8)
    }

    func startDaemon(_ extra: [String] = []) throws -> Child {
        try Child(Built.tidings, ["daemon", "--data-dir", dataDirectory, "--consent", "grant"] + extra, directory: directory)
    }

    func runApp(_ arguments: [String] = [], environment: [String: String] = [:]) throws -> Child {
        try Child(Built.sampleApp, arguments, environment: ["TIDINGS_SOCKET": socket].merging(environment) { $1 }, directory: directory)
    }

    func cli(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try tidings(arguments + ["--data-dir", dataDirectory])
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
