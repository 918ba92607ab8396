import Foundation
import Testing
import TidingsTestSupport
import TidingsTesting

/// `tidings gateway` and `tidings serve` declare each option they share once: the same help,
/// the same parsing and the same answer to a bad value.
@Suite("Gateway and serve options")
struct ServerOptionsTests {
    /// `--option` → its help entry (the lines from its name to the next option), white space folded.
    static func helpEntries(_ help: String) -> [String: String] {
        var entries: [String: String] = [:]
        var current: String?
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop { $0 == " " }
            if line.hasPrefix("  -"), let name = trimmed.split(separator: " ").first {
                current = String(name)
                entries[String(name)] = ""
            } else if line.isEmpty || !line.hasPrefix(" ") {
                current = nil
                continue
            }
            if let current { entries[current, default: ""] += " " + trimmed.split(separator: " ").joined(separator: " ") }
        }
        return entries
    }

    /// What a refused command said, without the lines that name the command (usage, where to find help).
    static func refusal(_ output: String) -> String {
        output.split(separator: "\n").filter { !$0.hasPrefix("Usage:") && !$0.hasPrefix("  See '") && !$0.contains("--help' for more") }.joined(separator: "\n")
    }

    @Test("every option both commands take has one help text; a bad --log-level or --commit-batch is refused alike, non-zero")
    func sharedOptionsAreOne() async throws {
        guard requireTool(FileManager.default.isExecutableFile(atPath: BuiltProducts.tidings), "the tidings executable") else { return }
        let gatewayHelp = try await runTidings(["gateway", "--help"]), serveHelp = try await runTidings(["serve", "--help"])
        #expect(gatewayHelp.status == 0 && serveHelp.status == 0)
        let gateway = Self.helpEntries(gatewayHelp.output), serve = Self.helpEntries(serveHelp.output)
        let shared = Set(gateway.keys).intersection(serve.keys).subtracting(["-h,"])
        #expect(shared.isSuperset(of: ["--data-dir", "--log-level", "--listen", "--commit-batch"]), "\(shared.sorted())")
        for option in shared.sorted() {
            #expect(gateway[option] == serve[option], "\(option): gateway says \(gateway[option] ?? "") — serve says \(serve[option] ?? "")")
        }

        let dir = TemporaryDirectories.make(prefix: "tidings-options-").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Nothing may listen on a fixed port should a value be taken after all.
        let safe = ["--data-dir", dir, "--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0", "--admin-listen", "off"]
        for bad in [["--log-level", "loud"], ["--commit-batch", "0"]] {
            let byGateway = try await runTidings(["gateway"] + safe + bad), byServe = try await runTidings(["serve", "--consent", "deny", "--no-web"] + safe + bad)
            #expect(byGateway.status != 0 && byServe.status != 0, "\(byGateway.output)\n\(byServe.output)")
            #expect(byGateway.output.contains(bad[0]), "\(byGateway.output)")
            #expect(Self.refusal(byGateway.output) == Self.refusal(byServe.output), "\(byGateway.output)\n—\n\(byServe.output)")
            #expect(!byGateway.output.contains("provider API on") && !byServe.output.contains("daemon socket"))
        }
    }
}
