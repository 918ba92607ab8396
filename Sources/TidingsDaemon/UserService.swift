import Foundation

/// The daemon as a systemd user service (docs/desktop.md): started at login, restarted on
/// failure, stopped with SIGTERM (the daemon's graceful shutdown), its socket where apps look
/// by default (`$XDG_DATA_HOME/tidings/daemon.sock`). `Support/systemd/tidings.service` is
/// this unit for `/usr/local/bin/tidings`; `tidings install --user` writes it for its own path.
public enum UserService {
    public static let unitName = "tidings.service"

    /// The unit's text for a `tidings` executable at `executable` (an absolute path).
    public static func unit(executable: String) -> String {
        """
        # Tidings notification daemon as a systemd user service (docs/desktop.md).
        # Install: tidings install --user, or copy to ~/.config/systemd/user/ and run
        #   systemctl --user daemon-reload && systemctl --user enable --now tidings.service
        [Unit]
        Description=Tidings notification daemon (UserNotifications for Linux)
        Documentation=man:systemd.service(5)
        # The session bus (desktop notifications) and the graphical session, when there is one.
        After=dbus.socket graphical-session.target
        Wants=dbus.socket

        [Service]
        Type=exec
        # No terminal to ask on: an installed app that asks for authorization is granted (apps
        # get a connection only when installed with `tidings apps install`); use --consent deny
        # to refuse instead. Notifications go to the desktop's notification server.
        ExecStart=\(systemdQuoted(executable)) daemon --consent grant --presenter desktop
        Restart=on-failure
        RestartSec=2s
        # SIGTERM is the daemon's graceful shutdown: it closes the app socket and stops its tasks.
        KillSignal=SIGTERM
        KillMode=mixed
        TimeoutStopSec=20s

        [Install]
        WantedBy=default.target

        """
    }

    /// Where user units go: `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
    public static func unitDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") { return config + "/systemd/user" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.config/systemd/user"
    }

    /// A path as one systemd word: quoted when it holds a space, with `\`, `"` and `%` escaped.
    static func systemdQuoted(_ path: String) -> String {
        let escaped = path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "%", with: "%%")
        return escaped.contains(where: { $0 == " " || $0 == "\t" }) || escaped != path ? "\"\(escaped)\"" : escaped
    }
}
