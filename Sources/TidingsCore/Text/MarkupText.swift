/// Text for HTML and for the desktop notification specification's XML-like body markup.
public enum MarkupText {
    /// `text` with `&`, `<`, `>`, `"` and `'` escaped: safe in HTML or XML text and attribute
    /// values. Scalar by scalar, so a mark combining with `<` (`<\u{338}`) is escaped too.
    public static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
