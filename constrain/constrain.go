package constrain

/*
#cgo CFLAGS: -I${SRCDIR}/../.build/include
#cgo LDFLAGS: -lllguidance -ldl -lm -lpthread
#include <stdlib.h>
#include "llguidance.h"

static LlgConstraintInit sluice_init(const LlgTokenizer *tok) {
	LlgConstraintInit init = {0};
	llg_constraint_init_set_defaults(&init, tok);
	// Errors come back through llg_matcher_get_error; nothing goes to stderr.
	init.log_stderr_level = 0;
	init.log_buffer_level = 0;
	return init;
}

static LlgTokenizer *sluice_new_tokenizer(const char *json, uint32_t vocab, uint32_t eos,
		const uint32_t *extra, uint32_t n_extra, char *err, size_t err_len) {
	LlgTokenizerInitV2 init = {0};
	init.struct_size = sizeof(init);
	init.vocab_size = vocab;
	init.tok_eos = eos;
	init.tokenizer_json = json;
	init.use_approximate_greedy_tokenize_fn = true;
	init.tok_eos_extra = extra;
	init.tok_eos_extra_count = n_extra;
	return llg_new_tokenizer_v2(&init, err, err_len);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/sluicehq/sluice/constrain/grammar"
)

// Version is the llguidance release this package is built against; keep it
// equal to scripts/build-llguidance.sh.
const Version = "1.9.1"

// The grammar types live in the pure-Go package constrain/grammar, so that
// code which only builds grammars (the server's stream core) does not link
// llguidance; these names keep this package's API whole.
type (
	Grammar = grammar.Grammar
	Kind    = grammar.Kind
)

const (
	JSONSchema = grammar.JSONSchema
	JSONObject = grammar.JSONObject
	Regex      = grammar.Regex
	Lark       = grammar.Lark
	Choice     = grammar.Choice
)

// ErrGrammar marks a grammar llguidance refuses (grammar.ErrGrammar).
var ErrGrammar = grammar.ErrGrammar

// CompactJSON is grammar.CompactJSON.
func CompactJSON(schema string) string { return grammar.CompactJSON(schema) }

// TextWithout is grammar.TextWithout.
func TextWithout(anywhere, atStart []string) Grammar { return grammar.TextWithout(anywhere, atStart) }

// Vocab is llguidance's view of a model's tokenizer: every token's bytes in a
// trie, and the ids that end a generation.
type Vocab struct {
	tok   *C.LlgTokenizer
	size  int // tokens the masks cover
	words int // uint32 words in a mask
}

// NewVocab builds a Vocab from a Hugging Face tokenizer.json. size is the
// model's vocabulary (its logits row); a tokenizer with fewer entries leaves
// the rest never allowed. eog are the ids that end a generation, the first
// being the end-of-turn token llguidance allows once the grammar is complete.
func NewVocab(tokenizerJSON []byte, size int, eog []int32) (*Vocab, error) {
	if len(eog) == 0 {
		return nil, errors.New("constrain: a vocabulary needs an end-of-generation token")
	}
	js := C.CString(string(tokenizerJSON))
	defer C.free(unsafe.Pointer(js))
	extra := make([]C.uint32_t, len(eog)-1)
	for i, id := range eog[1:] {
		extra[i] = C.uint32_t(id)
	}
	var extraPtr *C.uint32_t
	if len(extra) > 0 {
		extraPtr = &extra[0]
	}
	var msg [1024]C.char
	tok := C.sluice_new_tokenizer(js, C.uint32_t(size), C.uint32_t(eog[0]), extraPtr, C.uint32_t(len(extra)), &msg[0], C.size_t(len(msg)))
	if tok == nil {
		return nil, fmt.Errorf("constrain: llguidance tokenizer: %s", C.GoString(&msg[0]))
	}
	v := &Vocab{tok: tok, size: size, words: (size + 31) / 32}
	runtime.AddCleanup(v, func(t *C.LlgTokenizer) { C.llg_free_tokenizer(t) }, tok)
	return v, nil
}

// Size is the number of tokens a mask covers.
func (v *Vocab) Size() int { return v.size }

// MaskWords is the length in uint32 words of the bitset Mask writes.
func (v *Vocab) MaskWords() int { return v.words }

// Matcher tracks one sequence's position in its grammar.
type Matcher struct {
	m     *C.LlgMatcher
	v     *Vocab // keeps the tokenizer alive while the matcher uses it
	bytes C.size_t
}

// NewMatcher compiles g against v. An error wraps ErrGrammar and carries
// llguidance's message, so a server can refuse the request before any token.
func (v *Vocab) NewMatcher(g Grammar) (*Matcher, error) {
	typ, data, err := g.Compiled()
	if err != nil {
		return nil, err
	}
	ct, cd := C.CString(typ), C.CString(data)
	defer C.free(unsafe.Pointer(ct))
	defer C.free(unsafe.Pointer(cd))
	init := C.sluice_init(v.tok)
	m := C.llg_new_matcher(&init, ct, cd)
	runtime.KeepAlive(v)
	if e := C.llg_matcher_get_error(m); e != nil {
		msg := C.GoString(e)
		C.llg_free_matcher(m)
		return nil, fmt.Errorf("%w: %s", ErrGrammar, msg)
	}
	mt := &Matcher{m: m, v: v, bytes: C.llg_matcher_get_mask_byte_size(m)}
	if int(mt.bytes) != 4*v.words {
		C.llg_free_matcher(m)
		return nil, fmt.Errorf("constrain: llguidance mask is %d bytes, want %d", mt.bytes, 4*v.words)
	}
	runtime.AddCleanup(mt, func(p *C.LlgMatcher) { C.llg_free_matcher(p) }, m)
	return mt, nil
}

// Mask writes the tokens allowed next into dst, bit i%32 of word i/32 set
// for an allowed token i. len(dst) must be Vocab.MaskWords. Once the grammar
// is complete only the end-of-generation ids are allowed.
func (m *Matcher) Mask(dst []uint32) error {
	if len(dst) != m.v.words {
		return fmt.Errorf("constrain: mask of %d words, want %d", len(dst), m.v.words)
	}
	rc := C.llg_matcher_compute_mask_into(m.m, (*C.uint32_t)(unsafe.Pointer(&dst[0])), m.bytes)
	runtime.KeepAlive(m)
	if rc != 0 {
		return m.err("mask")
	}
	return nil
}

// Commit advances the matcher by the token sampled from the last mask.
func (m *Matcher) Commit(tok int32) error {
	rc := C.llg_matcher_consume_token(m.m, C.uint32_t(tok))
	runtime.KeepAlive(m)
	if rc != 0 {
		return m.err("commit")
	}
	return nil
}

// Accepting reports whether the output so far is a complete sentence of the
// grammar (it may still be extended).
func (m *Matcher) Accepting() bool {
	ok := C.llg_matcher_is_accepting(m.m)
	runtime.KeepAlive(m)
	return bool(ok)
}

// Stopped reports whether the grammar admits nothing more than an end of
// generation.
func (m *Matcher) Stopped() bool {
	ok := C.llg_matcher_is_stopped(m.m)
	runtime.KeepAlive(m)
	return bool(ok)
}

func (m *Matcher) err(op string) error {
	msg := "unknown error"
	if e := C.llg_matcher_get_error(m.m); e != nil {
		msg = C.GoString(e)
	}
	return fmt.Errorf("constrain: %s: %s", op, msg)
}
