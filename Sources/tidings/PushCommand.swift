import ArgumentParser
import Foundation
import TidingsCore
import TidingsGateway

/// `tidings push`: send one push to a Tidings gateway (or to Apple) the way a provider does.
struct Push: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a push (a JSON payload or an Xcode simulator .apns file) with a .p8 key.",
        discussion: """
        Prints the apns-id on success. On failure prints the status and reason and exits 1.
        The topic defaults to the .apns file's "Simulator Target Bundle".
        Example: tidings push --key AuthKey_ABC123DEFG.p8 --key-id ABC123DEFG --team TEAM123456 \\
                   --topic com.example.app --cacert ~/.local/share/tidings/tls/gateway-cert.pem <token> payload.json
        """)

    @Argument(help: "The device token (hex).")
    var deviceToken: String

    @Argument(help: "The payload: a JSON file, an .apns file, or - for stdin. Or use --payload.")
    var payloadFile: String?

    @Option(help: "The payload as a JSON string.")
    var payload: String?

    @Option(help: "The .p8 signing key.")
    var key: String

    @Option(name: .customLong("key-id"), help: "The key id (kid).")
    var keyID: String

    @Option(help: "The team id (iss).")
    var team: String

    @Option(help: "apns-topic (default: the .apns file's Simulator Target Bundle).")
    var topic: String?

    @Option(name: .customLong("push-type"), help: "apns-push-type.")
    var pushType: String = "alert"

    @Option(help: "apns-priority: 10, 5 or 1.")
    var priority: String?

    @Option(help: "apns-expiration: UNIX seconds, 0 for deliver-once.")
    var expiration: String?

    @Option(name: .customLong("collapse-id"), help: "apns-collapse-id.")
    var collapseID: String?

    @Option(name: .customLong("apns-id"), help: "apns-id (a UUID).")
    var apnsID: String?

    @Option(name: .customLong("header"), help: "Any other header, NAME:VALUE (repeatable).")
    var headers: [String] = []

    @Option(help: "Gateway host.")
    var host: String = "127.0.0.1"

    @Option(help: "Gateway port.")
    var port: Int = 2197

    @Option(help: "Send to Apple instead: development (api.sandbox.push.apple.com) or production (api.push.apple.com).")
    var apple: String?

    @Option(help: "A PEM certificate to trust (the gateway's self-signed one).")
    var cacert: String?

    @Flag(help: "HTTP/2 cleartext with prior knowledge (a gateway started with --cleartext).")
    var cleartext = false

    @Flag(name: .customLong("no-alpn"), help: "Do not offer ALPN (as aioapns and Pushy).")
    var noALPN = false

    func run() async throws {
        let body = try readPayload()
        var resolvedTopic = topic
        if resolvedTopic == nil, case .object(let o)? = try? JSONValue(parsing: body), let bundle = o["Simulator Target Bundle"]?.stringValue {
            resolvedTopic = bundle + (PushType(rawValue: pushType)?.topicSuffix ?? "")
        }
        guard let resolvedTopic else { throw ValidationError("give --topic (or an .apns file with \"Simulator Target Bundle\")") }
        let signingKey = try ProviderSigningKey(p8File: key)
        var requestHeaders: [(name: String, value: String)] = [
            (name: "authorization", value: "bearer " + (try signingKey.token(keyID: keyID, teamID: team))),
            (name: "apns-topic", value: resolvedTopic),
            (name: "apns-push-type", value: pushType),
        ]
        if let priority { requestHeaders.append((name: "apns-priority", value: priority)) }
        if let expiration { requestHeaders.append((name: "apns-expiration", value: expiration)) }
        if let collapseID { requestHeaders.append((name: "apns-collapse-id", value: collapseID)) }
        if let apnsID { requestHeaders.append((name: "apns-id", value: apnsID)) }
        for h in headers {
            guard let colon = h.firstIndex(of: ":") else { throw ValidationError("--header takes NAME:VALUE") }
            requestHeaders.append((name: h[..<colon].lowercased(), value: String(h[h.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
        }

        var configuration: APNsClientConfiguration
        switch apple {
        case nil: configuration = APNsClientConfiguration(host: host, port: port, useTLS: !cleartext)
        case "development", "sandbox": configuration = .appleDevelopment
        case "production": configuration = .appleProduction
        default: throw ValidationError("--apple is development or production")
        }
        if let cacert { configuration.trustRootPaths = [cacert] }
        configuration.offerALPN = !noALPN
        let connection: APNsConnection
        do { connection = try await APNsConnection.connect(configuration) } catch {
            throw CLIError("cannot connect to \(configuration.host):\(configuration.port): \(error)")
        }
        defer { Task { await connection.close() } }
        let response: APNsResponse
        do {
            response = try await connection.send(APNsRequest(deviceToken: deviceToken, headers: requestHeaders, body: body))
        } catch {
            throw CLIError("\(error)")
        }
        await connection.close()
        if response.status == 200 {
            print(response.apnsID ?? "")
            return
        }
        var message = "\(response.status) \(response.reason ?? String(decoding: response.body, as: UTF8.self))"
        if let ts = response.timestamp { message += " (timestamp \(ts))" }
        if let id = response.apnsID { message += " apns-id \(id)" }
        FileHandle.standardError.write(Data((message + "\n").utf8))
        throw ExitCode(1)
    }

    /// The most `tidings push` reads from a payload file or stdin: the largest APNs payload
    /// (5120 bytes, VoIP) and room for an `.apns` file's "Simulator Target Bundle" and
    /// indentation. A bigger input is refused before anything is sent, and is not read further.
    static let maximumPayloadInput = 8192

    private func readPayload() throws -> [UInt8] {
        if let payload { return Array(payload.utf8) }
        guard let payloadFile else { throw ValidationError("give a payload file, - for stdin, or --payload") }
        let name = payloadFile == "-" ? "stdin" : payloadFile
        let descriptor = payloadFile == "-" ? STDIN_FILENO : open(payloadFile, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CLIError("cannot read \(payloadFile): \(String(cString: strerror(errno)))") }
        defer { if descriptor != STDIN_FILENO { close(descriptor) } }
        let bytes: [UInt8]?
        do { bytes = try BoundedRead.toEnd(descriptor, limit: Self.maximumPayloadInput) } catch {
            throw CLIError("cannot read \(name): \(error)")
        }
        guard let bytes else {
            throw CLIError("the payload in \(name) is over \(Self.maximumPayloadInput) bytes (APNs takes at most \(PushType.alert.maximumPayloadSize), \(PushType.voip.maximumPayloadSize) for voip); nothing was sent")
        }
        return bytes
    }
}
