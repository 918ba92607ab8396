import Foundation
import TidingsCore

/// The transport `UNUserNotificationCenter.current()` uses: the daemon's socket
/// (`TIDINGS_SOCKET`, else `daemon.sock` in the data directory).
///
/// The process identifies itself by its executable, which must be the one an installed
/// app's manifest names; in the daemon's development mode, `TIDINGS_BUNDLE_ID` names the
/// app instead. `TIDINGS_LAUNCH_STATE` (`active`, `background`) is set by the daemon when
/// it launches the app for a response. `UIApplication` (TidingsApplication) opens its own
/// connection with it: one transport's events have one reader.
@_spi(Tidings) public func makeDefaultTransport() -> any NotificationServiceTransport {
    let environment = ProcessInfo.processInfo.environment
    let state = environment["TIDINGS_LAUNCH_STATE"].flatMap(AppState.init(rawValue:)) ?? .active
    let hello = AppHello(
        bundleIdentifier: environment["TIDINGS_BUNDLE_ID"].flatMap { $0.isEmpty ? nil : $0 },
        state: state)
    return SocketTransport(path: TidingsPaths.defaultSocketPath(environment: environment), hello: hello)
}
