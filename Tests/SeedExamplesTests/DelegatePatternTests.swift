import Foundation
import Testing
import TidingsCore
@_spi(Tidings) import TidingsApplication
@_spi(Tidings) import UserNotifications

/// Runs the delegate patterns of DelegatePatterns.swift: each compiles (the point) and the
/// delegate it installs is the one the center calls, on the main actor.
@MainActor
@Suite("Delegate patterns of iOS code", .serialized, .timeLimit(.minutes(1)))
struct DelegatePatternTests {
    static func foreground(_ identifier: String) -> DaemonEvent {
        .willPresent(eventID: 1, notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: identifier, content: NotificationContentValue(), trigger: nil), date: Date()))
    }

    @Test func plainAppDelegateInstallsItsHandler() async {
        let daemon = RecordingDaemon()
        await withSeedCenter(daemon) {
            let appDelegate = PlainAppDelegate()
            #expect(appDelegate.applicationDidFinishLaunching())
            #expect(UNUserNotificationCenter.current().delegate === appDelegate.notificationHandler)
            daemon.emit(Self.foreground("plain"))
            // NotificationHandler (seed 000) presents with alert and sound.
            #expect(await daemon.waitFor { if case .presentationDecision = $0 { true } else { false } } == [.presentationDecision(eventID: 1, options: [.alert, .sound])])
        }
    }

    @Test func asyncFunctionCreatesTheDelegate() async {
        let daemon = RecordingDaemon()
        await withSeedCenter(daemon) {
            let handler = await installHandlerAsynchronously()
            #expect(UNUserNotificationCenter.current().delegate === handler)
            let offMain = await makeHandlerOffTheMainActor()
            UNUserNotificationCenter.current().delegate = offMain
            #expect(UNUserNotificationCenter.current().delegate === offMain)
        }
    }

    @Test func seedAppDelegateWithUIKitNames() async {
        let daemon = RecordingDaemon()
        await withSeedCenter(daemon) {
            let appDelegate = SeedAppDelegate()
            let application = UIApplication(transport: RecordingDaemon())
            #expect(appDelegate.application(application, didFinishLaunchingWithOptions: nil))
            #expect(UNUserNotificationCenter.current().delegate === appDelegate.notificationHandler)
        }
    }

    @Test func mainActorAppDelegateIsCalledOnTheMainActor() async {
        let daemon = RecordingDaemon()
        await withSeedCenter(daemon) {
            let appDelegate = AppDelegateAsNotificationDelegate()
            #expect(appDelegate.application(UIApplication(transport: RecordingDaemon()), didFinishLaunchingWithOptions: nil))
            daemon.emit(Self.foreground("main"))
            #expect(await daemon.waitFor { if case .presentationDecision = $0 { true } else { false } } == [.presentationDecision(eventID: 1, options: [.banner, .sound])])
            #expect(appDelegate.presented == ["main"])
        }
    }
}
