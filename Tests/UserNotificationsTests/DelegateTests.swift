import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

/// A delegate with Apple's completion-handler methods, recording what it saw.
final class RecordingDelegate: NSObject, UNUserNotificationCenterDelegate {
    var presented: [UNNotification] = []
    var responses: [UNNotificationResponse] = []
    var settingsRequests: [UNNotification?] = []
    var options: UNNotificationPresentationOptions = [.banner, .sound]
    var completeResponses = true
    var pendingCompletion: (@Sendable () -> Void)?

    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping (UNNotificationPresentationOptions) -> Void) {
        presented.append(notification)
        completionHandler(options)
        completionHandler([.badge]) // a second call is ignored
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        responses.append(response)
        if completeResponses { completionHandler() } else { pendingCompletion = completionHandler }
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, openSettingsFor notification: UNNotification?) {
        settingsRequests.append(notification)
    }
}

/// Implements only the `async` forms.
final class AsyncDelegate: NSObject, UNUserNotificationCenterDelegate {
    var received: [String] = []
    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification) async -> UNNotificationPresentationOptions {
        [.list]
    }
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse) async {
        received.append(response.actionIdentifier)
    }
}

/// Implements nothing: Apple's "optional methods not implemented".
final class SilentDelegate: NSObject, UNUserNotificationCenterDelegate {}

@MainActor
@Suite("Delegate dispatch", .timeLimit(.minutes(1)))
struct DelegateTests {
    let transport = FakeTransport()
    let center: UNUserNotificationCenter

    init() {
        center = UNUserNotificationCenter(transport: transport)
    }

    @Test func settingTheDelegateTellsTheDaemonOncePerChange() {
        let delegate = RecordingDelegate()
        center.delegate = delegate
        center.delegate = delegate
        #expect(center.delegate === delegate)
        center.delegate = nil
        #expect(transport.sends == [.setDelegate(true), .setDelegate(false)])
    }

    @Test func delegateIsWeak() {
        var delegate: RecordingDelegate? = RecordingDelegate()
        center.delegate = delegate
        delegate = nil
        #expect(center.delegate == nil)
    }

    @Test func willPresentAnswersWithTheDelegatesOptions() async {
        let delegate = RecordingDelegate()
        center.delegate = delegate
        transport.emit(.willPresent(eventID: 7, notification: Fixtures.delivered("fg")))
        let decision = await transport.nextSend { if case .presentationDecision = $0 { true } else { false } }
        #expect(decision == .presentationDecision(eventID: 7, options: [.banner, .sound]))
        #expect(delegate.presented.map(\.request.identifier) == ["fg"])
        #expect(delegate.presented.first?.request.content.title == "Hello")
        // The second completion call was ignored.
        #expect(transport.sends.filter { if case .presentationDecision = $0 { true } else { false } }.count == 1)
    }

    @Test func willPresentWithoutADelegateShowsNothing() async {
        _ = await center.notificationSettings() // connects; events flow from then on
        transport.emit(.willPresent(eventID: 1, notification: Fixtures.delivered()))
        let decision = await transport.nextSend { if case .presentationDecision = $0 { true } else { false } }
        #expect(decision == .presentationDecision(eventID: 1, options: []))
    }

    @Test func delegateWithoutWillPresentShowsNothing() async {
        let delegate = SilentDelegate()
        center.delegate = delegate
        transport.emit(.willPresent(eventID: 2, notification: Fixtures.delivered()))
        let decision = await transport.nextSend { if case .presentationDecision = $0 { true } else { false } }
        #expect(decision == .presentationDecision(eventID: 2, options: []))
        // And a response is acknowledged right away.
        transport.emit(.didReceive(eventID: 3, response: ResponseValue(notification: Fixtures.delivered(), actionIdentifier: UNNotificationDefaultActionIdentifier)))
        #expect(await transport.nextSend { $0 == .responseHandled(eventID: 3) } == .responseHandled(eventID: 3))
    }

