import Foundation

#if !canImport(CoreGraphics)
extension CGRect {
    /// CoreGraphics' `dictionaryRepresentation` (`X`, `Y`, `Width`, `Height`), so
    /// `UNNotificationAttachmentOptionsThumbnailClippingRectKey:
    /// rect.dictionaryRepresentation` is written as for iOS.
    public var dictionaryRepresentation: [String: Any] {
        ["X": Double(origin.x), "Y": Double(origin.y), "Width": Double(size.width), "Height": Double(size.height)]
    }
}
#endif
