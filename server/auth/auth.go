// Package auth owns the API keys a server accepts: keys given on the command
// line and keys read from a file (one per line), reloaded on demand (the CLI
// calls Reload on SIGHUP), and the check every transport applies to a request.
//
// Keys are never logged, never put in errors and never used as metric labels:
// an error about the key file names a line number, not its text. The check
// takes the same time whichever key matches, whether none does, and whatever
// length the presented token has: it compares SHA-256 digests of the token and
// of every key, without stopping at the first match.
//
// Each key has a tenant id (KeyID): a short hash of the key, stable across
// reloads and restarts, that names which key sent a request without being
// the key. Identify returns it; the transports put it in the request's
// context (WithTenant), and everything a request creates that another
// request may later name (a resumable stream, a stored response, a gRPC
// request id) records it, so that one key never reaches another's.
//
// Keys is safe for concurrent use: Allow reads an atomically published set,
// Reload builds a new one and swaps it in.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// ErrNoKeys is returned when a key file holds no key: starting or reloading
// with it would silently open a server its operator meant to close.
var ErrNoKeys = errors.New("auth: key file holds no key")

// Keys is the set of accepted API keys. The zero value (and New with no key
// and no file) accepts every request: authentication is off.
type Keys struct {
	static [][sha256.Size]byte // from the command line; survive every reload
	file   string
	set    atomic.Pointer[[]key]
}

// key is one accepted key: the SHA-256 of its text, and its tenant id.
type key struct {
	digest [sha256.Size]byte
	id     string
}

// New returns the keys given in static plus, when file is not empty, the
// keys read from it. Empty strings in static are ignored, so an unset flag
// adds nothing.
func New(static []string, file string) (*Keys, error) {
	k := &Keys{file: file}
	for _, s := range static {
		if s != "" {
			k.static = append(k.static, sha256.Sum256([]byte(s)))
		}
	}
	if err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload rereads the key file (a no-op without one). On any error the keys in
// force stay as they were, so a half-written file cannot lock everyone out or
// let everyone in.
func (k *Keys) Reload() error {
	digests := append([][sha256.Size]byte(nil), k.static...)
	if k.file != "" {
		fromFile, err := readKeyFile(k.file)
		if err != nil {
			return err
		}
		digests = append(digests, fromFile...)
	}
	set := make([]key, len(digests))
	for i, d := range digests {
		set[i] = key{digest: d, id: keyID(d)}
	}
	k.set.Store(&set)
	return nil
}

// KeyID is the tenant id of a key: "key-" and 16 hex digits of a hash of
// the key's digest. It depends on the key alone, so a reload that reorders
// or adds keys leaves every other key's objects with it, and it is the same
// after a restart. It is not secret (logs and metrics may show it), but it
// is a function of the key: a key guessable from it was guessable anyway.
func KeyID(token string) string { return keyID(sha256.Sum256([]byte(token))) }

func keyID(digest [sha256.Size]byte) string {
	h := sha256.Sum256(append([]byte("sluice tenant\x00"), digest[:]...))
	return "key-" + hex.EncodeToString(h[:8])
}

// Count is how many keys are in force (for a startup line; never the keys).
func (k *Keys) Count() int {
	if k == nil {
		return 0
	}
	if set := k.set.Load(); set != nil {
		return len(*set)
	}
	return 0
}

// Enabled reports whether requests must present a key.
func (k *Keys) Enabled() bool { return k.Count() > 0 }

// Partitioned reports whether requests of different keys must not share
// anything, the prefix cache included: more than one key is in force.
func (k *Keys) Partitioned() bool { return k.Count() > 1 }

// Allow reports whether token is one of the keys, or authentication is off.
func (k *Keys) Allow(token string) bool {
	_, ok := k.Identify(token)
	return ok
}

// Identify reports whether token is one of the keys and, if so, its tenant
// id; with authentication off every token is accepted as tenant "". Every
// key is compared, and the match is selected without a branch.
func (k *Keys) Identify(token string) (tenant string, ok bool) {
	if !k.Enabled() {
		return "", true
	}
	got := sha256.Sum256([]byte(token))
	set := *k.set.Load()
	match, at := 0, 0
	for i, want := range set {
		m := subtle.ConstantTimeCompare(got[:], want.digest[:])
		at = subtle.ConstantTimeSelect(m, i, at)
		match |= m
	}
	if match != 1 {
		return "", false
	}
	return set[at].id, true
}

// AllowHeader checks an Authorization header ("Bearer KEY") and, for the
// Anthropic Messages API and its SDKs, an x-api-key header (the bare key).
// Either one carrying an accepted key is enough.
func (k *Keys) AllowHeader(authorization, xAPIKey string) bool {
	_, ok := k.IdentifyHeader(authorization, xAPIKey)
	return ok
}

// IdentifyHeader is AllowHeader that also names the key: the bearer
// token's when it is accepted, else x-api-key's.
func (k *Keys) IdentifyHeader(authorization, xAPIKey string) (tenant string, ok bool) {
	if !k.Enabled() {
		return "", true
	}
	bearer, hasBearer := BearerToken(authorization)
	bearerID, bearerOK := k.Identify(bearer)
	apiKeyID, apiKeyOK := k.Identify(xAPIKey)
	switch {
	case hasBearer && bearerOK:
		return bearerID, true
	case xAPIKey != "" && apiKeyOK:
		return apiKeyID, true
	}
	return "", false
}

// BearerToken returns the token of an "Authorization: Bearer TOKEN" header
// value. The scheme is case-insensitive (RFC 9110 §11.1).
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// readKeyFile reads one key per line; blank lines and lines starting with #
// are skipped, surrounding whitespace is trimmed.
func readKeyFile(path string) ([][sha256.Size]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading key file: %w", err)
	}
	var keys [][sha256.Size]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		key := strings.TrimSpace(sc.Text())
		if key == "" || strings.HasPrefix(key, "#") {
			continue
		}
		if strings.ContainsAny(key, " \t") {
			// A space inside a key is almost always a pasted "Bearer KEY" or
			// two keys on one line; neither would ever match a request.
			return nil, fmt.Errorf("auth: key file %s line %d: a key has no spaces", path, line)
		}
		keys = append(keys, sha256.Sum256([]byte(key)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: reading key file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoKeys, path)
	}
	return keys, nil
}