    @Test func asyncDelegateFormsAreUsed() async {
        let delegate = AsyncDelegate()
        center.delegate = delegate
        transport.emit(.willPresent(eventID: 4, notification: Fixtures.delivered()))
        #expect(await transport.nextSend { if case .presentationDecision = $0 { true } else { false } } == .presentationDecision(eventID: 4, options: [.list]))
        transport.emit(.didReceive(eventID: 5, response: ResponseValue(notification: Fixtures.delivered(), actionIdentifier: "action.goodbye")))
        _ = await transport.nextSend { $0 == .responseHandled(eventID: 5) }
        #expect(delegate.received == ["action.goodbye"])
    }

    @Test func didReceiveIsHandledWhenTheCompletionHandlerIsCalled() async throws {
        let delegate = RecordingDelegate()
        delegate.completeResponses = false
        center.delegate = delegate
        transport.emit(.didReceive(eventID: 9, response: ResponseValue(notification: Fixtures.delivered(), actionIdentifier: "action.input", userText: "你好")))
        // Wait until the delegate saw it: a later event is handled after this one.
        transport.emit(.willPresent(eventID: 10, notification: Fixtures.delivered()))
        _ = await transport.nextSend { $0 == .presentationDecision(eventID: 10, options: [.banner, .sound]) }
        #expect(!transport.sends.contains(.responseHandled(eventID: 9)))
        let response = try #require(delegate.responses.first)
        #expect(response.actionIdentifier == "action.input")
        #expect((response as! UNTextInputNotificationResponse).userText == "你好")
        delegate.pendingCompletion?()
        #expect(await transport.nextSend { $0 == .responseHandled(eventID: 9) } == .responseHandled(eventID: 9))
    }

    @Test func defaultAndDismissActionsArePlainResponses() async {
        let delegate = RecordingDelegate()
        center.delegate = delegate
        transport.emit(.didReceive(eventID: 11, response: ResponseValue(notification: Fixtures.delivered(), actionIdentifier: UNNotificationDefaultActionIdentifier)))
        transport.emit(.didReceive(eventID: 12, response: ResponseValue(notification: Fixtures.delivered(), actionIdentifier: UNNotificationDismissActionIdentifier)))
        _ = await transport.nextSend { $0 == .responseHandled(eventID: 12) }
        #expect(delegate.responses.map(\.actionIdentifier) == [UNNotificationDefaultActionIdentifier, UNNotificationDismissActionIdentifier])
        #expect(delegate.responses.allSatisfy { !($0 is UNTextInputNotificationResponse) })
    }

    @Test func openSettingsAndBackgroundWakes() async {
        let delegate = RecordingDelegate()
        center.delegate = delegate
        transport.emit(.openSettings(eventID: 20, notification: nil))
        transport.emit(.openSettings(eventID: 21, notification: Fixtures.delivered("s")))
        transport.emit(.settingsChanged(.deniedSettings))
        transport.emit(.remoteNotification(eventID: 22, userInfo: ["aps": .dictionary(["content-available": .integer(1)])]))
        #expect(await transport.nextSend { $0 == .backgroundFetchCompleted(eventID: 22, result: 1) } == .backgroundFetchCompleted(eventID: 22, result: 1))
        #expect(delegate.settingsRequests.count == 2)
        #expect(delegate.settingsRequests[0] == nil)
        #expect(delegate.settingsRequests[1]?.request.identifier == "s")
    }
}

// MARK: - Isolation as in Apple's SDK (issue 12 §2)

/// A plain class that creates its delegate in a property initializer, as the seeds'
/// `AppDelegate` without UIKit does. Compiles only when the delegate protocol is not
/// main-actor isolated (Apple's is not).
final class PlainOwner {
    let handler = RecordingDelegate()
}

/// A nonisolated `async` function that creates and installs a delegate.
nonisolated func installDelegate(on center: UNUserNotificationCenter) async -> AsyncDelegate {
    let delegate = AsyncDelegate()
    center.delegate = delegate
    return delegate
}

