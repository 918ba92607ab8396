import ArgumentParser
import Foundation

@main
struct Tidings: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tidings",
        abstract: "Apple's notification system for Linux: the UserNotifications daemon and an APNs-compatible gateway.",
        subcommands: [
            Serve.self, Daemon.self, Open.self,
            Apps.self, Settings.self, Notifications.self, Location.self,
            GatewayCommand.self, Keys.self, Certs.self, Push.self, Status.self, Install.self,
        ])
}
