import Foundation
import TidingsCore

/// What a notification center puts around a content extension's HTML: the frame's
/// document, its Content-Security-Policy and its `sandbox` attribute, so the rules live in
/// one place (docs/content-extensions.md, "The frame").
public enum ContentExtensionFrame {
    /// The Content-Security-Policy of the frame: nothing loads but the attachments the
    /// center serves from `attachmentOrigin` (and `data:` URLs), inline styles, and inline
    /// scripts only when the manifest sets `UNNotificationExtensionUserInteractionEnabled`.
    /// Send it as the frame response's header too (`frame-ancestors` works only there).
    /// An origin that is not `scheme://host[:port]` is left out.
    public static func contentSecurityPolicy(declaration: ContentExtensionDeclaration, attachmentOrigin: String?, frameAncestors: String? = nil) -> String {
        let origin = attachmentOrigin.flatMap { isOrigin($0) ? " " + $0 : nil } ?? ""
        var directives = [
            "default-src 'none'",
            "img-src\(origin) data:",
            "media-src\(origin) data:",
            "style-src 'unsafe-inline'",
            "font-src data:",
            "form-action 'none'",
            "base-uri 'none'",
            "script-src " + (declaration.userInteractionEnabled ? "'unsafe-inline'" : "'none'"),
        ]
        if let ancestors = frameAncestors, isOrigin(ancestors) { directives.append("frame-ancestors \(ancestors)") }
        return directives.joined(separator: "; ")
    }

    /// The iframe's `sandbox` attribute: nothing allowed, or scripts when the manifest sets
    /// `UNNotificationExtensionUserInteractionEnabled`. Never `allow-same-origin`: the frame
    /// has an opaque origin and cannot reach the center's page, cookie or secret.
    public static func sandbox(declaration: ContentExtensionDeclaration) -> String {
        declaration.userInteractionEnabled ? "allow-scripts" : ""
    }

    /// The frame's whole document: the policy as a `<meta>` (it holds in `srcdoc` too), then
    /// the extension's fragment as the body; in an interactive view, first the script that
    /// sends the view's events to the extension (`eventScript`).
    public static func document(view: ContentExtensionViewValue, declaration: ContentExtensionDeclaration, attachmentOrigin: String?) -> String {
        let policy = contentSecurityPolicy(declaration: declaration, attachmentOrigin: attachmentOrigin)
        let script = declaration.userInteractionEnabled ? "<script>\(eventScript)</script>" : ""
        return """
        <!doctype html><html><head><meta charset="utf-8">\
        <meta http-equiv="Content-Security-Policy" content="\(policy.replacingOccurrences(of: "\"", with: "&quot;"))">\
        <meta name="viewport" content="width=device-width,initial-scale=1">\
        <style>html,body{margin:0;padding:0;overflow:hidden}img{max-width:100%}</style>\
        \(script)</head><body>\(view.html)</body></html>
        """
    }

    /// In an interactive view: a click on an element with an `id` and the attribute
    /// `data-tidings-event` (or a change of such an input or select) sends the extension an
    /// event with the element's id and its `data-value` (or its `value`);
    /// `tidings.send(id, value)` sends one from the view's own scripts. The frame posts it
    /// to the center's page with its capability token (from its own address); the page
    /// relays it only from the frame it opened (docs/content-extensions.md).
    public static let eventScript = """
        (() => { const token = location.pathname.split("/")[2] || "";
        const send = (element, value) => parent.postMessage({ tidings: "event", token, element: String(element), value: String(value ?? "") }, "*");
        window.tidings = Object.freeze({ send });
        const target = (event) => { const t = event.target instanceof Element ? event.target.closest("[data-tidings-event][id]") : null; return t; };
        document.addEventListener("click", (event) => { const t = target(event); if (t && !t.matches("input,select,textarea")) send(t.id, t.dataset.value ?? ""); });
        document.addEventListener("change", (event) => { const t = target(event); if (t && t.matches("input,select,textarea")) send(t.id, t.type === "checkbox" ? String(t.checked) : t.value); });
        })();
        """

    /// The frame's height for a width: the extension's `preferredContentSize` ratio when it
    /// set one (with a width above 0), else the manifest's initial ratio; at most 10 × width.
    public static func height(forWidth width: Double, view: ContentExtensionViewValue?, declaration: ContentExtensionDeclaration) -> Double {
        var ratio = declaration.initialContentSizeRatio
        if let size = view?.preferredContentSize, size.count == 2, size[0] > 0 { ratio = size[1] / size[0] }
        return width * min(max(ratio, 0), ContentExtensionDeclaration.maximumContentSizeRatio)
    }

    /// `scheme://host[:port]`: letters, digits and `.-:[]` after the scheme, no path.
    static func isOrigin(_ text: String) -> Bool {
        guard let range = text.range(of: "://"), text.count <= 200 else { return false }
        let scheme = text[..<range.lowerBound], rest = text[range.upperBound...]
        return ["http", "https"].contains(scheme) && !rest.isEmpty
            && rest.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || ".-:[]".contains($0)) }
    }
}
