package stream_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	. "github.com/sluicehq/sluice/server/stream"
)

// parsed is a parse's outcome in canonical form: content runs merged and
// each call's argument fragments joined, in output order.
type parsed struct {
	content string
	items   []string // "text:…" or "call:index:id:name:args"
	calls   []parsedCall
}

type parsedCall struct{ id, name, args string }

func canon(t testing.TB, evs []ToolEvent) parsed {
	t.Helper()
	var p parsed
	for _, e := range evs {
		switch {
		case e.Call == nil:
			p.content += e.Content
			if n := len(p.items); n > 0 && strings.HasPrefix(p.items[n-1], "text:") {
				p.items[n-1] += e.Content
			} else {
				p.items = append(p.items, "text:"+e.Content)
			}
		case e.Call.ID != "":
			if e.Call.Index != len(p.calls) || e.Call.Name == "" {
				t.Fatalf("call %d opened with index %d, id %q", len(p.calls), e.Call.Index, e.Call.ID)
			}
			p.calls = append(p.calls, parsedCall{id: e.Call.ID, name: e.Call.Name, args: e.Call.Arguments})
			p.items = append(p.items, fmt.Sprintf("call:%d", e.Call.Index))
		default:
			if e.Call.Index != len(p.calls)-1 || e.Call.ID != "" {
				t.Fatalf("arguments for call %d (id %q) while call %d is open", e.Call.Index, e.Call.ID, len(p.calls)-1)
			}
			p.calls[e.Call.Index].args += e.Call.Arguments
		}
	}
	for i, c := range p.calls {
		p.items = append(p.items, fmt.Sprintf("%d=%s(%s)", i, c.name, c.args))
	}
	return p
}

func counter() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("call_%d", n) }
}

// parseCut feeds text cut at the given offsets (sorted, within text).
func parseCut(t testing.TB, f ToolFormat, text string, cuts []int) (parsed, []ToolEvent) {
	return parseEnd(t, f, text, cuts, false)
}

// parseEnd is parseCut ending with FinishCut when limit is set: the
// output stopped at the token limit, not where the model ended it.
func parseEnd(t testing.TB, f ToolFormat, text string, cuts []int, limit bool) (parsed, []ToolEvent) {
	p := NewToolParser(f, counter())
	var evs []ToolEvent
	prev := 0
	for _, c := range cuts {
		evs = append(evs, p.Feed(text[prev:c])...)
		prev = c
	}
	evs = append(evs, p.Feed(text[prev:])...)
	if limit {
		evs = append(evs, p.FinishCut()...)
	} else {
		evs = append(evs, p.Finish()...)
	}
	return canon(t, evs), evs
}

func TestToolParserCases(t *testing.T) {
	type call struct{ name, args string }
	cases := []struct {
		f       ToolFormat
		in      string
		content string
		calls   []call
	}{
		{ToolsHermes, `Hello, world`, `Hello, world`, nil},
		{ToolsHermes, "\n\n  ", "\n\n  ", nil},
		{ToolsHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []call{{"get_weather", `{"city": "Paris"}`}}},
		{ToolsHermes, "Let me check.\n<tool_call>{\"arguments\": {\"q\": [1, {\"a\": \"}\"}]}, \"name\": \"s\"}</tool_call>\n<tool_call>{\"name\": \"t\"}</tool_call>\n", "Let me check.\n", []call{{"s", `{"q": [1, {"a": "}"}]}`}, {"t", `{}`}}},
		{ToolsHermes, `<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>`, "", []call{{"f", `{"x": 1}`}}},
		{ToolsHermes, `<tool_call>{"name": "f\u00e9", "id": 7, "arguments": {"s": "a\"}b"}}</tool_call> done`, " done", []call{{"fé", `{"s": "a\"}b"}`}}},
		{ToolsHermes, `<tool_call>not json</tool_call>`, `<tool_call>not json</tool_call>`, nil},
		{ToolsHermes, `a <tool_cal b`, `a <tool_cal b`, nil},
		{ToolsHermes, `x <tool_call>{"arguments": {}}</tool_call>`, `x <tool_call>{"arguments": {}}</tool_call>`, nil},
		{ToolsHermes, `<tool_call>{"name": "f", "arguments": {"a": 1`, "", []call{{"f", `{"a": 1`}}},
		{ToolsHermes, `<tool_call>{"name": "f", "arguments": {"a": 1}}`, "", []call{{"f", `{"a": 1}`}}},
		{ToolsHermes, `<tool_call>{"name": "f", "arguments": {}} oops`, " oops", []call{{"f", `{}`}}},
		{ToolsLlama3, `{"name": "f", "parameters": {"a": true}}; {"name": "g", "parameters": {}}`, "", []call{{"f", `{"a": true}`}, {"g", `{}`}}},
		{ToolsLlama3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "", []call{{"f", `{}`}}},
		{ToolsLlama3, `Sure: {"name": "f", "parameters": {}}`, `Sure: {"name": "f", "parameters": {}}`, nil},
		{ToolsLlama3, ` {"name": 3}`, ` {"name": 3}`, nil},
		{ToolsMistral, `[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": null}}]`, "", []call{{"a", `{"x": 1}`}, {"b", `{"y": null}`}}},
		{ToolsMistral, `[TOOL_CALLS] nope`, `[TOOL_CALLS] nope`, nil},
	}
	for _, c := range cases {
		got, _ := parseCut(t, c.f, c.in, nil)
		if got.content != c.content || len(got.calls) != len(c.calls) {
			t.Errorf("%q: content %q, calls %+v; want %q, %+v", c.in, got.content, got.calls, c.content, c.calls)
			continue
		}
		for i, want := range c.calls {
			if got.calls[i].name != want.name || got.calls[i].args != want.args {
				t.Errorf("%q: call %d = %+v, want %+v", c.in, i, got.calls[i], want)
			}
		}
		// Byte by byte gives the same outcome.
		cuts := make([]int, 0, len(c.in))
		for i := 1; i < len(c.in); i++ {
			cuts = append(cuts, i)
		}
		if one, _ := parseCut(t, c.f, c.in, cuts); fmt.Sprint(one.items) != fmt.Sprint(got.items) {
			t.Errorf("%q byte by byte: %q, whole: %q", c.in, one.items, got.items)
		}
	}
}

