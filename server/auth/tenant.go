package auth

import "context"

// identity is who sent a request, as the transport that checked its key
// found it.
type identity struct {
	tenant string
	// partition: more than one key was in force, so this tenant's requests
	// share no cached prompt blocks with another's.
	partition bool
}

type identityKey struct{}

// WithTenant returns ctx carrying the tenant id Identify gave for the
// request's key ("" without keys). The transports call it once they have
// checked the key, before any handler runs.
func (k *Keys) WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, identityKey{}, identity{tenant: tenant, partition: tenant != "" && k.Partitioned()})
}

// Tenant is the tenant id of the request ctx belongs to: "" for a server
// without keys (one tenant, everyone) and for a context no transport
// marked. What a request creates is its tenant's, and only a request of the
// same tenant finds it.
func Tenant(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(identity)
	return id.tenant
}

// CachePartition is what partitions the prefix cache for the request ctx
// belongs to: its tenant id when the server has more than one key, else ""
// (one key, or none: a single tenant shares its cache with itself, and the
// block hashes stay the plain ones KV-event consumers compute).
func CachePartition(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(identity)
	if !id.partition {
		return ""
	}
	return id.tenant
}
