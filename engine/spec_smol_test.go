package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/constrain"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

// editText is an edit-style prompt: the answer repeats long spans of it.
const editText = `Rewrite this function with the name changed from add to sum, nothing else changed.

func add(a, b int) int {
	// add returns the sum of a and b, checking neither for overflow.
	result := a + b
	return result
}

Here is the function with only the name changed:

func sum(a, b int) int {
`

const specSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":20},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["name","tags"],"additionalProperties":false}`

func smolTokenizer(t testing.TB, path string) *tokenizer.Tokenizer {
	t.Helper()
	src, err := models.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := src.Vocab()
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tok.Close)
	return tok
}

// TestSmolLM2SpecStopsAndSchema: in one batch with speculation on, an
// edit-style stream whose drafts are accepted, the same stream with a stop
// token taken from the middle of its answer, and a json_schema-constrained
// stream (which does not speculate: its mask is per step) each give what
// they give without speculation: the stop ends the stream before its token
// even when it falls among accepted drafts, and the constrained output
// parses against the schema's shape.
func TestSmolLM2SpecStopsAndSchema(t *testing.T) {
	path := smolPath(t)
	tok := smolTokenizer(t, path)
	vocab, err := constrain.NewVocab(tok.HFJSON(), tok.VocabSize(), tok.EOGIDs())
	if err != nil {
		t.Fatal(err)
	}
	edit := tok.Encode(editText, false)
	jsonPrompt := tok.Encode("A JSON object describing a cat named Tom:\n", false)
	const k, seqs, n = 4, 4, 40
	run := func(spec bool) (outs [3][]int32, res [3]Result, st *Stats) {
		cfg := Config{Blocks: 128, BlockSize: 16, MaxBatchTokens: 256, MaxSeqs: seqs, EOG: tok.EOGIDs()}
		rows := seqs
		if spec {
			rows = seqs * (1 + k)
			// Fixed: every step with a match drafts k, so drafts are accepted
			// whatever the step times; self-tuned, the edit answer leaves the
			// prompt early and its sequences stopped drafting after one hit.
			cfg.Speculate = SpecConfig{Method: "ngram", K: k, LogitRows: rows, Fixed: true}
		}
		m := loadModel(t, path, 2, 128, 16, 256, rows)
		e := newEngineOn(t, m, cfg)
		plainOut, _ := collect(t, submit(t, e, Request{Prompt: edit, MaxTokens: n}), 0)
		stop := plainOut[len(plainOut)/2]
		mt, err := vocab.NewMatcher(constrain.Grammar{Kind: constrain.JSONSchema, Data: specSchema})
		if err != nil {
			t.Fatal(err)
		}
		ss := []*Sequence{
			submit(t, e, Request{Prompt: edit, MaxTokens: n}),
			submit(t, e, Request{Prompt: edit, MaxTokens: n, StopTokens: []int32{stop}}),
			submit(t, e, Request{Prompt: jsonPrompt, MaxTokens: 60, Constraint: mt}),
		}
		for i, s := range ss {
			outs[i], res[i] = collect(t, s, 0)
		}
		if i := slices.Index(outs[0], stop); res[1].Finish != FinishStop || !slices.Equal(outs[1], outs[0][:i]) {
			t.Errorf("spec=%v: stop token %d: %v (%v), want %v then stop", spec, stop, outs[1], res[1].Finish, outs[0][:i])
		}
		return outs, res, e.Stats()
	}
	plain, plainRes, _ := run(false)
	got, gotRes, st := run(true)
	for i, what := range []string{"edit", "edit with a stop token", "json_schema"} {
		if !slices.Equal(got[i], plain[i]) || gotRes[i].Finish != plainRes[i].Finish {
			t.Errorf("%s: with speculation %q (%v), without %q (%v)", what, tok.Decode(got[i], false), gotRes[i].Finish,
				tok.Decode(plain[i], false), plainRes[i].Finish)
		}
	}
	text := tok.Decode(got[2], true)
	var doc struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if gotRes[2].Finish == FinishStop {
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			t.Errorf("constrained output %q: %v", text, err)
		}
	} else if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		t.Errorf("constrained output %q does not start a JSON object", text)
	}
	t.Logf("edit answer %q; json %q; drafts %d, draft tokens %d, accepted %d", tok.Decode(got[0], false), text,
		st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens)
	if st.SpecAcceptedTokens == 0 {
		t.Fatal("no draft accepted")
	}
}
