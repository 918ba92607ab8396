import Crypto
import Foundation
import ServiceLifecycle
import Testing
import TidingsCore
@testable import TidingsDaemon
import TidingsGateway
import TidingsSQLite
import TidingsStorage
import TidingsTestSupport
import TidingsTesting

/// Delivery events (presented, answered) reach the gateway at least once (issue 11 §3): the
/// daemon keeps each until the gateway confirms it durable, across reconnects and restarts.
@Suite("Remote delivery events", .serialized)
struct DeliveryEventTests {
    static let bundle = "com.example.events"

    /// A gateway on `devicePort` (0: any) over `storage`, with the team key and the app.
    static func startGateway(directory: URL, devicePort: Int, clock: TestWallClock, storage: GatewayConfiguration.Storage,
                             teamKey: P256.Signing.PrivateKey) async throws -> GatewayRestartTests.RunningGateway {
        var configuration = GatewayConfiguration.forTests(dataDirectory: directory, devicePort: devicePort, clock: clock)
        configuration.storage = storage
        let gateway = try buildGateway(configuration)
        let group = ServiceGroup(configuration: .init(services: [gateway], logger: configuration.logger))
        let task = Task { try await group.run() }
        let running = GatewayRestartTests.RunningGateway(gateway: gateway, group: group, task: task, addresses: try await gateway.waitUntilReady())
        let now = EpochMilliseconds(clock.now.timeIntervalSince1970 * 1000)
        if try gateway.store.key(id: "KEY1234567") == nil {
            try gateway.store.addKey(ProviderKeyRecord(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: teamKey.publicKey.x963Representation,
                                                       environment: nil, createdAt: now))
        }
        try await gateway.register(app: GatewayAppRecord(bundleID: bundle, teamID: "TEAM123456", storagePolicy: .all, createdAt: now))
        return running
    }

