import Testing
import TidingsCore

/// The one escape of HTML and desktop-notification markup (content extension views, D-Bus bodies).
@Suite struct MarkupTextTests {
    @Test func escapesTheFiveCharactersAndKeepsEverythingElse() {
        #expect(MarkupText.escape("") == "")
        #expect(MarkupText.escape("plain text") == "plain text")
        #expect(MarkupText.escape("<a href='x' title=\"y\">&amp;</a>")
                == "&lt;a href=&#39;x&#39; title=&quot;y&quot;&gt;&amp;amp;&lt;/a&gt;")
        #expect(MarkupText.escape("Grüße, 東京 👋🏽 — é") == "Grüße, 東京 👋🏽 — é")
        // A combining mark after `<` makes one Character ("≮" spelled as two scalars): still escaped.
        #expect(MarkupText.escape("<\u{338}b>") == "&lt;\u{338}b&gt;")
    }
}
