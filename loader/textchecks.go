package loader

import "github.com/sluicehq/sluice/server/stream"

// The stream core's checks on untrusted text (server/stream/plaintext.go),
// answered by the tokenizer: message text is plain text, a character the
// vocabulary cannot encode is refused, a prompt too long for the context is
// refused before it is tokenized.

// NewGuard starts one rendering's protection of request text (stream.SpecialGuarder).
func (a tokAdapter) NewGuard() stream.TextGuard { return a.t.NewGuard() }

// Unencodable finds a character the vocabulary cannot encode (stream.EncodeChecker).
func (a tokAdapter) Unencodable(text string) (rune, int, bool) { return a.t.Unencodable(text) }

// MinTokens bounds text's token count from its length (stream.TokenBounder).
func (a tokAdapter) MinTokens(text string) int { return a.t.MinTokens(text) }