// The name is sent in its own first delta the moment its string closes,
// before any argument byte has arrived.
func TestToolParserNameFirst(t *testing.T) {
	p := NewToolParser(ToolsHermes, counter())
	evs := p.Feed(`<tool_call>{"name": "lookup"`)
	if len(evs) != 1 || evs[0].Call == nil || evs[0].Call.Name != "lookup" || evs[0].Call.ID == "" || evs[0].Call.Arguments != "" {
		t.Fatalf("after the name: %+v", evs)
	}
	evs = p.Feed(`, "arguments": {"q": "x`)
	if len(evs) != 1 || evs[0].Call.Arguments != `{"q": "x` || evs[0].Call.Name != "" {
		t.Fatalf("argument bytes: %+v", evs)
	}
}

var toolFormats = []struct {
	f               ToolFormat
	open, sep, shut string
	argsKey         string
}{
	{ToolsHermes, "<tool_call>\n", "\n</tool_call>\n<tool_call>\n", "\n</tool_call>", "arguments"},
	{ToolsLlama3, "<|python_tag|>", "; ", "", "parameters"},
	{ToolsMistral, "[TOOL_CALLS][", ", ", "]", "arguments"},
}

// randomArgs is a JSON object with strings that contain the syntax the
// scanner must not be fooled by.
func randomArgs(r *rand.Rand) string {
	m := map[string]any{}
	for i := range r.IntN(4) {
		switch r.IntN(4) {
		case 0:
			m[fmt.Sprintf("k%d", i)] = []string{"}", `"`, "</tool_call>", "\\", "]"}[r.IntN(5)] + "é"
		case 1:
			m[fmt.Sprintf("n%d", i)] = r.IntN(1000) - 500
		case 2:
			m[fmt.Sprintf("o%d", i)] = map[string]any{"deep": []any{1, "x", nil, true}}
		default:
			m[fmt.Sprintf("b%d", i)] = r.IntN(2) == 0
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// FuzzToolParser: for every format, random well-formed replies (content,
// then calls whose arguments hold brackets, quotes and closers inside
// strings) cut at random points parse exactly as the whole text does: the
// same content, the same calls, the arguments byte for byte the JSON the
// model wrote, and no byte of an opener in content. Arbitrary text, well-
// formed or not, parses the same however it is cut. Stopped by the token
// limit anywhere (FinishCut), a well-formed reply gives a prefix of its
// content and calls, each call's arguments a prefix of the model's, no
// opener byte in content; arbitrary text so stopped never ends its content
// with an opener's first bytes.
func FuzzToolParser(f *testing.F) {
	f.Add(uint64(1), []byte("<tool_call>{\"name\": \"x\"}</tool_call>"), uint8(3))
	f.Add(uint64(2), []byte("[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}"), uint8(1))
	f.Add(uint64(3), []byte(`{"name": "f", "parameters": {"a": "}"}}; x`), uint8(7))
	f.Fuzz(func(t *testing.T, seed uint64, raw []byte, nCuts uint8) {
		r := rand.New(rand.NewPCG(seed, uint64(nCuts)))
		cutsOf := func(s string) []int {
			var cuts []int
			for i := 1; i < len(s); i++ {
				if r.IntN(1+int(nCuts)%8) == 0 {
					cuts = append(cuts, i)
				}
			}
			return cuts
		}
		for _, tf := range toolFormats {
			// Arbitrary text: cutting never changes the outcome.
			text := string(raw)
			whole, _ := parseCut(t, tf.f, text, nil)
			if cut, _ := parseCut(t, tf.f, text, cutsOf(text)); fmt.Sprint(cut.items) != fmt.Sprint(whole.items) {
				t.Fatalf("format %d, %q: cut %q, whole %q", tf.f, text, cut.items, whole.items)
			}
			limited, _ := parseEnd(t, tf.f, text, nil, true)
			if cut, _ := parseEnd(t, tf.f, text, cutsOf(text), true); fmt.Sprint(cut.items) != fmt.Sprint(limited.items) {
				t.Fatalf("format %d, %q at the limit: cut %q, whole %q", tf.f, text, cut.items, limited.items)
			}
			o := map[ToolFormat]string{ToolsHermes: "<tool_call>", ToolsLlama3: "<|python_tag|>", ToolsMistral: "[TOOL_CALLS]"}[tf.f]
			// The first bytes of an opener the text ends with are held back,
			// so at the limit they must be dropped, not shown. Content may
			// still end in such bytes when they were released earlier ("<<":
			// the first "<" cannot start an opener, the second is dropped),
			// so the check is on text with no whole opener, where nothing but
			// that fragment may be missing from the content.
			if !strings.Contains(text, o) {
				for n := 1; n < len(o); n++ {
					if strings.HasSuffix(text, o[:n]) && limited.content == text {
						t.Fatalf("format %d, %q at the limit: content %q keeps the held %q", tf.f, text, limited.content, o[:n])
					}
				}
			}
			// A well-formed reply: exactly its calls.
			var names, args []string
			for i := range 1 + r.IntN(3) {
				names = append(names, fmt.Sprintf("fn_%d", i))
				args = append(args, randomArgs(r))
			}
			lead := ""
			if tf.f != ToolsLlama3 && r.IntN(2) == 0 {
				lead = "Calling now.\n"
			}
			var b strings.Builder
			b.WriteString(lead + tf.open)
			for i := range names {
				if i > 0 {
					b.WriteString(tf.sep)
				}
				fmt.Fprintf(&b, `{"name": %q, %q: %s}`, names[i], tf.argsKey, args[i])
			}
			b.WriteString(tf.shut)
			reply := b.String()
			got, _ := parseCut(t, tf.f, reply, cutsOf(reply))
			if got.content != lead || len(got.calls) != len(names) {
				t.Fatalf("format %d, %q: content %q, calls %+v", tf.f, reply, got.content, got.calls)
			}
			for i := range names {
				if got.calls[i].name != names[i] || got.calls[i].args != args[i] {
					t.Fatalf("format %d, %q: call %d = %+v, want %s(%s)", tf.f, reply, i, got.calls[i], names[i], args[i])
				}
			}
			noOpener(t, tf.f, got.content)
			// Stopped by the token limit at any byte.
			k := r.IntN(len(reply) + 1)
			short, _ := parseEnd(t, tf.f, reply[:k], cutsOf(reply[:k]), true)
			if short.content != lead[:min(k, len(lead))] || len(short.calls) > len(names) {
				t.Fatalf("format %d, %q at the limit: content %q, calls %+v", tf.f, reply[:k], short.content, short.calls)
			}
			for i, c := range short.calls {
				if c.name != names[i] || !strings.HasPrefix(args[i], c.args) {
					t.Fatalf("format %d, %q at the limit: call %d = %+v, want a prefix of %s(%s)", tf.f, reply[:k], i, c, names[i], args[i])
				}
			}
			noOpener(t, tf.f, short.content)
		}
	})
}

// noOpener fails when content holds any start of a call syntax.
func noOpener(t *testing.T, f ToolFormat, content string) {
	t.Helper()
	for _, o := range []string{"<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<tool_", "[TOOL"} {
		if strings.Contains(content, o) {
			t.Fatalf("format %d: content %q holds opener text %q", f, content, o)
		}
	}
}
