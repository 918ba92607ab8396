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

    @Test("the sample app's manifest declares the example for its category customUI")
    func sampleManifest() throws {
        let manifest = BuiltProducts.packageRoot.appendingPathComponent("Examples/SampleApp/manifest.json").path
        let app = try AppManifest.load(path: manifest)
        let found = try #require(ContentExtensionDeclaration.find(categoryIdentifier: "customUI", in: app))
        #expect(found.record.executable.hasSuffix("/PresentItemsContentExtension"))
        #expect(found.declaration.initialContentSizeRatio == 0.75)
    }
}
