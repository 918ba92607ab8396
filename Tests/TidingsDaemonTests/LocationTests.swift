import Foundation
import Testing
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsTesting
import Logging

@Suite("Location from gpsd")
struct LocationTests {
    @Test("TPV lines with a fix become positions; other lines do not")
    func parsing() {
        let tpv = #"{"class":"TPV","device":"/dev/pts/1","mode":3,"time":"2026-11-22T12:35:25.000Z","lat":48.1174,"lon":11.5166,"alt":545.4}"#
        #expect(GPSDProtocol.fix(fromLine: tpv) == LocationFix(latitude: 48.1174, longitude: 11.5166, time: ISO8601DateFormatter().date(from: "2026-11-22T12:35:25Z")))
        #expect(GPSDProtocol.fix(fromLine: #"{"class":"TPV","mode":1}"#) == nil, "no fix")
        #expect(GPSDProtocol.fix(fromLine: #"{"class":"SKY","satellites":[]}"#) == nil)
        #expect(GPSDProtocol.fix(fromLine: #"{"class":"TPV","mode":2,"lat":123,"lon":0}"#) == nil, "out of range")
        #expect(GPSDProtocol.fix(fromLine: "garbage") == nil)
    }

    /// NMEA sentences (RMC + GGA) for a walk north along 11.5° E, one epoch a second.
    static func track(from startLatitude: Double, step: Double, epochs: Int) -> String {
        func checksum(_ body: String) -> String { String(format: "%02X", body.utf8.reduce(0) { $0 ^ $1 }) }
        func coordinate(_ value: Double, degreesWidth: Int) -> String {
            let degrees = Int(value)
            let minutes = (value - Double(degrees)) * 60
            return String(format: "%0\(degreesWidth)d%07.4f", degrees, minutes)
        }
        var lines: [String] = []
        for i in 0..<epochs {
            let lat = coordinate(startLatitude + Double(i) * step, degreesWidth: 2)
            let lon = coordinate(11.5, degreesWidth: 3)
            let time = String(format: "1235%02d.00", i % 60)
            let rmc = "GPRMC,\(time),A,\(lat),N,\(lon),E,2.0,0.0,221126,,,A"
            let gga = "GPGGA,\(time),\(lat),N,\(lon),E,1,08,0.9,545.4,M,46.9,M,,"
            lines.append("$\(rmc)*\(checksum(rmc))")
            lines.append("$\(gga)*\(checksum(gga))")
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// gpsfake replaying `track` for gpsd on `port`, under `timeout -s KILL 90`.
    static func startGPSFake(_ gpsfake: String, port: Int, track: URL) throws -> Process {
        let fake = Process()
        fake.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        fake.arguments = ["-s", "KILL", "90", gpsfake, "-c", "0.05", "-P", "\(port)", track.path]
        fake.standardOutput = FileHandle.nullDevice
        fake.standardError = FileHandle.nullDevice
        try fake.run()
        return fake
    }

    /// Killing `timeout` leaves gpsfake (which inherits the test bundle's blocked SIGTERM) and
    /// its gpsd child: kill what runs on this port too.
    static func stopGPSFake(_ fake: Process, port: Int) {
        if fake.isRunning { kill(fake.processIdentifier, SIGKILL) }
        _ = try? Process.run(URL(fileURLWithPath: "/usr/bin/pkill"), arguments: ["-KILL", "-f", "gpsfake.*-P \(port) "])
        _ = try? Process.run(URL(fileURLWithPath: "/usr/bin/pkill"), arguments: ["-KILL", "-f", "gpsd.*-S \(port)"])
    }

    @Test("a region trigger fires when gpsfake's track enters the region")
    func gpsfakeEntersRegion() async throws {
        guard let gpsfake = ["/usr/bin/gpsfake", "/usr/local/bin/gpsfake"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
            if ProcessInfo.processInfo.environment["CI"] != nil { Issue.record("gpsfake is not installed (apt-get install gpsd gpsd-clients)") }
            else { print("skipped: gpsfake is not installed (apt-get install gpsd gpsd-clients)") }
            return
        }
        let directory = URL(fileURLWithPath: "/tmp/tidings-gps-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let nmea = directory.appendingPathComponent("walk.nmea")
        // 48.1000 → 48.1190 N in 20 steps of ~111 m; the region is 150 m around 48.1150 N.
        // gpsfake replays the walk in a loop until killed, so a slow start only delays the entry.
        try Data(Self.track(from: 48.1, step: 0.001, epochs: 20).utf8).write(to: nmea)

        let system = try await NotificationTestSystem.start()
        defer { Task { await system.shutdown() } }
        let app = try await system.connect("com.example.walk", state: .background)
        _ = try await app.call(.requestAuthorization([.alert]))
        var content = NotificationContentValue()
        content.title = "You have arrived"
        let region = CircularRegionValue(identifier: "station", latitude: 48.115, longitude: 11.5, radius: 150, notifyOnEntry: true, notifyOnExit: false)
        _ = try await app.call(.add(NotificationRequestValue(identifier: "arrive", content: content, trigger: .location(region, repeats: false))))

        var logger = Logger(label: "test.gpsd")
        logger.logLevel = .critical
        // gpsfake on a random port, with the provider following it; the provider retries on its
        // own clock until gpsfake's gpsd listens (a real clock here). If gpsfake gives up — its
        // gpsd did not start in time under a loaded full run, or the port was taken — it starts
        // again on another port (once in CI nothing was presented in 45 s).
        var port = Int.random(in: 30_000..<40_000)
        var fake = try Self.startGPSFake(gpsfake, port: port, track: nmea)
        var follower = Task { [engine = system.engine, logger, port] in
            try await GPSDLocationProvider(port: port, engine: engine, clock: SystemWallClock(), logger: logger).run()
        }
        var starts = 1, startedAt = ContinuousClock.now
        defer {
            follower.cancel()
            Self.stopGPSFake(fake, port: port)
        }
        // The walk takes about 2 s to replay (≈ 2 s in a quiet run): a start that shows nothing
        // in 15 s, or whose gpsfake is gone, is given up.
        let deadline = ContinuousClock.now + .seconds(70)
        while system.presenter.presentedIdentifiers != ["arrive"], ContinuousClock.now < deadline {
            if !fake.isRunning || ContinuousClock.now - startedAt > .seconds(15), starts < 4 {
                follower.cancel()
                Self.stopGPSFake(fake, port: port)
                port = 30_000 + (port - 30_000 + 1 + Int.random(in: 0..<5_000)) % 10_000
                fake = try Self.startGPSFake(gpsfake, port: port, track: nmea)
                follower = Task { [engine = system.engine, logger, port] in
                    try await GPSDLocationProvider(port: port, engine: engine, clock: SystemWallClock(), logger: logger).run()
                }
                starts += 1
                startedAt = ContinuousClock.now
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(system.presenter.presentedIdentifiers == ["arrive"], "presented: \(system.presenter.presentedIdentifiers) (gpsfake started \(starts) times)")
        #expect(await eventually { (try? await system.engine.pendingRequests("com.example.walk"))?.isEmpty == true })
    }
}
