package stream

import (
	"fmt"
	"strings"
	"testing"
)

// harmonyOut is a harmony split as a client reads it: reasoning, content,
// and the calls as "name(arguments);" in index order.
type harmonyOut struct {
	reasoning, content, calls string
}

// collect reads events into a harmonyOut, checking that each call opens
// with one delta holding its id and name, and that its index is the next.
func collect(t *testing.T, evs []HarmonyEvent, names map[int]string, args map[int]*strings.Builder, o *harmonyOut) {
	t.Helper()
	for _, e := range evs {
		switch e.Kind {
		case HarmonyReasoning:
			o.reasoning += e.Text
		case HarmonyContent:
			o.content += e.Text
		case HarmonyCall:
			c := e.Call
			if c.ID != "" {
				if _, dup := names[c.Index]; dup || c.Index != len(names) || c.Name == "" || c.Arguments != "" {
					t.Fatalf("call opened as %+v after %d calls", *c, len(names))
				}
				names[c.Index], args[c.Index] = c.Name, &strings.Builder{}
				continue
			}
			if _, ok := names[c.Index]; !ok || c.Name != "" {
				t.Fatalf("arguments %+v for no open call", *c)
			}
			args[c.Index].WriteString(c.Arguments)
		}
	}
}

// harmonySplit runs pieces through one parser.
func harmonySplit(t *testing.T, calls, cut bool, pieces ...string) harmonyOut {
	t.Helper()
	p := NewHarmonyParser(calls, func() string { return "call_x" })
	names, args := map[int]string{}, map[int]*strings.Builder{}
	var o harmonyOut
	for _, s := range pieces {
		collect(t, p.Feed(s), names, args, &o)
	}
	collect(t, p.Finish(cut), names, args, &o)
	for i := range len(names) {
		o.calls += fmt.Sprintf("%s(%s);", names[i], args[i])
	}
	if p.Calls() != len(names) {
		t.Fatalf("Calls() %d, %d calls sent", p.Calls(), len(names))
	}
	return o
}

var harmonyCases = []struct {
	name, text string
	calls      bool
	want       harmonyOut
	cut        bool // the token limit ended the reply
}{
	{"reason-answer", "<|channel|>analysis<|message|>User greets. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
		true, harmonyOut{"User greets. Reply.", "Hello!", ""}, false},
	{"call-in-channel", "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}",
		true, harmonyOut{"Need weather.", "", `get_weather({"city":"Oslo"});`}, false},
	{"call-in-role", " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}",
		true, harmonyOut{"", "", `get_weather({"city": "Oslo"});`}, false},
	{"preamble-two-calls", "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant to=functions.a<|channel|>commentary json<|message|>{\"x\":1}<|end|>" +
		"<|start|>assistant to=functions.b<|channel|>commentary <|constrain|>json<|message|><|call|>",
		true, harmonyOut{"", "Checking both.", `a({"x":1});b({});`}, false},
	{"calls-off", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}",
		false, harmonyOut{"", `{"city":"Oslo"}`, ""}, false},
	{"builtin-tool", "<|channel|>analysis to=python code<|message|>print(1)<|end|><|start|>assistant<|channel|>final<|message|>1",
		true, harmonyOut{"print(1)", "1", ""}, false},
	{"missing-end", "<|channel|>analysis<|message|>Think.<|start|>assistant<|channel|>final<|message|>Hi.",
		true, harmonyOut{"Think.", "Hi.", ""}, false},
	{"missing-end-and-start", "<|channel|>analysis<|message|>Think.<|channel|>final<|message|>Hi.<|return|>",
		true, harmonyOut{"Think.", "Hi.", ""}, false},
	{"unknown-channel", "<|channel|>notes<|message|>Kept.<|end|>\n<|start|>assistant<|channel|>final<|message|>Done.",
		true, harmonyOut{"", "Kept.Done.", ""}, false},
	{"no-markup", "Plain text, to=nobody.", true, harmonyOut{"", "Plain text, to=nobody.", ""}, false},
	{"header-broken", "<|channel|>analysis<|end|>Then text.", true, harmonyOut{"", "<|channel|>analysisThen text.", ""}, false},
	{"marker-like-body", "<|channel|>final<|message|>a <|b|> c <|en", true, harmonyOut{"", "a <|b|> c <|en", ""}, false},
	{"header-cut", "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>fin", true, harmonyOut{"x", "", ""}, true},
	{"header-ended", "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>fin", true,
		harmonyOut{"x", "<|start|>assistant<|channel|>fin", ""}, false},
	{"to-prose-ended", "to= whom it may concern", true, harmonyOut{"", "to= whom it may concern", ""}, false},
	{"call-cut", "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": [1,", true, harmonyOut{"", "", `f({"a": [1,);`}, true},
	{"header-too-long", "<|channel|>" + strings.Repeat("y", maxHarmonyHeader) + "<|message|>z", true,
		harmonyOut{"", "<|channel|>" + strings.Repeat("y", maxHarmonyHeader) + "<|message|>z", ""}, false},
	{"utf8", "<|channel|>analysis<|message|>é漢<|end|><|start|>assistant<|channel|>final<|message|>✓ done", true, harmonyOut{"é漢", "✓ done", ""}, false},
}

// TestHarmonySplit: harmony replies, well-formed and not, split into
// reasoning, content and calls as the whole text says; cut at every byte
// (into two pieces, and into single bytes) they split the same.
func TestHarmonySplit(t *testing.T) {
	for _, c := range harmonyCases {
		t.Run(c.name, func(t *testing.T) {
			if got := harmonySplit(t, c.calls, c.cut, c.text); got != c.want {
				t.Fatalf("whole: %+v, want %+v", got, c.want)
			}
			for i := 1; i < len(c.text); i++ {
				if got := harmonySplit(t, c.calls, c.cut, c.text[:i], c.text[i:]); got != c.want {
					t.Fatalf("cut at %d (%q|%q): %+v, want %+v", i, c.text[:i], c.text[i:], got, c.want)
				}
			}
			bytes := make([]string, len(c.text))
			for i := range len(c.text) {
				bytes[i] = c.text[i : i+1]
			}
			if got := harmonySplit(t, c.calls, c.cut, bytes...); got != c.want {
				t.Fatalf("byte by byte: %+v, want %+v", got, c.want)
			}
		})
	}
}

// FuzzHarmonySplit: any text, harmony or not, cut anywhere, splits as the
// whole text does, and never panics; every call opens once, in order
// (collect).
func FuzzHarmonySplit(f *testing.F) {
	for i, c := range harmonyCases {
		f.Add(c.text, uint64(0x9e3779b97f4a7c15)*uint64(i+1), c.calls, c.cut)
	}
	f.Fuzz(func(t *testing.T, text string, cuts uint64, calls, cut bool) {
		if len(text) > 2048 {
			return
		}
		var pieces []string
		last := 0
		for i := 1; i < len(text); i++ {
			if cuts>>(uint(i*7)%64)&1 == 1 {
				pieces = append(pieces, text[last:i])
				last = i
			}
		}
		pieces = append(pieces, text[last:])
		whole, split := harmonySplit(t, calls, cut, text), harmonySplit(t, calls, cut, pieces...)
		if whole != split {
			t.Fatalf("whole %+v, in pieces %q %+v", whole, pieces, split)
		}
	})
}
