import Foundation
import Logging
import Testing
import TidingsCore
import TidingsEngine
@testable import TidingsWeb

/// The hub's bounds: pages, a page's queue, waiting consent prompts.
@Suite struct WebHubTests {
    func hub(_ change: (inout WebHub.Limits) -> Void = { _ in }) -> WebHub {
        var limits = WebHub.Limits()
        change(&limits)
        return WebHub(attachmentsRoot: "/nonexistent", limits: limits, logger: Logger(label: "test"))
    }

    func presented(_ id: String) -> PresentedNotification {
        var content = NotificationContentValue()
        content.title = "<b>\(id)</b>"
        return PresentedNotification(bundleIdentifier: "com.example.app", appName: "App",
                                     notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: id, content: content, trigger: nil), date: Date()),
                                     category: nil, presentation: Presentation(banner: true, list: true, sound: false, badge: false), badge: nil)
    }

    @Test func pagesAtTheLimitAndPast() {
        let hub = hub { $0.maximumPages = 2 }
        let first = hub.openPage(), second = hub.openPage()
        #expect(first != nil && second != nil)
        #expect(hub.openPage() == nil)
        hub.closePage(first!.id)
        #expect(hub.openPage() != nil)
    }

    @Test func aPageThatFallsBehindIsDisconnected() async {
        let hub = hub { $0.pageQueueLimit = 3 }
        guard let page = hub.openPage() else { Issue.record("no page"); return }
        for index in 0..<3 { await hub.present(presented("n\(index)")) }
        #expect(hub.pageCount == 1)
        await hub.present(presented("n3"))
        #expect(hub.pageCount == 0)
        var received: [String] = []
        for await message in page.messages { received.append(message) }
        // What was queued still arrives, then the stream ends: the page reloads the center.
        #expect(received.count == 3)
        #expect(received[0].contains("\"title\":\"<b>n0<\\/b>\"") || received[0].contains("\"title\":\"<b>n0</b>\""))
    }

    @Test("hidden previews come from the settings the notification carries: no lookup in the engine")
    func previewsHiddenByCarriedSettings() async {
        let hub = hub()
        guard let page = hub.openPage() else { Issue.record("no page"); return }
        var hidden = presented("secret")
        hidden.notification.request.content.body = "the body"
        hidden.settings = NotificationSettingsValue()
        hidden.settings?.showPreviewsSetting = .never
        var shown = hidden
        shown.settings?.showPreviewsSetting = .always
        await hub.present(hidden)
        await hub.present(shown)
        var iterator = page.messages.makeAsyncIterator()
        let first = await iterator.next() ?? "", second = await iterator.next() ?? ""
        #expect(first.contains("\"previewsHidden\":true") && !first.contains("the body"), "\(first)")
        #expect(second.contains("\"previewsHidden\":false") && second.contains("the body"), "\(second)")
    }

    @Test func consentIsAnsweredInThePage() async {
        let hub = hub()
        guard let page = hub.openPage() else { Issue.record("no page"); return }
        async let answer = hub.requestConsent(appName: "App", bundleIdentifier: "com.example.app", options: [.alert, .sound])
        var iterator = page.messages.makeAsyncIterator()
        let prompt = await iterator.next() ?? ""
        #expect(prompt.contains("\"type\":\"consent\"") && prompt.contains("alerts") && prompt.contains("sounds"))
        #expect(hub.pendingPrompts.count == 1)
        #expect(!hub.answer(prompt: 999, allow: true))
        #expect(hub.answer(prompt: hub.pendingPrompts[0].id, allow: true))
        #expect(await answer)
        #expect(hub.pendingPrompts.isEmpty)
        #expect(!hub.answer(prompt: 1, allow: false))
    }

    @Test func promptsAtTheLimitAndPast() async {
        let hub = hub { $0.maximumPendingPrompts = 2 }
        async let a = hub.requestConsent(appName: "A", bundleIdentifier: "com.example.a", options: [.alert])
        async let b = hub.requestConsent(appName: "B", bundleIdentifier: "com.example.b", options: [.alert])
        while hub.pendingPrompts.count < 2 { await Task.yield() }
        // A third waits for no one: denied at once.
        #expect(await hub.requestConsent(appName: "C", bundleIdentifier: "com.example.c", options: [.alert]) == false)
        for prompt in hub.pendingPrompts { _ = hub.answer(prompt: prompt.id, allow: prompt.app == "com.example.a") }
        #expect(await a == true)
        #expect(await b == false)
    }
}
