/// A bus address (D-Bus specification, "Server Addresses"): `transport:key=value,…`, several
/// separated by `;`, tried in order. This client speaks `unix:path=` and `unix:abstract=`.
public struct DBusAddress: Sendable, Hashable, CustomStringConvertible {
    public enum Socket: Sendable, Hashable {
        /// A socket file.
        case path(String)
        /// Linux's abstract namespace (the name without its leading NUL).
        case abstract(String)
    }

    public var socket: Socket

    public init(socket: Socket) { self.socket = socket }

    public var description: String {
        switch socket {
        case .path(let p): "unix:path=\(p)"
        case .abstract(let name): "unix:abstract=\(name)"
        }
    }

    /// The usable addresses of an address string, in order; throws when none is.
    public static func parse(_ text: String) throws(DBusFormatError) -> [DBusAddress] {
        var addresses: [DBusAddress] = []
        var problems: [String] = []
        for entry in text.split(separator: ";") where !entry.isEmpty {
            guard let colon = entry.firstIndex(of: ":") else {
                problems.append("\"\(entry)\" has no transport")
                continue
            }
            let transport = entry[..<colon]
            guard transport == "unix" else {
                problems.append("transport \(transport) is not supported")
                continue
            }
            var values: [String: String] = [:]
            for pair in entry[entry.index(after: colon)...].split(separator: ",") {
                guard let equals = pair.firstIndex(of: "=") else { continue }
                guard let value = unescape(pair[pair.index(after: equals)...]) else {
                    problems.append("a malformed %-escape in \"\(pair)\"")
                    continue
                }
                values[String(pair[..<equals])] = value
            }
            if let path = values["path"], !path.isEmpty {
                addresses.append(DBusAddress(socket: .path(path)))
            } else if let name = values["abstract"], !name.isEmpty {
                addresses.append(DBusAddress(socket: .abstract(name)))
            } else {
                problems.append("unix address \"\(entry)\" names neither path nor abstract")
            }
        }
        guard !addresses.isEmpty else {
            throw DBusFormatError("no usable bus address in \"\(text)\"" + (problems.isEmpty ? "" : ": " + problems.joined(separator: "; ")))
        }
        return addresses
    }

    /// The session bus's address: `DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`
    /// when that socket exists (what systemd's user manager provides); nil when there is none.
    public static func session(environment: [String: String]) throws(DBusFormatError) -> [DBusAddress]? {
        if let text = environment["DBUS_SESSION_BUS_ADDRESS"], !text.isEmpty {
            return try parse(text)
        }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return [DBusAddress(socket: .path(runtime + "/bus"))]
        }
        return nil
    }

    private static func unescape(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let b = iterator.next() {
            if b == UInt8(ascii: "%") {
                guard let h = iterator.next(), let l = iterator.next(),
                      let high = hexValue(h), let low = hexValue(l) else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a") ... UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A") ... UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The client's side of the SASL handshake, as a state machine over lines: `AUTH EXTERNAL`
/// with the process's uid (in hex of its decimal digits), `OK <guid>` back, then `BEGIN`.
/// A server line longer than `maximumLineLength`, or anything but `OK`, ends it.
public struct DBusAuthentication: Sendable {
    public static let maximumLineLength = 1024

    public enum Action: Sendable, Hashable {
        /// Write these bytes, then switch to messages.
        case begin(send: [UInt8], guid: String)
        case fail(String)
        /// Wait for more bytes.
        case wait
    }

    private var buffer: [UInt8] = []

    public init() {}

    /// What to send first: the NUL byte the protocol starts with and the `AUTH` line.
    public static func initialBytes(uid: UInt32) -> [UInt8] {
        let hex = String(uid).utf8.map { String($0, radix: 16) }.joined()
        return [0] + Array("AUTH EXTERNAL \(hex)\r\n".utf8)
    }

    /// Feeds bytes from the server; returns what to do and how many of them were used.
    public mutating func receive(_ bytes: some Collection<UInt8>) -> (Action, consumed: Int) {
        var consumed = 0
        for b in bytes {
            consumed += 1
            buffer.append(b)
            if buffer.count >= 2, buffer[buffer.count - 2] == UInt8(ascii: "\r"), b == UInt8(ascii: "\n") {
                let line = String(decoding: buffer.dropLast(2), as: UTF8.self)
                buffer.removeAll()
                if line.hasPrefix("OK ") {
                    let guid = String(line.dropFirst(3))
                    return (.begin(send: Array("BEGIN\r\n".utf8), guid: guid), consumed)
                }
                return (.fail("the bus refused authentication: \(line.prefix(200))"), consumed)
            }
            if buffer.count > Self.maximumLineLength {
                return (.fail("an authentication line over \(Self.maximumLineLength) bytes"), consumed)
            }
        }
        return (.wait, consumed)
    }
}
