package stream

import (
	"strings"
	"testing"
)

// markGuard protects by bracketing "<|x|>" so a test can see what was
// protected.
type markGuard struct{}

func (markGuard) Protect(s string) string { return strings.ReplaceAll(s, "<|x|>", "[P]") }
func (markGuard) Encode(string, bool) ([]int32, error) {
	return nil, nil
}

// A control token's spelling hidden behind a JSON escape in tool arguments
// or a schema is protected too (a template decodes it and writes it out
// with tojson); JSON text with nothing to protect is left byte for byte.
func TestProtectJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": "<|x|>"}`, `{"a": "[P]"}`},
		{`{"a":"\u003c|x|>","b":[1,"\n"]}`, `{"a":"[P]","b":[1,"\n"]}`},
		{`{"\u003c|x|>":1}`, `{"[P]":1}`},
		{`{"a": "\n kept as written"}`, `{"a": "\n kept as written"}`},
		{`not json \u003c|x|>`, `not json \u003c|x|>`},
	} {
		if got := protectJSON(tc.in, markGuard{}); got != tc.want {
			t.Errorf("protectJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
