import Foundation
import Testing
import TidingsCore
import TidingsEngine
@testable import TidingsWeb
import TidingsTesting

/// What the center serves from disk: only files directly in the app's store (or its sounds).
@Suite struct WebFilesTests {
    @Test func namesAreOneSafeComponent() {
        #expect(WebFiles.isSafeName("8C1D0F7E-1A2B.png"))
        #expect(WebFiles.isSafeName("ding.wav"))
        for bad in ["", "..", ".hidden", "../x.png", "a/b.png", "a\\b.png", "x.png\0", "%2e%2e", String(repeating: "a", count: 256), "é.png"] {
            #expect(!WebFiles.isSafeName(bad), "\(bad)")
        }
    }

    @Test func attachmentsOnlyFromTheAppsStore() throws {
        let root = TemporaryDirectories.make(prefix: "web-files-")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = root.appendingPathComponent("attachments")
        let app = store.appendingPathComponent("com.example.app")
        try FileManager.default.createDirectory(at: app, withIntermediateDirectories: true)
        try Data([0x89, 0x50]).write(to: app.appendingPathComponent("a.png"))
        try Data("secret".utf8).write(to: root.appendingPathComponent("web-secret.png"))
        try FileManager.default.createSymbolicLink(atPath: app.appendingPathComponent("link.png").path, withDestinationPath: root.appendingPathComponent("web-secret.png").path)
        try FileManager.default.createDirectory(at: store.appendingPathComponent("com.example.other"), withIntermediateDirectories: true)

        #expect(WebFiles.attachment(app: "com.example.app", name: "a.png", root: store.path)?.type == "image/png")
        #expect(WebFiles.attachment(app: "com.example.app", name: "link.png", root: store.path) == nil)
        #expect(WebFiles.attachment(app: "com.example.app", name: "../../web-secret.png", root: store.path) == nil)
        #expect(WebFiles.attachment(app: "..", name: "web-secret.png", root: store.path) == nil)
        #expect(WebFiles.attachment(app: "com.example.other", name: "a.png", root: store.path) == nil)
        #expect(WebFiles.attachment(app: "com.example.app", name: "a.txt", root: store.path) == nil)

        // The page gets a URL only for a file directly in the app's folder of the store.
        var content = NotificationContentValue()
        content.title = "t"
        content.attachments = [
            AttachmentValue(identifier: "in", path: app.appendingPathComponent("a.png").path, type: "public.png"),
            AttachmentValue(identifier: "out", path: root.appendingPathComponent("web-secret.png").path, type: "public.png"),
            AttachmentValue(identifier: "other", path: store.appendingPathComponent("com.example.other/a.png").path, type: "public.png"),
        ]
        let view = NotificationView(app: "com.example.app", appName: "App",
                                    notification: DeliveredNotificationValue(request: NotificationRequestValue(identifier: "n", content: content, trigger: nil), date: Date()),
                                    category: nil, presentation: nil, badge: nil, settings: nil, attachmentsRoot: store.path)
        #expect(view.attachments.map(\.url) == ["/attachments/com.example.app/a.png"])
    }

    @Test func hiddenPreviewsWithholdTheBody() {
        var content = NotificationContentValue()
        content.title = "Title"
        content.subtitle = "Sub"
        content.body = "private"
        var settings = NotificationSettingsValue.granted([.alert], provisional: false)
        settings.showPreviewsSetting = .never
        let category = CategoryValue(identifier: "c", actions: [], hiddenPreviewsBodyPlaceholder: "%u new", options: CategoryValue.hiddenPreviewsShowTitle)
        let notification = DeliveredNotificationValue(request: NotificationRequestValue(identifier: "n", content: content, trigger: nil), date: Date())
        let hidden = NotificationView(app: "com.example.app", appName: "App", notification: notification, category: category,
                                      presentation: nil, badge: nil, settings: settings, attachmentsRoot: "/nonexistent")
        #expect(hidden.previewsHidden && hidden.body.isEmpty && hidden.subtitle.isEmpty && hidden.title == "Title")
        settings.showPreviewsSetting = .whenAuthenticated
        let shown = NotificationView(app: "com.example.app", appName: "App", notification: notification, category: category,
                                     presentation: nil, badge: nil, settings: settings, attachmentsRoot: "/nonexistent")
        #expect(!shown.previewsHidden && shown.body == "private")
    }
}
