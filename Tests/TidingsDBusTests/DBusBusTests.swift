import Foundation
import Testing
import TidingsDBus
import TidingsTesting
import TidingsTestSupport

/// The client against a real `dbus-daemon --session` the test starts: the bus checks every
/// message it forwards, so what it accepts and delivers is marshalled right.
@Suite("D-Bus client on a real bus", .serialized)
struct DBusBusTests {
    @Test("Hello, ListNames and GetNameOwner; a missing name is nil")
    func busMethods() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        let connection = try await bus.connect()
        defer { Task { await connection.close() } }
        #expect(connection.uniqueName.hasPrefix(":"))
        let names = try await connection.callBus("ListNames").body.first?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(names.contains("org.freedesktop.DBus"))
        #expect(names.contains(connection.uniqueName))
        #expect(try await connection.nameOwner(connection.uniqueName) == connection.uniqueName)
        #expect(try await connection.nameOwner("org.example.Nobody") == nil)
        await #expect(throws: DBusError.self) { try await connection.callBus("NoSuchMethod") }
    }

    @Test("the abstract namespace")
    func abstractAddress() async throws {
        guard let bus = try await PrivateBus.start(abstract: true) else { return }
        defer { bus.stop() }
        #expect(bus.address.hasPrefix("unix:abstract="))
        let connection = try await bus.connect()
        #expect(connection.uniqueName.hasPrefix(":"))
        await connection.close()
    }

    @Test("NameOwnerChanged: a match rule brings the signals of a name that comes and goes")
    func nameOwnerChanged() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        let watcher = try await bus.connect()
        defer { Task { await watcher.close() } }
        try await watcher.addMatch("type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged'")
        let other = try await bus.connect()
        try await other.callBus("RequestName", [.string("org.example.Tidings"), .uint32(4)])
        await other.close()
        var seen: [[String]] = []
        for await signal in watcher.signals {
            let args = signal.body.compactMap(\.stringValue)
            if args.first == "org.example.Tidings" { seen.append(args) }
            if seen.count == 2 { break }
        }
        #expect(seen == [["org.example.Tidings", "", other.uniqueName], ["org.example.Tidings", other.uniqueName, ""]])
    }

    @Test("both ways through the bus: every type in a signal from us, and gdbus's signal decoded")
    func signalsBothWays() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        let receiver = try await bus.connect()
        defer { Task { await receiver.close() } }
        try await receiver.addMatch("type='signal',interface='org.example.Test'")
        let sender = try await bus.connect()
        defer { Task { await sender.close() } }
        try await sender.send(.signal(path: "/org/example", interface: "org.example.Test", member: "Every", body: DBusMarshallingTests.every))
        // The bus's own NameAcquired comes first; only the test's interface counts.
        var iterator = receiver.signals.filter { $0.interface == "org.example.Test" }.makeAsyncIterator()
        let mine = await iterator.next()
        #expect(mine?.body == DBusMarshallingTests.every)
        #expect(mine?.sender == sender.uniqueName)

        guard requireTool(FileManager.default.isExecutableFile(atPath: "/usr/bin/gdbus"), "gdbus (Debian libglib2.0-bin)") else { return }
        let emitted = try await runTool("/usr/bin/gdbus", ["emit", "--session", "--object-path", "/org/example", "--signal", "org.example.Test.Foreign",
                                                     "{'urgency': <byte 2>, 'x': <int64 -5>}", "(3, 'ab', @ad [1.5])", "@ao ['/a', '/b']"], environment: bus.environment)
        #expect(emitted.status == 0, "\(emitted.output)")
        let foreign = await iterator.next()
        #expect(foreign?.member == "Foreign")
        #expect(foreign?.body == [
            .dictionary(key: .string, value: .variant, [(.string("urgency"), .variant(.byte(2))), (.string("x"), .variant(.int64(-5)))]),
            .structure([.int32(3), .string("ab"), .array(.double, [.double(1.5)])]),
            .array(.objectPath, [.objectPath("/a"), .objectPath("/b")]),
        ])
    }

    @Test("a call to us gets UnknownMethod (Peer.Ping its return); a call to a name that went away fails")
    func callsToUs() async throws {
        guard let bus = try await PrivateBus.start() else { return }
        defer { bus.stop() }
        let a = try await bus.connect()
        defer { Task { await a.close() } }
        let b = try await bus.connect()
        do {
            try await a.call(.methodCall(destination: b.uniqueName, path: "/", interface: "org.example.X", member: "Y"))
            Issue.record("a call to an object we do not serve must fail")
        } catch let error as DBusError {
            #expect(error.name == "org.freedesktop.DBus.Error.UnknownMethod")
        }
        try await a.call(.methodCall(destination: b.uniqueName, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping"))
        await b.close()
        await #expect(throws: DBusError.self) { try await a.call(.methodCall(destination: b.uniqueName, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping")) }
        await #expect(throws: DBusError.self) { try await b.callBus("ListNames") }
    }

    @Test("a bus that is not there: a clear error")
    func noBus() async throws {
        await #expect(throws: DBusError.self) { try await DBusConnection.session(environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"]) }
        await #expect(throws: DBusError.self) { try await DBusConnection.session(environment: [:]) }
    }
}
