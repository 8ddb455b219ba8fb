package stream

import (
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/auth"
)

// TestForTenant: the engine request names its tenant; with two keys its
// cache salt is the tenant's partition first, so equal prompts of two keys
// never share a salt whatever cache_salt each sends, while one key's
// requests keep sharing theirs; with one key or none the salt is the
// request's own.
func TestForTenant(t *testing.T) {
	two, err := auth.New([]string{"sk-a", "sk-b"}, "")
	if err != nil {
		t.Fatal(err)
	}
	one, err := auth.New([]string{"sk-a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	a, b := auth.KeyID("sk-a"), auth.KeyID("sk-b")
	ctxA, ctxB := two.WithTenant(t.Context(), a), two.WithTenant(t.Context(), b)
	for _, c := range []struct {
		name                 string
		tenant, salt, wantTn string
		got                  engine.Request
	}{
		{"keyless", "", "", "", ForTenant(t.Context(), engine.Request{})},
		{"keyless with cache_salt", "", "s", "", ForTenant(t.Context(), engine.Request{CacheSalt: "s"})},
		{"one key", a, "", a, ForTenant(one.WithTenant(t.Context(), a), engine.Request{})},
		{"one key with cache_salt", a, "s", a, ForTenant(one.WithTenant(t.Context(), a), engine.Request{CacheSalt: "s"})},
	} {
		if c.got.Tenant != c.wantTn || c.got.CacheSalt != c.salt {
			t.Errorf("%s: tenant %q salt %q, want %q and the request's own %q", c.name, c.got.Tenant, c.got.CacheSalt, c.wantTn, c.salt)
		}
	}
	sa := ForTenant(ctxA, engine.Request{}).CacheSalt
	if again := ForTenant(ctxA, engine.Request{}).CacheSalt; sa == "" || again != sa {
		t.Errorf("A's salt %q, then %q: want one non-empty salt for all of A's requests", sa, again)
	}
	if r := ForTenant(ctxA, engine.Request{}); r.Tenant != a {
		t.Errorf("A's request names tenant %q, want %q", r.Tenant, a)
	}
	seen := map[string]string{}
	for _, c := range []struct {
		name string
		req  engine.Request
	}{
		{"A", ForTenant(ctxA, engine.Request{})},
		{"B", ForTenant(ctxB, engine.Request{})},
		{"A cache_salt x", ForTenant(ctxA, engine.Request{CacheSalt: "x"})},
		{"B cache_salt x", ForTenant(ctxB, engine.Request{CacheSalt: "x"})},
		// B naming A's partition as its cache_salt still lands in B's.
		{"B cache_salt = A's salt", ForTenant(ctxB, engine.Request{CacheSalt: sa})},
		{"B cache_salt = A's x salt", ForTenant(ctxB, engine.Request{CacheSalt: a + "\x00x"})},
	} {
		if other, dup := seen[c.req.CacheSalt]; dup {
			t.Errorf("%s and %s share the cache salt %q", c.name, other, c.req.CacheSalt)
		}
		seen[c.req.CacheSalt] = c.name
	}
}

func TestSetCacheSalt(t *testing.T) {
	var g GenRequest
	if err := g.SetCacheSalt(nil); err != nil || g.CacheSalt != "" {
		t.Errorf("absent: %v %q", err, g.CacheSalt)
	}
	for _, bad := range []string{"", string(make([]byte, MaxCacheSaltLength+1))} {
		err := g.SetCacheSalt(&bad)
		if pe, ok := err.(*ParamError); !ok || pe.Param != "cache_salt" {
			t.Errorf("cache_salt of %d bytes: %v, want a 400 naming cache_salt", len(bad), err)
		}
	}
	salt := "tenant-x"
	if err := g.SetCacheSalt(&salt); err != nil || g.CacheSalt != salt {
		t.Errorf("valid: %v %q", err, g.CacheSalt)
	}
}