    static func push(_ gateway: GatewayRestartTests.RunningGateway, token: [UInt8], apnsID: String, key: P256.Signing.PrivateKey,
                     clock: TestWallClock) async throws -> Int {
        var configuration = APNsClientConfiguration(host: "127.0.0.1", port: gateway.addresses.provider.port!,
                                                    trustRootPaths: [gateway.addresses.certificatePath!])
        configuration.authority = "127.0.0.1"
        let connection = try await APNsConnection.connect(configuration)
        defer { Task { await connection.close() } }
        let bearer = "bearer " + (try ProviderToken.sign(keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: Int64(clock.now.timeIntervalSince1970), key: key))
        let response = try await connection.send(APNsRequest(deviceToken: DeviceToken(bytes: token).hex,
                                                             headers: [("authorization", bearer), ("apns-topic", bundle), ("apns-id", apnsID)],
                                                             body: Array(#"{"aps":{"alert":"hi"}}"#.utf8)))
        return response.status
    }

    static func startLink(_ system: NotificationTestSystem, port: Int, certificate: String, clock: TestWallClock,
                          eventRetryInterval: Duration = .seconds(60), inbox: (any RemoteInboxStore)? = nil) async throws -> (GatewayLink, Task<Void, Never>) {
        var configuration = GatewayLinkConfiguration(host: "127.0.0.1", port: port, trustRootPaths: [certificate])
        configuration.initialBackoff = .milliseconds(20)
        configuration.maximumBackoff = .milliseconds(100)
        configuration.eventRetryInterval = eventRetryInterval
        let link = try GatewayLink(configuration: configuration, dataDirectory: system.directory.path, engine: system.engine, inbox: inbox, clock: clock)
        await system.engine.setRemote(link: link)
        return (link, Task { await link.run() })
    }

    /// A gateway whose event writes fail, the app installed and authorized, a link (on `inbox`,
    /// else the SQLite inbox in the data directory), and one push shown whose `presented`
    /// event reached the gateway and was refused.
    struct RefusedEvent {
        var gateway: GatewayRestartTests.RunningGateway
        let store: GatedGatewayStore, link: GatewayLink, task: Task<Void, Never>, directory: URL, teamKey: P256.Signing.PrivateKey

        /// The gateway stops (the link sees the connection end) and comes back on the same port
        /// and store, recording events again.
        mutating func restartAccepting(clock: TestWallClock) async throws {
            let link = link
            await gateway.stop()
            #expect(await eventually { await !link.isConnected })
            store.failEvents.store(false, ordering: .relaxed)
            gateway = try await DeliveryEventTests.startGateway(directory: directory, devicePort: gateway.addresses.device.port!, clock: clock,
                                                                storage: .custom(store), teamKey: teamKey)
            #expect(await eventually { await link.isConnected })
        }

        func stop() async {
            task.cancel()
            await task.value
            await gateway.stop()
        }
    }

    static func refusedEvent(_ system: NotificationTestSystem, clock: TestWallClock, apnsID: String,
                             inbox: (any RemoteInboxStore)? = nil) async throws -> RefusedEvent {
        let directory = system.directory.appendingPathComponent("gateway")
        let teamKey = P256.Signing.PrivateKey()
        let store = GatedGatewayStore(holdingTokenWrites: false)
        store.failEvents.store(true, ordering: .relaxed)
        let gateway = try await startGateway(directory: directory, devicePort: RestartPorts.take(), clock: clock, storage: .custom(store), teamKey: teamKey)
        try await system.install(bundle)
        _ = try await system.center(for: bundle).requestAuthorization(options: [.alert])
        let (link, task) = try await startLink(system, port: gateway.addresses.device.port!, certificate: gateway.addresses.certificatePath!,
                                               clock: clock, inbox: inbox)
        #expect(await eventually { await link.isConnected })
        let token = try await link.deviceToken(for: bundle)
        #expect(try await push(gateway, token: token, apnsID: apnsID, key: teamKey, clock: clock) == 200)
        #expect(await eventually { system.presenter.presentedIdentifiers.contains(apnsID) })
        #expect(await eventually { (try? await gateway.gateway.status(apnsID: apnsID).first?.deliveredAt) != nil })
        #expect(await eventually { store.eventWrites.load(ordering: .relaxed) > 0 }, "the event reached the gateway while connected")
        #expect(try await gateway.gateway.status(apnsID: apnsID).first?.presentedAt == nil, "the event's write failed")
        return RefusedEvent(gateway: gateway, store: store, link: link, task: task, directory: directory, teamKey: teamKey)
    }

    /// The person answers a notification while the gateway is down, and the daemon restarts
    /// before the gateway is back: the event was kept in the daemon's inbox and reaches the
    /// gateway on the new daemon's first connection (before: kept in memory, lost).
    @Test func eventReportedWhileTheGatewayIsDownSurvivesADaemonRestart() async throws {
        let clock = TestWallClock(now: Date())
        let system = try await NotificationTestSystem.start(storage: .sqlite, clock: clock)
        defer { Task { await system.shutdown() } }
        let gatewayDir = system.directory.appendingPathComponent("gateway")
        let teamKey = P256.Signing.PrivateKey()
        let gateway = try await Self.startGateway(directory: gatewayDir, devicePort: RestartPorts.take(), clock: clock, storage: .sqlite, teamKey: teamKey)
        let devicePort = gateway.addresses.device.port!
        let certificate = gateway.addresses.certificatePath!
        try await system.install(Self.bundle)
        _ = try await system.center(for: Self.bundle).requestAuthorization(options: [.alert])

        let (link, task) = try await Self.startLink(system, port: devicePort, certificate: certificate, clock: clock)
        #expect(await eventually { await link.isConnected })
        let token = try await link.deviceToken(for: Self.bundle)
        let apnsID = "00000000-0000-4000-8000-0000000e0001"
        #expect(try await Self.push(gateway, token: token, apnsID: apnsID, key: teamKey, clock: clock) == 200)
        #expect(await eventually { system.presenter.presentedIdentifiers.contains(apnsID) })
        #expect(await eventually { (try? await gateway.gateway.status(apnsID: apnsID).first?.presentedAt) != nil },
                "presented, confirmed while connected")

        let sequence = try #require(try await gateway.gateway.status(apnsID: apnsID).first?.sequence)
        await gateway.stop()
        #expect(await eventually { await !link.isConnected })
        await link.answered(apnsID: apnsID, sequence: sequence)
        task.cancel()
        await task.value

        let (restarted, restartedTask) = try await Self.startLink(system, port: devicePort, certificate: certificate, clock: clock)
        let back = try await Self.startGateway(directory: gatewayDir, devicePort: devicePort, clock: clock, storage: .sqlite, teamKey: teamKey)
        #expect(await eventually { await restarted.isConnected })
        #expect(await eventually { (try? await back.gateway.status(apnsID: apnsID).first?.answeredAt) != nil },
                "the answer reported while the gateway was down arrived after the daemon restarted")
        restartedTask.cancel()
        await restartedTask.value
        await back.stop()
    }

    /// An event the gateway answered with an error on a connection that stays up is sent
    /// again after `eventRetryInterval` (before, only on the next report or reconnect).
    @Test func eventRefusedOnALiveConnectionIsSentAgainAfterTheRetryInterval() async throws {
        let clock = TestWallClock(now: Date())
        let system = try await NotificationTestSystem.start(storage: .sqlite, clock: clock)
        defer { Task { await system.shutdown() } }
        let teamKey = P256.Signing.PrivateKey()
        let store = GatedGatewayStore(holdingTokenWrites: false)
        store.failEvents.store(true, ordering: .relaxed)
        let gateway = try await Self.startGateway(directory: system.directory.appendingPathComponent("gateway"), devicePort: 0, clock: clock,
                                                  storage: .custom(store), teamKey: teamKey)
        try await system.install(Self.bundle)
        _ = try await system.center(for: Self.bundle).requestAuthorization(options: [.alert])
        let (link, task) = try await Self.startLink(system, port: gateway.addresses.device.port!, certificate: gateway.addresses.certificatePath!,
                                                    clock: clock, eventRetryInterval: .milliseconds(50))
        #expect(await eventually { await link.isConnected })
        let token = try await link.deviceToken(for: Self.bundle)
        let apnsID = "00000000-0000-4000-8000-0000000e0003"
        #expect(try await Self.push(gateway, token: token, apnsID: apnsID, key: teamKey, clock: clock) == 200)
        #expect(await eventually { store.eventWrites.load(ordering: .relaxed) > 0 }, "the event reached the gateway and failed")
        store.failEvents.store(false, ordering: .relaxed)
        #expect(await eventually { (try? await gateway.gateway.status(apnsID: apnsID).first?.presentedAt) != nil },
                "sent again on the same connection")
        #expect(await link.isConnected)
        task.cancel()
        await task.value
        await gateway.stop()
    }

