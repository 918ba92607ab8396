import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

@Suite("UNNotificationAttachment validation")
struct AttachmentTests {
    let dir: Fixtures.TemporaryDirectory

    init() throws {
        dir = try Fixtures.TemporaryDirectory()
    }

    static let validFiles: [(name: String, bytes: [UInt8], uti: String)] = [
        ("image.png", Fixtures.png, "public.png"),
        ("image.jpg", Fixtures.jpeg, "public.jpeg"),
        ("photo.JPEG", Fixtures.jpeg, "public.jpeg"),
        ("anim.gif", Fixtures.gif, "com.compuserve.gif"),
        ("song.mp3", Fixtures.mp3, "public.mp3"),
        ("frame.mp3", Fixtures.mp3Frame, "public.mp3"),
        ("sound.wav", Fixtures.wav, "com.microsoft.waveform-audio"),
        ("sound.aiff", Fixtures.aiff, "public.aiff-audio"),
        ("voice.m4a", Fixtures.m4a, "public.mpeg-4-audio"),
        ("movie.mp4", Fixtures.mp4, "public.mpeg-4"),
        ("movie.avi", Fixtures.avi, "public.avi"),
        ("movie.mpg", Fixtures.mpeg, "public.mpeg"),
    ]

    @Test(arguments: validFiles)
    func supportedFilesAreAccepted(file: (name: String, bytes: [UInt8], uti: String)) throws {
        let url = try dir.file(file.name, file.bytes)
        let attachment = try UNNotificationAttachment(identifier: "a", url: url, options: nil)
        #expect(attachment.type == file.uti)
        #expect(attachment.identifier == "a")
        #expect(attachment.url.path == url.standardizedFileURL.path)
    }

    @Test func emptyIdentifierGetsAUniqueOne() throws {
        let url = try dir.file("x.png", Fixtures.png)
        let a = try UNNotificationAttachment(identifier: "", url: url)
        let b = try UNNotificationAttachment(identifier: "", url: url)
        #expect(!a.identifier.isEmpty)
        #expect(a.identifier != b.identifier)
    }

    @Test func missingFileIsInvalidURL() {
        let url = dir.url.appendingPathComponent("missing.png")
        #expect { try UNNotificationAttachment(identifier: "a", url: url) } throws: { ($0 as? UNError)?.code == .attachmentInvalidURL }
    }

