import Foundation
import Testing
import TidingsTestSupport

/// The web center in headless Chromium through the real path: `tidings daemon`, the
/// WebCenterTestApp process and the page (Tests/Browser/web_center.py, Playwright for
/// Python on the system's Chromium). Each check of the script is one expectation here.
@Suite struct WebCenterBrowserTests {
    static var browserPython: String? {
        var candidates: [String] = []
        if let p = ProcessInfo.processInfo.environment["TIDINGS_TEST_BROWSER_PYTHON"] { candidates.append(p) }
        candidates.append(BuiltProducts.packageRoot.appendingPathComponent(".ci-work/venv-browser/bin/python").path)
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    // The script waits up to a minute for each step (a loaded machine); a run takes about one.
    @Test(.timeLimit(.minutes(10))) func theCenterInABrowser() async throws {
        guard requireTool(Self.browserPython != nil, "a Python with playwright (.ci/run: .ci-work/venv-browser)"),
              requireTool(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"), "chromium (apt-get install chromium)") else { return }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("web-center-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        var arguments = [BuiltProducts.packageRoot.appendingPathComponent("Tests/Browser/web_center.py").path,
                         "--tidings", BuiltProducts.tidings, "--app", BuiltProducts.path("WebCenterTestApp"), "--work", work.path]
        // The screenshots in docs/ are made by this test when asked (TIDINGS_WEB_SHOTS=1).
        if ProcessInfo.processInfo.environment["TIDINGS_WEB_SHOTS"] != nil {
            arguments += ["--shots", BuiltProducts.packageRoot.appendingPathComponent("docs/images").path]
        }
        if ProcessInfo.processInfo.environment["TIDINGS_WEB_BENCH"] != nil { arguments.append("--bench") }
        // runTool waits on a thread of its own: the script runs for many seconds.
        let (status, output) = try await runTool(Self.browserPython!, arguments)
        let lines = output.split(separator: "\n").map(String.init)
        let checks = lines.filter { $0.hasPrefix("ok ") || $0.hasPrefix("FAIL ") }
        for line in checks where line.hasPrefix("FAIL ") { Issue.record(Comment(rawValue: line)) }
        for line in lines where line.hasPrefix("bench ") { print(line) }
        #expect(checks.count >= 80, "the script stopped early:\n\(output.suffix(3000))")
        #expect(status == 0, "\(output.suffix(3000))")
    }
}