/// A nonisolated delegate that checks it is called on the main actor (a trap otherwise).
final class MainActorCheckingDelegate: NSObject, UNUserNotificationCenterDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var calls: [String] = []
    var checked: [String] { lock.withLock { calls } }

    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void) {
        MainActor.assertIsolated("the center calls its delegate on the main actor")
        lock.withLock { calls.append("willPresent") }
        completionHandler([.list])
    }

    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        MainActor.assertIsolated("the center calls its delegate on the main actor")
        lock.withLock { calls.append("didReceive") }
        completionHandler()
    }
}

/// A main-actor app delegate adopting the protocol as Swift 6 code does for Apple's SDK:
/// with an isolated conformance. The center must call it on the main actor.
@MainActor
final class MainActorAppDelegate: NSObject, @MainActor UNUserNotificationCenterDelegate {
    var identifiers: [String] = []
    func userNotificationCenter(_ center: UNUserNotificationCenter, willPresent notification: UNNotification, withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void) {
        MainActor.assertIsolated()
        identifiers.append(notification.request.identifier)
        completionHandler([.banner])
    }
}

/// The `@preconcurrency` conformance Swift 6 code also uses for Apple's nonisolated protocols.
@MainActor
final class PreconcurrencyAppDelegate: NSObject {
    var identifiers: [String] = []
}

extension PreconcurrencyAppDelegate: @preconcurrency UNUserNotificationCenterDelegate {
    func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse, withCompletionHandler completionHandler: @escaping @Sendable () -> Void) {
        identifiers.append(response.actionIdentifier)
        completionHandler()
    }
}

@Suite("Delegate isolation", .timeLimit(.minutes(1)))
struct DelegateIsolationTests {
    @Test func aPlainOwnerAndAnAsyncFunctionCreateDelegates() async {
        let transport = FakeTransport()
        let center = UNUserNotificationCenter(transport: transport)
        let owner = PlainOwner()
        center.delegate = owner.handler
        #expect(center.delegate === owner.handler)
        let delegate = await installDelegate(on: center)
        #expect(center.delegate === delegate)
        transport.emit(.willPresent(eventID: 1, notification: Fixtures.delivered()))
        #expect(await transport.nextSend { if case .presentationDecision = $0 { true } else { false } } == .presentationDecision(eventID: 1, options: [.list]))
    }

    @Test func theCenterCallsANonisolatedDelegateOnTheMainActor() async {
        let transport = FakeTransport()
        let center = UNUserNotificationCenter(transport: transport)
        let delegate = MainActorCheckingDelegate()
        center.delegate = delegate
        transport.emit(.willPresent(eventID: 2, notification: Fixtures.delivered()))
        transport.emit(.didReceive(eventID: 3, response: ResponseValue(notification: Fixtures.delivered(), actionIdentifier: UNNotificationDefaultActionIdentifier)))
        _ = await transport.nextSend { $0 == .responseHandled(eventID: 3) }
        #expect(delegate.checked == ["willPresent", "didReceive"])
    }

    @MainActor
    @Test func mainActorConformancesAreCalledOnTheMainActor() async {
        let transport = FakeTransport()
        let center = UNUserNotificationCenter(transport: transport)
        let isolated = MainActorAppDelegate()
        center.delegate = isolated
        transport.emit(.willPresent(eventID: 4, notification: Fixtures.delivered("iso")))
        #expect(await transport.nextSend { if case .presentationDecision = $0 { true } else { false } } == .presentationDecision(eventID: 4, options: [.banner]))
        #expect(isolated.identifiers == ["iso"])
        let preconcurrency = PreconcurrencyAppDelegate()
        center.delegate = preconcurrency
        transport.emit(.didReceive(eventID: 5, response: ResponseValue(notification: Fixtures.delivered(), actionIdentifier: "act")))
        _ = await transport.nextSend { $0 == .responseHandled(eventID: 5) }
        #expect(preconcurrency.identifiers == ["act"])
    }
}