    @Test func remoteURLIsInvalidURL() throws {
        let url = try #require(URL(string: "https://example.com/image.jpg"))
        #expect { try UNNotificationAttachment(identifier: "a", url: url) } throws: { error in
            guard let error = error as? UNError else { return false }
            return error.code == .attachmentInvalidURL && error.message.contains("not a file URL")
        }
    }

    @Test func directoryIsInvalidURL() throws {
        let sub = dir.url.appendingPathComponent("folder.png")
        try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
        #expect { try UNNotificationAttachment(identifier: "a", url: sub) } throws: { ($0 as? UNError)?.code == .attachmentInvalidURL }
    }

    @Test func unknownExtensionIsUnrecognizedType() throws {
        let txt = try dir.file("notes.txt", Array("hello".utf8))
        #expect { try UNNotificationAttachment(identifier: "a", url: txt) } throws: { ($0 as? UNError)?.code == .attachmentUnrecognizedType }
        let bare = try dir.file("noextension", Fixtures.png)
        #expect { try UNNotificationAttachment(identifier: "a", url: bare) } throws: { ($0 as? UNError)?.code == .attachmentUnrecognizedType }
    }

    @Test func typeHintSuppliesTheType() throws {
        let bare = try dir.file("download.tmp", Fixtures.jpeg)
        let attachment = try UNNotificationAttachment(identifier: "a", url: bare, options: [UNNotificationAttachmentOptionsTypeHintKey: "public.jpeg"])
        #expect(attachment.type == "public.jpeg")
        let mime = try UNNotificationAttachment(identifier: "a", url: bare, options: [UNNotificationAttachmentOptionsTypeHintKey: "image/jpeg"])
        #expect(mime.type == "public.jpeg")
        #expect {
            try UNNotificationAttachment(identifier: "a", url: bare, options: [UNNotificationAttachmentOptionsTypeHintKey: "public.plain-text"])
        } throws: { ($0 as? UNError)?.code == .attachmentUnrecognizedType }
        #expect {
            try UNNotificationAttachment(identifier: "a", url: bare, options: [UNNotificationAttachmentOptionsTypeHintKey: 42])
        } throws: { ($0 as? UNError)?.code == .attachmentUnrecognizedType }
    }

    @Test func bytesThatDoNotMatchTheTypeAreCorrupt() throws {
        let fake = try dir.file("fake.png", Fixtures.jpeg)
        #expect { try UNNotificationAttachment(identifier: "a", url: fake) } throws: { ($0 as? UNError)?.code == .attachmentCorrupt }
        let text = try dir.file("text.mp4", Array("not a movie at all".utf8))
        #expect { try UNNotificationAttachment(identifier: "a", url: text) } throws: { ($0 as? UNError)?.code == .attachmentCorrupt }
        let empty = try dir.file("empty.gif", [])
        #expect { try UNNotificationAttachment(identifier: "a", url: empty) } throws: { ($0 as? UNError)?.code == .attachmentCorrupt }
        // A hint does not excuse wrong bytes.
        let hinted = try dir.file("x.bin", Fixtures.png)
        #expect {
            try UNNotificationAttachment(identifier: "a", url: hinted, options: [UNNotificationAttachmentOptionsTypeHintKey: "public.mp3"])
        } throws: { ($0 as? UNError)?.code == .attachmentCorrupt }
    }

    @Test(arguments: [
        ("big.png", Fixtures.png, Int64(10 * 1024 * 1024)),
        ("big.wav", Fixtures.wav, Int64(5 * 1024 * 1024)),
        ("big.mp4", Fixtures.mp4, Int64(50 * 1024 * 1024)),
    ])
    func sizeLimitsPerKind(name: String, bytes: [UInt8], limit: Int64) throws {
        let atLimit = try dir.file("ok-" + name, bytes, size: limit)
        _ = try UNNotificationAttachment(identifier: "a", url: atLimit)
        let over = try dir.file(name, bytes, size: limit + 1)
        #expect { try UNNotificationAttachment(identifier: "a", url: over) } throws: { error in
            guard let error = error as? UNError else { return false }
            return error.code == .attachmentInvalidFileSize && error.message.contains("\(limit)")
        }
    }

    /// The daemon refuses a symbolic link at `add` (attachmentInvalidURL); the attachment's
    /// creation refuses it the same way, so the error comes where Apple's would. A link in a
    /// directory above the file is walked by the daemon, and accepted here too.
    @Test func symbolicLinksAreRefusedWhenTheAttachmentIsCreated() throws {
        let target = try dir.file("target.png", Fixtures.png)
        let link = dir.url.appendingPathComponent("link.png")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        #expect { try UNNotificationAttachment(identifier: "a", url: link) } throws: { error in
            guard let error = error as? UNError else { return false }
            return error.code == .attachmentInvalidURL && error.message.contains("symbolic link")
        }
        let linkedDirectory = dir.url.appendingPathComponent("linked")
        try FileManager.default.createSymbolicLink(at: linkedDirectory, withDestinationURL: dir.url)
        #expect(try UNNotificationAttachment(identifier: "a", url: linkedDirectory.appendingPathComponent("target.png")).type == "public.png")
    }

    @Test func thumbnailOptionsAreValidatedAndKept() throws {
        let url = try dir.file("x.mp4", Fixtures.mp4)
        let attachment = try UNNotificationAttachment(identifier: "a", url: url, options: [
            UNNotificationAttachmentOptionsThumbnailHiddenKey: true,
            UNNotificationAttachmentOptionsThumbnailClippingRectKey: ["X": 0.25, "Y": 0.25, "Width": 0.5, "Height": 0.5],
            UNNotificationAttachmentOptionsThumbnailTimeKey: ["value": 300, "timescale": 100],
        ])
        #expect(attachment.options == AttachmentOptions(thumbnailHidden: true, thumbnailClippingRect: [0.25, 0.25, 0.5, 0.5], thumbnailTime: 3))
        let rect = try UNNotificationAttachment(identifier: "a", url: url, options: [
            UNNotificationAttachmentOptionsThumbnailClippingRectKey: CGRect(x: 0, y: 0, width: 1, height: 1),
            UNNotificationAttachmentOptionsThumbnailTimeKey: 2.5,
        ])
        #expect(rect.options.thumbnailClippingRect == [0, 0, 1, 1])
        #expect(rect.options.thumbnailTime == 2.5)

        #expect {
            try UNNotificationAttachment(identifier: "a", url: url, options: [UNNotificationAttachmentOptionsThumbnailClippingRectKey: ["X": 0.5, "Y": 0, "Width": 0.8, "Height": 1]])
        } throws: { ($0 as? UNError)?.code == .invalidRequest }
        #expect {
            try UNNotificationAttachment(identifier: "a", url: url, options: [UNNotificationAttachmentOptionsThumbnailTimeKey: -1])
        } throws: { ($0 as? UNError)?.code == .invalidRequest }
        #expect {
            try UNNotificationAttachment(identifier: "a", url: url, options: [UNNotificationAttachmentOptionsThumbnailHiddenKey: "yes"])
        } throws: { ($0 as? UNError)?.code == .invalidRequest }
    }

    /// `UNNotificationAttachmentOptionsThumbnailTimeKey`: a frame or seconds as any number
    /// type, or a CMTime dictionary as `CMTimeCopyAsDictionary` makes it; anything else is a
    /// typed error at creation, before `add`.
    @Test func thumbnailTimeAcceptsNumbersAndCMTimeDictionaries() throws {
        let url = try dir.file("t.gif", Fixtures.gif)
        func time(_ value: Any) throws -> Double? {
            try UNNotificationAttachment(identifier: "a", url: url, options: [UNNotificationAttachmentOptionsThumbnailTimeKey: value]).options.thumbnailTime
        }
        #expect(try time(1) == 1)
        #expect(try time(Int64(2)) == 2)
        #expect(try time(UInt8(3)) == 3)
        #expect(try time(Float(0.5)) == 0.5)
        #expect(try time(NSNumber(value: 4)) == 4)
        #expect(try time(1e12) == 1e12)   // past the end: the page shows the last frame
        #expect(try time(["value": Int64(3), "timescale": Int32(2), "flags": UInt32(1), "epoch": Int64(0)]) == 1.5)
        #expect(try time(["value": 0, "timescale": 600]) == 0)

        let bad: [Any] = [
            -1, -0.5, Double.nan, Double.infinity, "1", [1, 2],
            ["value": 1], ["timescale": 1], ["value": "1", "timescale": 1],
            ["value": 1, "timescale": 0], ["value": 1, "timescale": -1], ["value": 1, "timescale": 0.5],
            ["value": 1.5, "timescale": 1], ["value": -3, "timescale": 1], ["value": 1, "timescale": 3e9],
            ["value": Double.nan, "timescale": 1], ["value": 1e30, "timescale": 1],
            ["value": 1, "timescale": 1, "flags": 0],          // not kCMTimeFlags_Valid
            ["value": 1, "timescale": 1, "flags": 1 | 4],      // +infinity
            ["value": 1, "timescale": 1, "flags": 1 | 16],     // indefinite
            ["value": 1, "timescale": 1, "flags": "valid"],
        ]
        for value in bad {
            #expect { _ = try time(value) } throws: { error in
                guard let error = error as? UNError else { return false }
                return error.code == .invalidRequest && error.message.contains("UNNotificationAttachmentOptionsThumbnailTimeKey")
            }
        }
    }

    @Test func attachmentsTravelAsValues() throws {
        let url = try dir.file("x.gif", Fixtures.gif)
        let attachment = try UNNotificationAttachment(identifier: "g", url: url)
        let content = UNMutableNotificationContent()
        content.attachments = [attachment]
        let value = try content.value()
        #expect(value.attachments == [AttachmentValue(identifier: "g", path: url.standardizedFileURL.path, type: "com.compuserve.gif")])
        #expect(UNNotificationContent(value: value).attachments == [attachment])
    }
}
