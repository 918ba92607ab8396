import Foundation
import TidingsTestSupport

/// A temporary data directory (short, for the socket path limit) and a manifest for the sample app.
struct DaemonFixture {
    let directory: URL
    var dataDirectory: String { directory.appendingPathComponent("data").path }
    var socket: String { dataDirectory + "/daemon.sock" }
    var manifest: String { directory.appendingPathComponent("manifest.json").path }

    init() throws {
        directory = URL(fileURLWithPath: "/tmp/tdt-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try writeSampleAppManifest(to: manifest)
    }

    func startDaemon(_ extra: [String] = []) throws -> ChildProcess {
        try ChildProcess(BuiltProducts.tidings, ["daemon", "--data-dir", dataDirectory, "--consent", "grant"] + extra, directory: directory)
    }

    func runApp(_ arguments: [String] = [], environment: [String: String] = [:]) throws -> ChildProcess {
        try ChildProcess(BuiltProducts.sampleApp, arguments, environment: ["TIDINGS_SOCKET": socket].merging(environment) { $1 }, directory: directory)
    }

    func cli(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await runTidings(arguments + ["--data-dir", dataDirectory])
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
