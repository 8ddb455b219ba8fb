package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOffAcceptsEverything(t *testing.T) {
	for _, k := range []*Keys{nil, {}, must(New(nil, "")), must(New([]string{""}, ""))} {
		if k.Enabled() || !k.Allow("") || !k.AllowHeader("", "") {
			t.Fatalf("keys %+v: want authentication off", k)
		}
	}
}

func must(k *Keys, err error) *Keys {
	if err != nil {
		panic(err)
	}
	return k
}

func TestFileAndStaticKeys(t *testing.T) {
	path := writeFile(t, "# team keys\n\n  alpha  \nbeta\n# gamma\n")
	k, err := New([]string{"cli-key"}, path)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Count(); got != 3 {
		t.Fatalf("Count = %d, want 3 (cli-key, alpha, beta)", got)
	}
	for _, tc := range []struct {
		token string
		want  bool
	}{
		{"alpha", true}, {"beta", true}, {"cli-key", true},
		{"gamma", false}, {"# gamma", false}, {"", false}, {"alph", false}, {"alphaa", false}, {" alpha", false},
	} {
		if got := k.Allow(tc.token); got != tc.want {
			t.Errorf("Allow(%q) = %v, want %v", tc.token, got, tc.want)
		}
	}
}

func TestHeaders(t *testing.T) {
	k := must(New([]string{"sk-1"}, ""))
	for _, tc := range []struct {
		authorization, xAPIKey string
		want                   bool
	}{
		{"Bearer sk-1", "", true},
		{"bearer sk-1", "", true},
		{"Bearer  sk-1 ", "", true},
		{"", "sk-1", true},               // Anthropic SDKs
		{"Bearer wrong", "sk-1", true},   // either header may carry it
		{"Basic sk-1", "", false},        // another scheme
		{"sk-1", "", false},              // no scheme
		{"Bearer", "", false},            //
		{"Bearer wrong", "wrong", false}, //
		{"", "Bearer sk-1", false},       // x-api-key is the bare key
	} {
		if got := k.AllowHeader(tc.authorization, tc.xAPIKey); got != tc.want {
			t.Errorf("AllowHeader(%q, %q) = %v, want %v", tc.authorization, tc.xAPIKey, got, tc.want)
		}
	}
}

