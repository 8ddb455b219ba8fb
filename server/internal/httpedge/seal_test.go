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

// TestSealKeyShared: under a secret given with SetSealKey a seal opens in
// any process given the same secret (a restart, another replica: modelled
// by setting the key again, which builds a new cipher from the secret),
// and not under another secret or the random per-process key.
func TestSealKeyShared(t *testing.T) {
	saved := sealAEAD.Load()
	t.Cleanup(func() { sealAEAD.Store(saved) })
	if err := SetSealKey([]byte("short")); err == nil {
		t.Error("a 5-byte secret was taken")
	}
	secret := []byte(strings.Repeat("k", MinSealSecret))
	if err := SetSealKey(secret); err != nil {
		t.Fatal(err)
	}
	s := Seal("Let me think.")
	if err := SetSealKey(append([]byte(nil), secret...)); err != nil { // the restarted process
		t.Fatal(err)
	}
	if got, err := Unseal(s); err != nil || got != "Let me think." {
		t.Errorf("after a restart with the same secret: %q, %v", got, err)
	}
	if err := SetSealKey([]byte(strings.Repeat("j", MinSealSecret))); err != nil {
		t.Fatal(err)
	}
	if _, err := Unseal(s); err == nil {
		t.Error("a seal opened under another secret")
	}
	sealAEAD.Store(saved)
	if _, err := Unseal(s); err == nil {
		t.Error("a seal opened under the random per-process key")
	}
}
