package stream

import (
	"context"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/auth"
)

// MaxCacheSaltLength bounds a request's cache_salt: it is hashed once per
// request, but it is still client input held with the request.
const MaxCacheSaltLength = 256

// SetCacheSalt validates and stores a request's cache_salt (vLLM's field):
// requests with equal salts share cached prompt blocks, others never do.
// Given, it must not be empty, as vLLM requires.
func (g *GenRequest) SetCacheSalt(salt *string) error {
	if salt == nil {
		return nil
	}
	if n := len(*salt); n == 0 || n > MaxCacheSaltLength {
		return InvalidParam("cache_salt", "cache_salt must be 1 to %d bytes long, got %d", MaxCacheSaltLength, n)
	}
	g.CacheSalt = *salt
	return nil
}

// ForTenant is req as the engine is given it for a request of ctx's tenant
// (auth.Tenant): Tenant names it for the fair queue, and when the server has
// more than one key CacheSalt is the tenant's partition mixed with the
// request's own cache_salt, so a key's prompt blocks are never another
// key's cache hits (cached_tokens says nothing across keys) and no
// cache_salt a key sends can name another key's partition: the partition,
// a fixed-form id without a NUL, always comes first. The engine boundary
// (localEngine) applies it once per submission, to the copy it submits:
// a resumed request is stamped again from its resumer's context, which
// the resume store has checked is the same tenant's.
func ForTenant(ctx context.Context, req engine.Request) engine.Request {
	req.Tenant = auth.Tenant(ctx)
	if p := auth.CachePartition(ctx); p != "" {
		req.CacheSalt = p + "\x00" + req.CacheSalt
	}
	return req
}
