package httpedge

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"
)

// Sealed reasoning: what a stateless client carries from one turn to the
// next (a Messages thinking block's signature, a Responses reasoning
// item's encrypted_content) is the reasoning text sealed with AES-GCM
// under a key of this process, so the server can read back exactly what
// its model reasoned and a client cannot pass off text of its own as the
// model's. A restarted server cannot open an older seal: the reasoning it
// carried is then dropped, as a client that sends none.

var sealAEAD = func() cipher.AEAD {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand never fails
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	return aead
}()

// sealPrefix names the scheme, so a later one can be told apart.
const sealPrefix = "sluice1."

// Seal returns text sealed for a client to carry: the text as the client
// reads it beside the seal, invalid UTF-8 as JSON shows it (U+FFFD).
func Seal(text string) string {
	text = validUTF8(text)
	nonce := make([]byte, sealAEAD.NonceSize())
	_, _ = rand.Read(nonce)
	out := sealAEAD.Seal(nonce, nonce, []byte(text), []byte(sealPrefix))
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
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) < sealAEAD.NonceSize() {
		return "", ErrSeal
	}
	n := sealAEAD.NonceSize()
	text, err := sealAEAD.Open(nil, raw[:n], raw[n:], []byte(sealPrefix))
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
