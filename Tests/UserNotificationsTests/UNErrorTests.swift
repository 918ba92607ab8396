import Foundation
import Testing
import TidingsCore
@_spi(Tidings) @testable import UserNotifications

@Suite("UNError")
struct UNErrorTests {
    @Test func codesAreApples() {
        #expect(UNError.Code.notificationsNotAllowed.rawValue == 1)
        #expect(UNError.Code.attachmentInvalidURL.rawValue == 100)
        #expect(UNError.Code.attachmentUnrecognizedType.rawValue == 101)
        #expect(UNError.Code.attachmentInvalidFileSize.rawValue == 102)
        #expect(UNError.Code.attachmentNotInDataStore.rawValue == 103)
        #expect(UNError.Code.attachmentMoveIntoDataStoreFailed.rawValue == 104)
        #expect(UNError.Code.attachmentCorrupt.rawValue == 105)
        #expect(UNError.Code.notificationInvalidNoDate.rawValue == 1400)
        #expect(UNError.Code.notificationInvalidNoContent.rawValue == 1401)
        #expect(UNError.Code.contentProvidingObjectNotAllowed.rawValue == 1500)
        #expect(UNError.Code.contentProvidingInvalid.rawValue == 1501)
        #expect(UNError.Code.badgeInputInvalid.rawValue == 1600)
    }

    @Test func everyEngineCodeHasAUNErrorCode() {
        let engineCodes: [NotificationError.Code] = [
            .notificationsNotAllowed, .attachmentInvalidURL, .attachmentUnrecognizedType, .attachmentInvalidFileSize,
            .attachmentNotInDataStore, .attachmentMoveIntoDataStoreFailed, .attachmentCorrupt, .notificationInvalidNoDate,
            .notificationInvalidNoContent, .contentProvidingObjectNotAllowed, .contentProvidingInvalid, .badgeInputInvalid,
            .invalidTrigger, .daemonUnavailable, .invalidRequest,
        ]
        for code in engineCodes {
            let error = UNError(NotificationError(code, "why"))
            #expect(error.code.rawValue == code.rawValue)
            #expect(error.message == "why")
            #expect(error.notificationError == NotificationError(code, "why"))
        }
        let unknown = UNError(NotificationError(NotificationError.Code(rawValue: 9999), "future"))
        #expect(unknown.code == .invalidRequest)
        #expect(unknown.message.contains("9999"))
    }

    @Test func bridgesToNSError() {
        let error: any Error = UNError(.attachmentCorrupt, "The file is not a PNG.")
        let ns = error as NSError
        #expect(ns.domain == "UNErrorDomain")
        #expect(ns.domain == UNErrorDomain)
        #expect(ns.code == 105)
        #expect(ns.localizedDescription == "The file is not a PNG.")
        #expect(error.localizedDescription == "The file is not a PNG.")
        #expect(UNError(.badgeInputInvalid).message == UNError.Code.badgeInputInvalid.defaultMessage)
    }

    @Test func catchPatternsWork() {
        func fail() throws { throw UNError(.badgeInputInvalid, "negative") }
        var caught = false
        do {
            try fail()
        } catch UNError.badgeInputInvalid {
            caught = true
        } catch {
            Issue.record("wrong clause: \(error)")
        }
        #expect(caught)
        do {
            try fail()
        } catch let error as UNError where error.code == .badgeInputInvalid {
            #expect(error.message == "negative")
        } catch {
            Issue.record("wrong clause: \(error)")
        }
    }
}
