package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
)

// SaltOf turns a cache salt (an API key's id, a request's cache_salt) into
// the seed Table.SetSalt and LookupSalted take: 0 for "", the unsalted
// cache, whose hashes are unchanged. The seed is a cryptographic hash so
// that nobody can choose a salt whose seed is another's: seeds are all that
// tells partitions apart.
func SaltOf(salt string) uint64 {
	if salt == "" {
		return 0
	}
	sum := sha256.Sum256([]byte(salt))
	return max(binary.LittleEndian.Uint64(sum[:8]), 1) // never the unsalted 0
}
