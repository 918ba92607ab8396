import Foundation
import Testing
import TidingsCore
import TidingsDaemon
import TidingsIPC
import TidingsTesting

/// The app socket's binary `add` against a daemon in this process on a test clock: the
/// daemon validates what it decodes exactly as for JSON, stores the bytes as received, and
/// answers `ok` in binary.
@Suite("Binary add on the app socket", .timeLimit(.minutes(1)))
struct BinaryAddTests {
    static func content(_ title: String = "t") -> NotificationContentValue {
        var content = NotificationContentValue()
        content.title = title
        content.userInfo = ["n": .integer(7), "nested": .array([.string("x"), .bool(true)])]
        return content
    }

    @Test("bad requests get their UNError codes; good ones are stored as sent and listed with their dates")
    func validationAndStorage() async throws {
        let directory = TemporaryDirectories.make(prefix: "tidings-binary-").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = TestWallClock()
        let daemon = try await buildDaemon(DaemonConfiguration(dataDirectory: directory, consent: .grant, developmentMode: true, terminalPresenter: false, clock: clock))
        let run = Task { try await daemon.run() }
        defer { run.cancel() }
        let client = try await AppSocketClient.connect(path: daemon.socketPath)
        defer { client.close() }
        _ = try await client.call(.hello(AppHello(bundleIdentifier: "com.example.binary", state: .background)))
        #expect(try await client.call(.requestAuthorization([.alert])) == .authorization(granted: true))

        func code(_ request: NotificationRequestValue) async throws -> NotificationError.Code? {
            guard case .failure(let error) = try await client.call(.add(request)) else { return nil }
            return error.code
        }
        #expect(try await code(NotificationRequestValue(identifier: "zero", content: Self.content(), trigger: .timeInterval(seconds: 0, repeats: false))) == .invalidTrigger)
        #expect(try await code(NotificationRequestValue(identifier: "short", content: Self.content(), trigger: .timeInterval(seconds: 30, repeats: true))) == .invalidTrigger)
        #expect(try await code(NotificationRequestValue(identifier: "empty", content: NotificationContentValue(), trigger: .timeInterval(seconds: 60, repeats: false))) == .notificationInvalidNoContent)
        var missing = Self.content()
        missing.attachments = [AttachmentValue(identifier: "a", path: directory + "/nope.png", type: "public.png")]
        #expect(try await code(NotificationRequestValue(identifier: "missing", content: missing, trigger: nil)) == .attachmentInvalidURL)
        // A value the wire cannot carry is the app's bad input (invalidRequest), not a lost
        // daemon, and the connection goes on.
        for bad in [Double.nan, .infinity] {
            var unencodable = Self.content()
            unencodable.relevanceScore = bad
            do {
                _ = try await client.call(.add(NotificationRequestValue(identifier: "nan", content: unencodable, trigger: nil)))
                Issue.record("a relevance score of \(bad) was sent")
            } catch let error as NotificationError {
                #expect(error.code == .invalidRequest, "\(error)")
            }
        }

        // Good requests: `ok` (a binary frame), then listed exactly as sent, with their dates.
        let calendar = { var c = DateComponents(); c.hour = 8; return c }()
        let good = [
            NotificationRequestValue(identifier: "later", content: Self.content("later"), trigger: .timeInterval(seconds: 600, repeats: false)),
            NotificationRequestValue(identifier: "daily", content: Self.content("daily"), trigger: .calendar(calendar, repeats: true)),
        ]
        for request in good { #expect(try await client.call(.add(request)) == .ok) }
        guard case .pendingRequests(let pending) = try await client.call(.getPendingScheduled) else {
            Issue.record("getPendingScheduled is answered with pendingRequests")
            return
        }
        #expect(pending.map(\.request) == good)
        #expect(pending.first?.nextTriggerDate == clock.now.addingTimeInterval(600))
        #expect(pending.last?.nextTriggerDate.map { $0 > clock.now } == true)
        #expect(try await client.call(.getPending) == .requests(good))
    }
}
