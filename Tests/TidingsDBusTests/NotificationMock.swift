import Foundation
import Testing
import TidingsDBus
import TidingsTesting
import TidingsTestSupport

/// python-dbusmock's `notification_daemon` template on a private bus: a real
/// `org.freedesktop.Notifications` that records every call and emits the signals a test asks for.
final class NotificationMock: Sendable {
    let process: ChildProcess
    let control: DBusConnection

    static var available: Bool {
        FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dbusmock/templates/notification_daemon.py")
    }

    /// nil when python3-dbusmock is missing (a failure under CI).
    static func start(on bus: PrivateBus, capabilities: String = "body body-markup body-hyperlinks actions inline-reply") async throws -> NotificationMock? {
        guard requireTool(available, "python-dbusmock (Debian python3-dbusmock)") else { return nil }
        let process = try ChildProcess("/usr/bin/python3", ["-m", "dbusmock", "--template", "notification_daemon", "-p", "{\"capabilities\": \"\(capabilities)\"}"],
                                       environment: bus.environment, directory: bus.directory, name: "dbusmock")
        let control = try await bus.connect()
        guard await eventually({ (try? await control.nameOwner("org.freedesktop.Notifications")) != nil }) else {
            await process.stop(signal: SIGKILL)
            Issue.record("dbusmock did not take org.freedesktop.Notifications: \(process.output)")
            return nil
        }
        return NotificationMock(process: process, control: control)
    }

    private init(process: ChildProcess, control: DBusConnection) {
        self.process = process
        self.control = control
    }

    private func mock(_ member: String, _ body: [DBusValue] = []) async throws -> DBusMessage {
        try await control.call(.methodCall(destination: "org.freedesktop.Notifications", path: "/org/freedesktop/Notifications",
                                           interface: "org.freedesktop.DBus.Mock", member: member, body: body))
    }

    /// The calls of `member` the server got, oldest first, each as its arguments.
    func calls(_ member: String) async throws -> [[DBusValue]] {
        let reply = try await mock("GetCalls")
        return (reply.body.first?.arrayValue ?? []).compactMap { call in
            guard case .structure(let parts) = call, parts.count == 3, parts[1].stringValue == member else { return nil }
            return parts[2].arrayValue?.map { if case .variant(let inner) = $0 { inner } else { $0 } }
        }
    }

    /// Waits for the `count`-th Notify and returns its arguments.
    func notify(_ count: Int) async throws -> [DBusValue]? {
        guard await eventually({ ((try? await self.calls("Notify")) ?? []).count >= count }) else { return nil }
        return try await calls("Notify")[count - 1]
    }

    /// Emits a signal of the server, as if the person acted.
    func emit(_ member: String, _ signature: String, _ args: [DBusValue]) async throws {
        _ = try await mock("EmitSignal", [.string("org.freedesktop.Notifications"), .string(member), .signature(signature), .array(.variant, args.map { .variant($0) })])
    }

    func stop() async {
        await process.stop(signal: SIGKILL)
        await control.close()
    }
}

extension Array where Element == DBusValue {
    /// A Notify call's hints (`a{sv}`, the 7th argument) as a dictionary.
    var notifyHints: [String: DBusValue] {
        guard count == 8, let entries = self[6].arrayValue else { return [:] }
        var hints: [String: DBusValue] = [:]
        for case .dictEntry(let key, let value) in entries {
            if let key = key.stringValue { hints[key] = if case .variant(let inner) = value { inner } else { value } }
        }
        return hints
    }
}
