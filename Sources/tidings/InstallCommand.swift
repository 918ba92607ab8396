import ArgumentParser
import Foundation
import TidingsDaemon

struct Install: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Install the daemon as a systemd user service: writes tidings.service to ~/.config/systemd/user (docs/desktop.md).")

    @Flag(help: "A user service (the only kind).") var user = false

    @Option(name: .customLong("unit-dir"), help: "Where to write the unit (default: $XDG_CONFIG_HOME/systemd/user or ~/.config/systemd/user).")
    var unitDirectory: String?

    @Flag(name: .customLong("print"), help: "Print the unit instead of writing it.") var printOnly = false

    func run() async throws {
        guard user else { throw ValidationError("only a user service is supported: tidings install --user") }
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
        let executablePath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? executable
        let unit = UserService.unit(executable: executablePath)
        if printOnly {
            print(unit, terminator: "")
            return
        }
        let directory = unitDirectory ?? UserService.unitDirectory()
        let path = directory + "/" + UserService.unitName
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Data(unit.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CLIError("cannot write \(path): \(error.localizedDescription)")
        }
        print("""
            wrote \(path) (ExecStart=\(executablePath) daemon …)
            start it now and at every login:
              systemctl --user daemon-reload
              systemctl --user enable --now \(UserService.unitName)
            its log: journalctl --user -u \(UserService.unitName)
            """)
    }
}
