package httpedge

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// Sealed reasoning: what a stateless client carries from one turn to the
// next (a Messages thinking block's signature, a Responses reasoning
// item's encrypted_content) is the reasoning text sealed with AES-GCM
// under a key of this process, so the server can read back exactly what
// its model reasoned and a client cannot pass off text of its own as the
// model's. The key is random per process unless the operator gives one
// (SetSealKey, serve --seal-key-file): then a restarted server, or another
// replica behind the same router, opens the seals this one made; without
// one, a seal it cannot open is dropped, as a client that sends none.

var sealAEAD atomic.Pointer[cipher.AEAD]

func init() {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand never fails
	useSealKey(key)
}

func useSealKey(key []byte) {
	block, _ := aes.NewCipher(key) // 32 bytes: AES-256
	aead, _ := cipher.NewGCM(block)
	sealAEAD.Store(&aead)
}

// MinSealSecret is the shortest secret SetSealKey takes.
const MinSealSecret = 32

// SetSealKey seals and opens reasoning under a key derived from secret (at
// least MinSealSecret bytes) from now on, so every process given the same
// secret opens the others' seals. A domain label keeps the key apart from
// any other use of the same secret.
func SetSealKey(secret []byte) error {
	if len(secret) < MinSealSecret {
		return fmt.Errorf("a reasoning seal secret needs at least %d bytes, got %d", MinSealSecret, len(secret))
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("sluice reasoning seal v1"))
	useSealKey(mac.Sum(nil))
	return nil
}

// sealPrefix names the scheme, so a later one can be told apart.
const sealPrefix = "sluice1."

// Seal returns text sealed for a client to carry: the text as the client
// reads it beside the seal, invalid UTF-8 as JSON shows it (U+FFFD).
func Seal(text string) string {
	text = validUTF8(text)
	aead := *sealAEAD.Load()
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := aead.Seal(nonce, nonce, []byte(text), []byte(sealPrefix))
	return sealPrefix + base64.RawURLEncoding.EncodeToString(out)
}

// ErrSeal is a seal this process did not make (another server's, an older
// process's, or altered).
var ErrSeal = errors.New("not a reasoning seal of this server")

// Unseal returns the text Seal sealed.
func Unseal(sealed string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok {
		return "", ErrSeal
	}
	aead := *sealAEAD.Load()
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", ErrSeal
	}
	n := aead.NonceSize()
	text, err := aead.Open(nil, raw[:n], raw[n:], []byte(sealPrefix))
	if err != nil {
		return "", ErrSeal
	}
	return string(text), nil
}

// validUTF8 is s with each invalid byte U+FFFD, as encoding/json writes it.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
