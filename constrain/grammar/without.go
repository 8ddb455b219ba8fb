package grammar

import (
	"encoding/json"
	"strings"
)

// TextWithout is the grammar of free text in which none of anywhere occurs
// and which does not begin (after whitespace) with any of atStart. A server
// uses it to keep a model from opening a tool call it may not make
// (tool_choice "none"): the ban is on the text, so it holds whichever
// tokens spell the opener — a special token of its own, which no text
// grammar admits, or its pieces one by one. The end of generation is
// allowed at every point, since every prefix of an allowed text is one.
func TextWithout(anywhere, atStart []string) Grammar {
	// Lark terminals may be intersected (&) and complemented (~) in
	// llguidance's dialect; ANY keeps the complement within UTF-8 text.
	var b strings.Builder
	b.WriteString("start: TEXT\nTEXT: ANY")
	for _, s := range anywhere {
		b.WriteString(" & ~(ANY " + larkString(s) + " ANY)")
	}
	for _, s := range atStart {
		b.WriteString(" & ~(WS " + larkString(s) + " ANY)")
	}
	b.WriteString("\nANY: /(?s:.*)/\nWS: /[ \\t\\r\\n]*/")
	return Grammar{Kind: Lark, Data: b.String()}
}

// larkString quotes s as a Lark string literal, which llguidance reads as
// JSON.
func larkString(s string) string {
	q, _ := json.Marshal(s) // a string always marshals
	return string(q)
}