func TestReloadSwapsKeysAndKeepsThemOnError(t *testing.T) {
	path := writeFile(t, "old\n")
	k := must(New(nil, path))
	if !k.Allow("old") {
		t.Fatal("old key refused")
	}
	if err := os.WriteFile(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	if k.Allow("old") || !k.Allow("new") {
		t.Fatal("reload did not replace the keys")
	}

	// A file emptied or removed between reloads leaves the keys in force.
	for _, breakFile := range []func() error{
		func() error { return os.WriteFile(path, []byte("# nothing yet\n"), 0o600) },
		func() error { return os.Remove(path) },
	} {
		if err := breakFile(); err != nil {
			t.Fatal(err)
		}
		if err := k.Reload(); err == nil {
			t.Fatal("Reload of a broken file: no error")
		}
		if !k.Allow("new") || !k.Enabled() {
			t.Fatal("a failed reload changed the keys in force")
		}
	}
}

func TestBadFilesAreRefusedWithoutEchoingKeys(t *testing.T) {
	if _, err := New(nil, writeFile(t, "\n# only comments\n")); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("empty file: err = %v, want ErrNoKeys", err)
	}
	_, err := New(nil, writeFile(t, "ok-key\nBearer secret-value\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("pasted header: err = %v, want an error naming line 2", err)
	}
	if strings.Contains(err.Error(), "secret-value") || strings.Contains(err.Error(), "ok-key") {
		t.Fatalf("error %q repeats a key", err)
	}
	if _, err := New(nil, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("missing file: no error")
	}
}

func BenchmarkAllow16Keys(b *testing.B) {
	var keys []string
	for i := range 16 {
		keys = append(keys, strings.Repeat("k", 40)+string(rune('a'+i)))
	}
	k := must(New(keys, ""))
	b.ReportAllocs()
	for b.Loop() {
		k.Allow("not-a-key-but-the-same-length-as-one-of-them")
	}
}

// TestIdentify: each key has its own tenant id, the same whichever
// source and position the key has and across reloads; the id is not the
// key; a refused token and a keyless server have none.
func TestIdentify(t *testing.T) {
	path := writeFile(t, "alpha\nbeta\n")
	k := must(New([]string{"cli-key", "beta"}, path))
	ids := map[string]string{}
	for _, token := range []string{"alpha", "beta", "cli-key"} {
		id, ok := k.Identify(token)
		if !ok || id != KeyID(token) || !strings.HasPrefix(id, "key-") || len(id) != len("key-")+16 || strings.Contains(id, token) {
			t.Errorf("Identify(%q) = %q, %v; KeyID %q", token, id, ok, KeyID(token))
		}
		ids[id] = token
	}
	if len(ids) != 3 {
		t.Errorf("three keys share ids: %v", ids)
	}
	if id, ok := k.Identify("gamma"); ok || id != "" {
		t.Errorf("Identify(unknown) = %q, %v", id, ok)
	}
	before, _ := k.Identify("beta")
	if err := os.WriteFile(path, []byte("new\nbeta\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	if after, _ := k.Identify("beta"); after != before {
		t.Errorf("beta's id changed with a reload that moved it: %q -> %q", before, after)
	}
	if id, ok := must(New(nil, "")).Identify("anything"); !ok || id != "" {
		t.Errorf("keyless: Identify = %q, %v; want the one tenant \"\"", id, ok)
	}
}

func TestIdentifyHeader(t *testing.T) {
	k := must(New([]string{"sk-1", "sk-2"}, ""))
	for _, tc := range []struct {
		authorization, xAPIKey string
		want                   string
		ok                     bool
	}{
		{"Bearer sk-1", "", KeyID("sk-1"), true},
		{"", "sk-2", KeyID("sk-2"), true},
		{"Bearer sk-1", "sk-2", KeyID("sk-1"), true}, // the bearer's when both are keys
		{"Bearer wrong", "sk-2", KeyID("sk-2"), true},
		{"Bearer wrong", "wrong", "", false},
	} {
		got, ok := k.IdentifyHeader(tc.authorization, tc.xAPIKey)
		if got != tc.want || ok != tc.ok {
			t.Errorf("IdentifyHeader(%q, %q) = %q, %v; want %q, %v", tc.authorization, tc.xAPIKey, got, ok, tc.want, tc.ok)
		}
	}
}

// TestTenantContext: the context a transport marks names the tenant, and
// the cache partition is the tenant only when more than one key is in force.
func TestTenantContext(t *testing.T) {
	ctx := t.Context()
	if Tenant(ctx) != "" || CachePartition(ctx) != "" {
		t.Fatal("an unmarked context has a tenant")
	}
	two := must(New([]string{"sk-1", "sk-2"}, ""))
	id, _ := two.Identify("sk-1")
	if c := two.WithTenant(ctx, id); Tenant(c) != id || CachePartition(c) != id {
		t.Errorf("two keys: tenant %q partition %q, want %q for both", Tenant(c), CachePartition(c), id)
	}
	one := must(New([]string{"sk-1"}, ""))
	if c := one.WithTenant(ctx, id); Tenant(c) != id || CachePartition(c) != "" {
		t.Errorf("one key: tenant %q partition %q, want %q and none", Tenant(c), CachePartition(c), id)
	}
	if c := must(New(nil, "")).WithTenant(ctx, ""); Tenant(c) != "" || CachePartition(c) != "" {
		t.Errorf("keyless: tenant %q partition %q", Tenant(c), CachePartition(c))
	}
}
