package httpedge

import (
	"strings"
	"testing"
)

// TestSealRoundTrip: a seal opens to its text; an altered or foreign one
// does not.
func TestSealRoundTrip(t *testing.T) {
	for _, text := range []string{"", "Let me think.\n", strings.Repeat("é", 1000)} {
		s := Seal(text)
		got, err := Unseal(s)
		if err != nil || got != text {
			t.Fatalf("Unseal(Seal(%q)) = %q, %v", text, got, err)
		}
		bad := s[:len(s)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(s, "AA")]
		if _, err := Unseal(bad); err == nil {
			t.Errorf("an altered seal opened")
		}
	}
	for _, s := range []string{"", "opaque", "sluice1.", "sluice1.!!!"} {
		if _, err := Unseal(s); err == nil {
			t.Errorf("Unseal(%q) opened", s)
		}
	}
}
