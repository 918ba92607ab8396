import Foundation
import Testing
import TidingsCore
import TidingsDaemon
import TidingsEngine
import TidingsTesting
import TidingsTestSupport

/// Seed 000 §3.3 (Examples/ContentExtension) through the host: the items render with their
/// images, "switch" re-renders with the other item in the same view, "open" forwards to the
/// app, "dismiss" closes. And the sample app's manifest declares it.
@Suite("Seeds' content extension", .timeLimit(.minutes(1)))
struct ExampleContentExtensionTests {
    static let items: PropertyListValue = .array([
        .dictionary(["title": .string("Blue <one>"), "text": .string("The first item")]),
        .dictionary(["title": .string("Orange"), "text": .string("The second item")]),
    ])

    @Test("the items render with their images; switch shows the other item and keeps the view; open forwards; dismiss closes")
    func itemsSwitchOpenDismiss() async throws {
        let h = try await ContentHarness.start(executable: Built.presentItems)
        try await h.deliver("items", userInfo: ["items": Self.items], attachments: 2)
        try await h.deliver("again", userInfo: ["items": Self.items], attachments: 2)
        let session = try await h.open("items")
        let first = try #require(session.view?.html, "\(session.failure ?? "")")
        #expect(first.contains(#"<img src="http://127.0.0.1:1/ext/\#(session.id)/items/0" alt="">"#))
        #expect(first.contains(#"<h2 id="title">Blue &lt;one&gt;</h2>"#))
        #expect(first.contains(#"<p id="position">1 / 2</p>"#))
        let pid = try #require(await h.pid())

        guard case .rendered(let switched) = try await h.host.perform(session: session.id, actionIdentifier: "switch") else {
            Issue.record("switch did not keep the view")
            return
        }
        #expect(switched.id == session.id)
        #expect(switched.view?.html.contains(#"<img src="http://127.0.0.1:1/ext/\#(session.id)/items/1" alt="">"#) == true)
        #expect(switched.view?.html.contains(#"<h2 id="title">Orange</h2>"#) == true)
        guard case .rendered(let back) = try await h.host.perform(session: session.id, actionIdentifier: "switch") else { return }
        #expect(back.view?.html.contains("Blue &lt;one&gt;") == true)
        #expect(await h.pid() == pid, "one process while the view is open")

        #expect(try await h.host.perform(session: session.id, actionIdentifier: "open") == .forwarded)
        #expect(try await h.held() == ["items:open"])

        let second = try await h.open("again")
        #expect(try await h.host.perform(session: second.id, actionIdentifier: "dismiss") == .dismissed)
        #expect(try await h.delivered() == ["again"])
        await h.close()
    }

    @Test("the remote payload: the sample service extension attaches the items' images, the content extension shows them")
    func remoteItems() async throws {
        let server = try await ImageServer.start(path: "/item.png", body: ExampleExtensionTests.png)
        let h = try await ContentHarness.start(executable: Built.presentItems)
        let app = try await h.install("com.example.remote", executable: Built.presentItems, category: "customUI")
        let payload = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("Examples/ContentExtension/items-push.json"), encoding: .utf8)
            .replacingOccurrences(of: "https://example.com/one.png", with: "http://127.0.0.1:\(server.port)/item.png")
            .replacingOccurrences(of: "https://example.com/two.png", with: "http://127.0.0.1:\(server.port)/item.png")
        let push = try #require(RemotePush(apnsID: "items-1", sequence: 1, bundleIdentifier: app.bundleIdentifier, pushType: .alert, priority: .immediate,
                                           collapseID: nil, expiresAt: 0, acceptedAt: 0, payload: Array(payload.utf8)))
        let plan = try RemoteNotificationMapping.plan(push)
        #expect(plan.wantsServiceExtension)
        let request = try #require(plan.request)
        #expect(request.content.categoryIdentifier == "customUI")

        let service = AppExtensionRecord(bundleIdentifier: app.bundleIdentifier + ".service", point: .service, executable: BuiltProducts.path("SampleServiceExtension"))
        let attachments = await h.system.engine.configuration.attachments
        let runner = ServiceExtensionRunner(
            configuration: ServiceExtensionConfiguration(containerRoot: h.system.directory.appendingPathComponent("extensions").path,
                                                         environment: ["no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost", "http_proxy": "", "HTTP_PROXY": ""]),
            clock: h.clock, attachments: attachments)
        let outcome = await runner.modify(request, app: app, extension: service)
        await runner.shutdown()
        try await server.stop()
        #expect(outcome.failure == nil)
        #expect(outcome.content.attachments.map(\.identifier) == ["item-0", "item-1"])

        var modified = request
        modified.content = outcome.content
        await h.system.engine.deliverNow(modified, bundle: app.bundleIdentifier)
        let session = try await h.open("items-1", bundle: app.bundleIdentifier)
        let html = try #require(session.view?.html, "\(session.failure ?? "")")
        #expect(html.contains(#"<img src="http://127.0.0.1:1/ext/\#(session.id)/items-1/0" alt="">"#))
        #expect(html.contains(#"<h2 id="title">Blue</h2>"#))
        guard case .rendered(let switched) = try await h.host.perform(session: session.id, actionIdentifier: "switch") else {
            Issue.record("switch did not keep the view")
            return
        }
        #expect(switched.view?.html.contains(#"<img src="http://127.0.0.1:1/ext/\#(session.id)/items-1/1" alt="">"#) == true)
        #expect(switched.view?.html.contains("Orange") == true)
        await h.close()
    }

    @Test("the sample app's manifest declares the example for its category customUI")
    func sampleManifest() throws {
        let manifest = BuiltProducts.packageRoot.appendingPathComponent("Examples/SampleApp/manifest.json").path
        let app = try AppManifest.load(path: manifest)
        let found = try #require(ContentExtensionDeclaration.find(categoryIdentifier: "customUI", in: app))
        #expect(found.record.executable.hasSuffix("/PresentItemsContentExtension"))
        #expect(found.declaration.initialContentSizeRatio == 0.75)
    }
}
