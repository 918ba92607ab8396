import Foundation

/// Where Tidings keeps its files, shared by the daemon and the apps that connect to it.
public enum TidingsPaths {
    /// `$TIDINGS_DATA_DIR`, else `$XDG_DATA_HOME/tidings`, else `~/.local/share/tidings`.
    public static func defaultDataDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let dir = environment["TIDINGS_DATA_DIR"], !dir.isEmpty { return dir }
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty { return xdg + "/tidings" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/share/tidings"
    }

    /// The daemon's app socket in a data directory.
    public static func socketPath(dataDirectory: String) -> String {
        dataDirectory + "/daemon.sock"
    }

    /// `$TIDINGS_SOCKET`, else the socket in the default data directory.
    public static func defaultSocketPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let socket = environment["TIDINGS_SOCKET"], !socket.isEmpty { return socket }
        return socketPath(dataDirectory: defaultDataDirectory(environment: environment))
    }
}
