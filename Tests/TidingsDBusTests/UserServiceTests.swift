import Foundation
import Testing
import TidingsDaemon
import TidingsTestSupport

@Suite("systemd user service")
struct UserServiceTests {
    @Test("tidings install --user writes the unit with its own path, restart on failure and a clean stop; the shipped unit is the same for /usr/local/bin")
    func install() async throws {
        let directory = "/tmp/tdb-unit-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await runTidings(["install", "--user", "--unit-dir", directory])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("systemctl --user enable --now tidings.service"))
        let unit = try String(contentsOfFile: directory + "/tidings.service", encoding: .utf8)
        let execStart = unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") }.map(String.init) ?? ""
        #expect(execStart == "ExecStart=\(URL(fileURLWithPath: BuiltProducts.tidings).resolvingSymlinksInPath().path) daemon --consent grant --presenter desktop")
        for line in ["Restart=on-failure", "KillSignal=SIGTERM", "WantedBy=default.target", "Type=exec"] {
            #expect(unit.contains("\n\(line)\n"), "\(line)")
        }
        #expect(unit == UserService.unit(executable: URL(fileURLWithPath: BuiltProducts.tidings).resolvingSymlinksInPath().path))

        let shipped = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("Support/systemd/tidings.service"), encoding: .utf8)
        #expect(shipped == UserService.unit(executable: "/usr/local/bin/tidings"), "Support/systemd/tidings.service is the generated unit")

        #expect(try await runTidings(["install"]).status != 0, "only --user")
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") {
            // Without a user manager here, the unit is checked as a system one (same syntax).
            let verify = try await runTool("/usr/bin/systemd-analyze", ["verify", directory + "/tidings.service"], environment: [:])
            #expect(verify.status == 0 && !verify.output.contains("tidings.service:"), "systemd-analyze verify: \(verify.output)")
        }
    }

    @Test("a path with a space or a percent sign is quoted for systemd")
    func quoting() {
        #expect(UserService.unit(executable: "/opt/my apps/tidings").contains("ExecStart=\"/opt/my apps/tidings\" daemon"))
        #expect(UserService.unit(executable: "/opt/100%/tidings").contains("ExecStart=\"/opt/100%%/tidings\" daemon"))
    }
}