    /// The gateway received the event but could not make it durable (as if killed before its
    /// commit): not confirmed, so the daemon sends it again on the next connection. It is
    /// recorded at the time the daemon showed the push (kept in its inbox with the event), not
    /// when the gateway finally learned of it 30 s later.
    @Test func eventNotMadeDurableIsSentAgainAfterReconnecting() async throws {
        let clock = TestWallClock(now: Date())
        let system = try await NotificationTestSystem.start(storage: .sqlite, clock: clock)
        defer { Task { await system.shutdown() } }
        let apnsID = "00000000-0000-4000-8000-0000000e0002"
        let shownAt = clock.nowMilliseconds()
        var refused = try await Self.refusedEvent(system, clock: clock, apnsID: apnsID)
        clock.advance(by: 30)
        try await refused.restartAccepting(clock: clock)
        let back = refused.gateway.gateway, link = refused.link
        #expect(await eventually { (try? await back.status(apnsID: apnsID).first?.presentedAt) != nil },
                "the unconfirmed event was sent again")
        let status = try #require(try await back.status(apnsID: apnsID).first)
        #expect(status.presentedAt == shownAt && status.acceptedAt == shownAt, "when it was shown, not \(clock.nowMilliseconds())")
        await refused.stop()
    }

    /// A push shown whose processed mark never landed (the daemon died first) and whose event
    /// the gateway never recorded: the next daemon run finds it unprocessed in the inbox and in
    /// the delivered list, does not show it again, and reports it presented at the time it was
    /// delivered before — not at the time of the recovery, 30 s later.
    @Test func aPushRecoveredAfterACrashIsReportedAtTheTimeItWasShown() async throws {
        let clock = TestWallClock(now: Date())
        let system = try await NotificationTestSystem.start(storage: .sqlite, clock: clock)
        defer { Task { await system.shutdown() } }
        let base = try SQLiteRemoteInbox(path: system.directory.path + "/remote.sqlite")
        let inbox = CountingInbox(base)
        inbox.failMarks.store(true, ordering: .relaxed)
        let apnsID = "00000000-0000-4000-8000-0000000e0004"
        let shownAt = clock.nowMilliseconds()
        var refused = try await Self.refusedEvent(system, clock: clock, apnsID: apnsID, inbox: inbox)
        #expect(await eventually { inbox.counts.markSizesAsked.count == 1 }, "its mark was asked for, and failed")
        refused.task.cancel()
        await refused.task.value
        #expect(try await base.unprocessed().map(\.apnsID) == [apnsID], "left unprocessed, as after a kill -9")
        clock.advance(by: 30)
        refused.store.failEvents.store(false, ordering: .relaxed)
        let shows = system.presenter.presentedIdentifiers.filter { $0 == apnsID }.count
        let (link, task) = try await Self.startLink(system, port: refused.gateway.addresses.device.port!,
                                                    certificate: refused.gateway.addresses.certificatePath!, clock: clock, inbox: base)
        let back = refused.gateway.gateway
        #expect(await eventually { (try? await back.status(apnsID: apnsID).first?.presentedAt) != nil }, "reported by the recovery")
        #expect(try await back.status(apnsID: apnsID).first?.presentedAt == shownAt, "when it was delivered, not \(clock.nowMilliseconds())")
        #expect(await eventually { (try? await base.unprocessed().isEmpty) == true })
        #expect(system.presenter.presentedIdentifiers.filter { $0 == apnsID }.count == shows, "not shown again")
        _ = link
        task.cancel()
        await task.value
        await refused.gateway.stop()
    }

    /// A `presented` event goes out when its push is shown, before its hand-off's processed mark
    /// keeps it in the inbox. Refused by the gateway on that connection and the connection gone
    /// with the mark's write still held, it is in no inbox to load: the next connection sends
    /// it from memory. Confirmed during the write, it is forgotten after it.
    @Test func eventSentBeforeItsMarkIsSentAgainOnTheNextConnection() async throws {
        let clock = TestWallClock(now: Date())
        let system = try await NotificationTestSystem.start(storage: .sqlite, clock: clock)
        defer { Task { await system.shutdown() } }
        let turnstile = MarkTurnstile()
        let base = try SQLiteRemoteInbox(path: system.directory.path + "/remote.sqlite")
        let inbox = CountingInbox(base, beforeMark: turnstile.wait)
        let apnsID = "00000000-0000-4000-8000-0000000e0003"
        let shownAt = clock.nowMilliseconds()
        var refused = try await Self.refusedEvent(system, clock: clock, apnsID: apnsID, inbox: inbox)
        #expect(inbox.counts.marks == 0, "the event left before its mark")
        clock.advance(by: 30)
        try await refused.restartAccepting(clock: clock)
        let back = refused.gateway.gateway, link = refused.link
        #expect(await eventually { (try? await back.status(apnsID: apnsID).first?.presentedAt) != nil },
                "the event sent again on the new connection, its mark still held")
        #expect(try await back.status(apnsID: apnsID).first?.presentedAt == shownAt, "the time it was shown, kept in memory with the event")
        let held = try await base.pendingEvents(limit: 10)
        #expect(inbox.counts.marks == 0 && held.isEmpty, "the inbox never held it")
        #expect(await eventually { await link.eventsConfirmedBeforeTheirMark == 1 }, "confirmed while its mark is written")
        turnstile.open()
        #expect(await eventually { inbox.counts.processedPushes == 1 })
        #expect(inbox.counts.eventsWithMarks == 1, "the mark, asked for before the confirmation, kept it")
        #expect(await eventually { (try? await base.pendingEvents(limit: 10).isEmpty) == true && inbox.counts.clearedAlone == 1 },
                "then forgotten: the gateway had confirmed it")
        await refused.stop()
    }
}
