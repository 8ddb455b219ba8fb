package constrain_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/constrain"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

var smol struct {
	once  sync.Once
	tok   *tokenizer.Tokenizer
	vocab *constrain.Vocab
	err   error
}

// smolVocab is the default model's tokenizer and its llguidance vocabulary,
// or a skip when the model has not been fetched.
func smolVocab(tb testing.TB) (*tokenizer.Tokenizer, *constrain.Vocab) {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("default model not fetched (%v); run scripts/fetch-model.sh", err)
	}
	smol.once.Do(func() {
		f, err := models.OpenGGUF(path)
		if err != nil {
			smol.err = err
			return
		}
		defer f.Close()
		v, err := f.Vocab()
		if err != nil {
			smol.err = err
			return
		}
		if smol.tok, smol.err = tokenizer.New(v); smol.err != nil {
			return
		}
		smol.vocab, smol.err = constrain.NewVocab(smol.tok.HFJSON(), smol.tok.VocabSize(), smol.tok.EOGIDs())
	})
	if smol.err != nil {
		tb.Fatal(smol.err)
	}
	return smol.tok, smol.vocab
}

func allowed(mask []uint32, id int32) bool { return mask[id/32]>>(id%32)&1 == 1 }

// feed commits text's tokens one by one, checking each against the mask
// computed before it; it returns the index of the first refused token, or
// -1 when all were allowed.
func feed(t *testing.T, v *constrain.Vocab, m *constrain.Matcher, ids []int32) int {
	t.Helper()
	mask := make([]uint32, v.MaskWords())
	for i, id := range ids {
		if err := m.Mask(mask); err != nil {
			t.Fatal(err)
		}
		if !allowed(mask, id) {
			return i
		}
		if err := m.Commit(id); err != nil {
			t.Fatal(err)
		}
	}
	return -1
}

// The default model's own tokenization of a document is allowed token by
// token exactly when the document is in the language, and once a document
// is complete only the end of generation is.
func TestMaskFollowsGrammar(t *testing.T) {
	tok, v := smolVocab(t)
	person := `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"],"additionalProperties":false}`
	cases := []struct {
		g       constrain.Grammar
		text    string
		refused bool
	}{
		{constrain.Grammar{Kind: constrain.JSONSchema, Data: person}, `{"name": "Ada", "age": 36, "tags": ["math"]}`, false},
		{constrain.Grammar{Kind: constrain.JSONSchema, Data: person}, `{"name": "Ada", "age": "36"`, true},
		{constrain.Grammar{Kind: constrain.JSONSchema, Data: person}, `{"name": "Ada", "height": 1`, true},
		{constrain.Grammar{Kind: constrain.JSONObject}, `{"anything": [1, 2, {"x": null}]}`, false},
		{constrain.Grammar{Kind: constrain.JSONObject}, `[1]`, true},
		{constrain.Grammar{Kind: constrain.Regex, Data: `[0-9]{3}-[0-9]{4}`}, `555-1234`, false},
		{constrain.Grammar{Kind: constrain.Regex, Data: `[0-9]{3}-[0-9]{4}`}, `555-12a`, true},
		{constrain.Grammar{Kind: constrain.Choice, Choices: []string{"yes", "no", "a.b (c)"}}, `a.b (c)`, false},
		{constrain.Grammar{Kind: constrain.Choice, Choices: []string{"yes", "no"}}, `maybe`, true},
		{constrain.Grammar{Kind: constrain.Lark, Data: "start: \"(\" NUM (\"+\" NUM)* \")\"\nNUM: /[0-9]+/"}, `(1+22+333)`, false},
		{constrain.Grammar{Kind: constrain.Lark, Data: "start: \"(\" NUM (\"+\" NUM)* \")\"\nNUM: /[0-9]+/"}, `(1-2)`, true},
	}
	for _, c := range cases {
		m, err := v.NewMatcher(c.g)
		if err != nil {
			t.Fatalf("%v: %v", c.g, err)
		}
		ids := tok.Encode(c.text, false)
		first := feed(t, v, m, ids)
		if c.refused != (first >= 0) {
			t.Errorf("%s %q: first refused token %d, want refused=%v", c.g.Kind, c.text, first, c.refused)
			continue
		}
		if c.refused {
			continue
		}
		mask := make([]uint32, v.MaskWords())
		if err := m.Mask(mask); err != nil {
			t.Fatal(err)
		}
		if !m.Accepting() {
			t.Errorf("%s %q: complete document not accepting", c.g.Kind, c.text)
		}
		if eos := tok.EOGIDs()[0]; !allowed(mask, eos) {
			t.Errorf("%s %q: end of generation not allowed after a complete document", c.g.Kind, c.text)
		}
	}
}

