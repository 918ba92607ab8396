import Foundation
import Testing
import TidingsTestSupport
import TidingsCore
import TidingsDevice
import TidingsGateway
import TidingsTesting

/// The `tidings` executable's gateway commands against an in-process gateway that shares the
/// data directory: keys create, apps register, push (an Xcode .apns file), status.
@Suite("Gateway CLI", .serialized)
struct CLITests {
    func tidings(_ arguments: [String]) async throws -> ThirdPartyClientTests.Run {
        try await ThirdPartyClientTests.run(CrashTests.executable!, arguments)
    }

    /// `tidings keys revoke` on a data directory: the key is gone from `keys list`, the other
    /// stays; an unknown key id (or one revoked already) is a clear message, exit 1, nothing changed.
    @Test func keysRevoke() async throws {
        guard requireTool(CrashTests.executable != nil, "the tidings executable next to the test bundle") else { return }
        let dir = TemporaryDirectories.make(prefix: "tidings-revoke-").path
        for id in ["REVOKEME01", "KEEPME0001"] {
            let created = try await tidings(["keys", "create", "--data-dir", dir, "--team", "CLITEAM123", "--key-id", id, "-o", "\(dir)/\(id).p8"])
            #expect(created.status == 0, "\(created.stderr)")
        }
        let revoked = try await tidings(["keys", "revoke", "REVOKEME01", "--data-dir", dir])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(revoked.stdout.contains("revoked key REVOKEME01 (team CLITEAM123)"))
        for unknown in ["REVOKEME01", "NOSUCHKEY1"] {
            let refused = try await tidings(["keys", "revoke", unknown, "--data-dir", dir])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("no key \(unknown)"), "\(refused.stderr)")
        }
        let listed = try await tidings(["keys", "list", "--data-dir", dir])
        #expect(listed.stdout.contains("KEEPME0001  team CLITEAM123"))
        #expect(!listed.stdout.contains("REVOKEME01"))
        let badURL = try await tidings(["keys", "revoke", "KEEPME0001", "--database", "mysql://x/y"])
        #expect(badURL.status != 0)
        #expect(badURL.stderr.contains("--database: not a postgres:// URL"), "\(badURL.stderr)")
        #expect(try await tidings(["keys", "list", "--data-dir", dir]).stdout.contains("KEEPME0001"))
    }

    @Test func keysAppsPushStatus() async throws {
        guard requireTool(CrashTests.executable != nil, "the tidings executable next to the test bundle") else { return }
        let h = try await GatewayHarness.start(store: .sqlite, registerKey: false)
        let dir = h.directory.path
        let p8 = h.directory.appendingPathComponent("AuthKey.p8").path
        let created = try await tidings(["keys", "create", "--data-dir", dir, "--team", "CLITEAM123", "--key-id", "CLIKEY1234", "-o", p8])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.contains("key id: CLIKEY1234"))
        let registered = try await tidings(["apps", "register", "com.example.cli", "--team", "CLITEAM123", "--storage-policy", "all", "--data-dir", dir])
        // `apps register` is reachable once the lead's `Apps` lists `AppsRegister`; the type is exercised either way below.
        if registered.status != 0 {
            _ = try GatewayRegistry(dataDirectory: h.directory).registerApp(bundleID: "com.example.cli", teamID: "CLITEAM123", storagePolicy: .all)
        }
        let listed = try await tidings(["keys", "list", "--data-dir", dir])
        #expect(listed.stdout.contains("CLIKEY1234  team CLITEAM123"))

        let device = try await h.device()
        let token = try await device.requestToken(topic: "com.example.cli", environment: .development).hex
        let collector = await PushCollector.start(device)
        let apns = h.directory.appendingPathComponent("Example.apns").path
        try #"{"Simulator Target Bundle":"com.example.cli","aps":{"alert":{"title":"From a file","body":"simctl style"},"sound":"default","badge":1}}"#
            .write(toFile: apns, atomically: true, encoding: .utf8)
        let common = ["--key", p8, "--key-id", "CLIKEY1234", "--team", "CLITEAM123", "--port", String(h.providerPort), "--cacert", h.certificatePath]
        // The CLI signs with the real time; the gateway's test clock stood still since the
        // harness started, and a token more than 60 s ahead of it is refused (403
        // InvalidProviderToken, the allowed clock skew). On a loaded machine the steps above
        // once took that long. The gateway's clock is brought to the real time first.
        h.clock.advance(to: Date())
        let pushed = try await tidings(["push"] + common + ["--collapse-id", "c1", "--priority", "5", token, apns])
        #expect(pushed.status == 0, "\(pushed.stderr)")
        let apnsID = pushed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect((try? APNsID(header: apnsID)) != nil)
        let got = await collector.wait(for: 1)
        #expect(got.first?.apnsID == apnsID)
        #expect(got.first?.collapseID == "c1")
        #expect(got.first?.priority == .considerPower)
        #expect(try got.first?.parsedPayload().notificationContent().title == "From a file")

        // A failure prints the reason and exits non-zero.
        h.clock.advance(to: Date())
        let bad = try await tidings(["push"] + common + ["--topic", "com.example.cli", "--payload", "{}", "--expiration", "later", token])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("400 BadExpirationDate"))

        for _ in 0..<200 {
            if try await h.gateway.status(apnsID: apnsID).first?.deliveredAt != nil { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let status = try await tidings(["status", apnsID, "--data-dir", dir])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("delivered"))
        let missing = try await tidings(["status", "00000000-0000-0000-0000-000000000000", "--data-dir", dir])
        #expect(missing.status != 0)
        await device.close()
        await h.stop()
    }

    /// `tidings push -` reads stdin with a bound (`Push.maximumPayloadInput`, 8192 bytes):
    /// a payload at the bound is read and sent (the gateway answers 413 for its size, so the
    /// whole of it went out); one byte more is refused by the CLI with a message, exit 1,
    /// nothing sent; an endless stdin or payload file (/dev/zero) is refused the same way
    /// instead of being read to the end.
    @Test func pushReadsStdinWithABound() async throws {
        guard requireTool(CrashTests.executable != nil, "the tidings executable next to the test bundle") else { return }
        let h = try await GatewayHarness.start()
        let device = try await h.device()
        let token = try await device.requestToken(topic: GatewayHarness.bundleID, environment: .development).hex
        let collector = await PushCollector.start(device)
        let p8 = h.directory.appendingPathComponent("AuthKey.p8").path
        try (h.teamKey.pemRepresentation + "\n").write(toFile: p8, atomically: true, encoding: .utf8)
        let push = [BuiltProducts.tidings, "push", "--key", p8, "--key-id", GatewayHarness.keyID, "--team", GatewayHarness.teamID,
                    "--topic", GatewayHarness.bundleID, "--port", String(h.providerPort), "--cacert", h.certificatePath, token]
        func padded(to size: Int) -> Data {
            let head = #"{"aps":{"alert":"from stdin"},"pad":""#
            return Data((head + String(repeating: "a", count: size - head.utf8.count - 2) + #""}"#).utf8)
        }

        let small = try await runTool(push[0], Array(push.dropFirst()) + ["-"], input: padded(to: 100))
        #expect(small.status == 0, "\(small.output)")
        let got = await collector.wait(for: 1)
        #expect(try got.first?.parsedPayload().notificationContent().body == "from stdin")

        let atLimit = try await runTool(push[0], Array(push.dropFirst()) + ["-"], input: padded(to: 8192))
        #expect(atLimit.status == 1)
        #expect(atLimit.output.contains("413 PayloadTooLarge"), "sent whole: \(atLimit.output)")

        let pastLimit = try await runTool(push[0], Array(push.dropFirst()) + ["-"], input: padded(to: 8193))
        #expect(pastLimit.status == 1)
        #expect(pastLimit.output.contains("the payload in stdin is over 8192 bytes"), "\(pastLimit.output)")
        #expect(!pastLimit.output.contains("PayloadTooLarge"), "nothing sent: \(pastLimit.output)")

        let quoted = push.map { "'" + $0 + "'" }.joined(separator: " ")
        let endless = try await runTool("/bin/sh", ["-c", "exec \(quoted) - < /dev/zero"])
        #expect(endless.status == 1)
        #expect(endless.output.contains("the payload in stdin is over 8192 bytes"), "\(endless.output)")
        let endlessFile = try await runTool(push[0], Array(push.dropFirst()) + ["/dev/zero"])
        #expect(endlessFile.status == 1)
        #expect(endlessFile.output.contains("the payload in /dev/zero is over 8192 bytes"), "\(endlessFile.output)")
        await device.close()
        await h.stop()
    }

    /// `--push-retention` past 10 years is refused before anything starts (before, a value
    /// above about 9.2e15 s started a gateway that trapped at its first maintenance run).
    @Test func pushRetentionPastTenYearsIsRefused() async throws {
        guard requireTool(CrashTests.executable != nil, "the tidings executable next to the test bundle") else { return }
        let dir = TemporaryDirectories.make(prefix: "tidings-retention-")
        defer { try? FileManager.default.removeItem(at: dir) }
        let listen = ["--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", dir.path]
        let refused = try await ThirdPartyClientTests.run(CrashTests.executable!, ["gateway", "--push-retention", "10000000000000000"] + listen,
                                                          timeout: .seconds(20))
        #expect(refused.status != 0 && refused.status != SIGKILL)
        #expect(refused.stderr.contains("--push-retention"), "\(refused.stderr)")
        let pastLimit = try await ThirdPartyClientTests.run(CrashTests.executable!, ["gateway", "--push-retention", "315360001"] + listen,
                                                            timeout: .seconds(20))
        #expect(pastLimit.status != 0 && pastLimit.status != SIGKILL)
        #expect(pastLimit.stderr.contains("--push-retention"), "\(pastLimit.stderr)")
    }

    /// `--delivered-limit` takes a number of notifications from 1: 0 and negative ones are
    /// refused before the daemon starts (the limit itself: `PushBurstTests.theDeliveredListKeepsTheNewestUpToItsLimit`).
    @Test func deliveredLimitBelowOneIsRefused() async throws {
        guard requireTool(CrashTests.executable != nil, "the tidings executable next to the test bundle") else { return }
        let dir = TemporaryDirectories.make(prefix: "tidings-delivered-limit-")
        defer { try? FileManager.default.removeItem(at: dir) }
        for value in ["0", "-5"] {
            let refused = try await ThirdPartyClientTests.run(CrashTests.executable!, ["daemon", "--data-dir", dir.path, "--no-web", "--consent", "deny",
                                                                                      "--delivered-limit=\(value)"], timeout: .seconds(20))
            #expect(refused.status != 0 && refused.status != SIGKILL)
            #expect(refused.stderr.contains("--delivered-limit"), "\(refused.stderr)")
        }
    }

    /// Saturating milliseconds: the largest retention a configuration can hold prunes nothing
    /// and does not trap (the CLI bounds it; a library user may not).
    @Test func hugePushRetentionDoesNotTrapMaintenance() async throws {
        let h = try await GatewayHarness.start { $0.pushRetention = .seconds(Int64.max) }
        let report = try await h.gateway.runMaintenance()
        #expect(report.pruned == 0)
        await h.stop()
    }

    /// `tidings status --admin`: asks a running gateway's admin endpoint, sending the token
    /// from the data directory; without it the endpoint's 401 becomes a clear error.
    @Test func statusThroughTheAdminEndpointSendsTheToken() async throws {
        guard requireTool(CrashTests.executable != nil, "the tidings executable next to the test bundle") else { return }
        let h = try await GatewayHarness.start { $0.adminTokenRequired = true }
        let token = try await h.deviceToken()
        let c = try await h.connect()
        let apnsID = try #require(try await c.send(h.request(token: token, authorization: try h.bearer())).apnsID)
        let admin = "127.0.0.1:\(h.addresses.admin!.port!)"
        let status = try await tidings(["status", apnsID, "--admin", admin, "--data-dir", h.directory.path])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains(apnsID))
        #expect(status.stdout.contains("accepted"))
        let elsewhere = TemporaryDirectories.make(prefix: "tidings-empty-").path
        let refused = try await tidings(["status", apnsID, "--admin", admin, "--data-dir", elsewhere])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("bearer token"), "\(refused.stderr)")
        let explicit = try await tidings(["status", apnsID, "--admin", admin, "--data-dir", elsewhere,
                                          "--admin-token-file", try #require(h.addresses.adminTokenPath)])
        #expect(explicit.status == 0, "\(explicit.stderr)")
        await c.close()
        await h.stop()
    }
}
