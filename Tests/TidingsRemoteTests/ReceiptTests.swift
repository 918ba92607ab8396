import Crypto
import Foundation
import Testing
import TidingsCore
@testable import TidingsDaemon
import TidingsDevice
import TidingsSQLite
import TidingsTesting
@_spi(Tidings) import UserNotifications

/// The daemon's receipt rule, deterministically: a push made durable in the inbox but never
/// acknowledged (the daemon died in between) is shown once after the restart, although the
/// gateway sends it again.
@Suite("Remote receipt", .serialized)
struct ReceiptTests {
    @Test @MainActor func processedPushesArePrunedWhileTheDaemonRuns() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        _ = try await h.install()
        let app = try await h.launchApp(notificationDelegate: RecordingNotificationDelegate(), appDelegate: nil)
        let token = try await app.application.deviceTokenForRemoteNotifications()
        let link = try #require(h.currentLink)
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"old"}}"#, apnsID: "00000000-0000-4000-8000-00000000e001").status == 200)
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == 1 })
        #expect(await link.inboxCount == 1)
        // Marked processed (only those are pruned) before the clock moves: its `presented` event
        // leaves before the mark, so neither the show nor the gateway's record says it is done.
        #expect(await eventually { await link.pushesNotMarked == 0 })
        // A month later the daemon is still running; the next push's processing prunes the old row.
        h.clock.advance(by: 32 * 24 * 3600)
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"new"}}"#, apnsID: "00000000-0000-4000-8000-00000000e002").status == 200)
        #expect(await eventually { h.system.presenter.presentedIdentifiers.count == 2 })
        #expect(await eventually { await link.inboxCount == 1 }, "only the new push is kept")
        withExtendedLifetime(app) {}
    }

    @Test @MainActor func durableButUnacknowledgedPushIsShownOnce() async throws {
        let h = try await RemoteHarness.start()
        defer { Task { await h.stop() } }
        let (app, token) = try await h.offlineApp()
        let apnsID = "00000000-0000-4000-8000-00000000d001"
        #expect(try await h.push(token: token, body: #"{"aps":{"alert":"once"}}"#, apnsID: apnsID).status == 200)

        // The daemon's half-done receipt: the push is in its inbox, the gateway never got the ack.
        let keyPEM = try String(contentsOfFile: h.system.directory.appendingPathComponent("device-key.pem").path, encoding: .utf8)
        let probe = try await DeviceConnection.connect(DeviceClientConfiguration(
            host: "127.0.0.1", port: h.addresses.device.port!, deviceKey: try P256.Signing.PrivateKey(pemRepresentation: keyPEM),
            trustRootPaths: [h.addresses.certificatePath!]))
        var pushes = probe.pushes.makeAsyncIterator()
        let received = try #require(try await pushes.next())
        #expect(received.apnsID == apnsID)
        let inbox = try SQLiteRemoteInbox(path: h.system.directory.appendingPathComponent("remote.sqlite").path)
        #expect(try await inbox.receive([try #require(RemotePush(received))], at: h.clock.now) == [true])
        #expect(try await inbox.receive([try #require(RemotePush(received))], at: h.clock.now) == [false], "the inbox dedupes by apns-id and sequence")
        await probe.close()

        // The daemon comes back: shows it from the inbox, acknowledges the redelivery, shows nothing twice.
        try await h.startLink()
        #expect(await eventually { (try? await h.status(apnsID).first?.deliveredAt) != nil }, "the redelivered push was acknowledged")
        #expect(await eventually { h.system.presenter.presentedIdentifiers.contains(apnsID) })
        #expect(h.system.presenter.presentedIdentifiers.filter { $0 == apnsID }.count == 1)
        withExtendedLifetime(app) {}
    }
}