// Whatever a sampler picks from the masks, the output parses and matches
// the schema: a random walk over allowed tokens, ending as soon as the end
// of generation is allowed.
func TestRandomWalkStaysValid(t *testing.T) {
	tok, v := smolVocab(t)
	schema := `{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer","minimum":0,"maximum":99},"color":{"enum":["red","green","blue"]}},"required":["ok","n","color"],"additionalProperties":false}`
	eos := tok.EOGIDs()[0]
	rng := rand.New(rand.NewPCG(1, 2))
	mask := make([]uint32, v.MaskWords())
	for walk := range 20 {
		m, err := v.NewMatcher(constrain.Grammar{Kind: constrain.JSONSchema, Data: schema})
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for len(out) < 200 {
			if err := m.Mask(mask); err != nil {
				t.Fatal(err)
			}
			if allowed(mask, eos) {
				break
			}
			var ok []int32
			for id := range int32(v.Size()) {
				if allowed(mask, id) {
					ok = append(ok, id)
				}
			}
			if len(ok) == 0 {
				t.Fatalf("walk %d: empty mask after %q", walk, tok.Decode(out, false))
			}
			id := ok[rng.IntN(len(ok))]
			if err := m.Commit(id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		text := tok.Decode(out, false)
		var got struct {
			OK    *bool   `json:"ok"`
			N     *int    `json:"n"`
			Color *string `json:"color"`
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("walk %d: %q: %v", walk, text, err)
		}
		if got.OK == nil || got.N == nil || *got.N < 0 || *got.N > 99 || got.Color == nil || !slices.Contains([]string{"red", "green", "blue"}, *got.Color) {
			t.Fatalf("walk %d: %q does not match the schema", walk, text)
		}
	}
}

// A grammar llguidance cannot compile is refused with its own message.
func TestInvalidGrammar(t *testing.T) {
	_, v := smolVocab(t)
	cases := []struct {
		g    constrain.Grammar
		want *regexp.Regexp
	}{
		{constrain.Grammar{Kind: constrain.JSONSchema, Data: `{"type": "nosuch"}`}, regexp.MustCompile(`nosuch`)},
		{constrain.Grammar{Kind: constrain.JSONSchema, Data: `{"type": `}, regexp.MustCompile(`(?i)json|EOF|expected`)},
		{constrain.Grammar{Kind: constrain.Regex, Data: `([a-z]`}, regexp.MustCompile(`(?i)regex|unclosed|parse`)},
		{constrain.Grammar{Kind: constrain.Lark, Data: `start: nosuch_rule`}, regexp.MustCompile(`nosuch_rule`)},
		{constrain.Grammar{Kind: constrain.Choice}, regexp.MustCompile(`at least one`)},
		{constrain.Grammar{Kind: "yaml"}, regexp.MustCompile(`yaml`)},
	}
	for _, c := range cases {
		_, err := v.NewMatcher(c.g)
		if !errors.Is(err, constrain.ErrGrammar) || !c.want.MatchString(err.Error()) {
			t.Errorf("%s %q: error %v, want ErrGrammar matching %s", c.g.Kind, c.g.Data, err, c.want)
		}
	}
}
