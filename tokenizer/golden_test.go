package tokenizer_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

// goldenHeader is the part of scripts/golden/make_golden.py's files the
// tokenizer checks: the model the ids came from and its special ids.
type goldenHeader struct {
	Model  string `json:"model"`
	NVocab int    `json:"n_vocab"`
	BOS    int32  `json:"bos_id"`
	EOS    int32  `json:"eos_id"`
	AddBOS bool   `json:"add_bos"`
}

// goldenTokenizer opens the model a golden file was made from, or skips.
func goldenTokenizer(t *testing.T, h goldenHeader) *tokenizer.Tokenizer {
	t.Helper()
	path := filepath.Join("..", "models", h.Model)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("model %s not present (%v); run scripts/fetch-model.sh", h.Model, err)
	}
	f, err := models.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := f.Vocab()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tok.Close)
	if h.NVocab != 0 && (tok.VocabSize() != h.NVocab || tok.BOS() != h.BOS || tok.EOS() != h.EOS) {
		t.Errorf("vocab %d BOS %d EOS %d; llama.cpp: %d %d %d", tok.VocabSize(), tok.BOS(), tok.EOS(), h.NVocab, h.BOS, h.EOS)
	}
	return tok
}

func readGolden(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "golden", pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no llama.cpp golden data in testdata/golden (scripts/golden/run.sh writes it)")
	}
	return files
}

// Token ids equal llama.cpp's for the tokenizer-only cases, with special
// tokens parsed (Encode) and not (EncodePlain).
func TestGoldenTokenize(t *testing.T) {
	for _, file := range readGolden(t, "*-tokenize.json") {
		var g struct {
			goldenHeader
			Cases []struct {
				Name      string  `json:"name"`
				Text      string  `json:"text"`
				IDs       []int32 `json:"ids"`
				NoSpecial []int32 `json:"ids_no_special"`
			} `json:"cases"`
		}
		decodeGolden(t, file, &g)
		if len(g.Cases) == 0 {
			t.Fatalf("%s: no cases", file)
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			tok := goldenTokenizer(t, g.goldenHeader)
			for _, c := range g.Cases {
				if got := tok.Encode(c.Text, false); !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
					t.Errorf("%s: Encode(%q)\n got %v\nwant %v", c.Name, c.Text, got, c.IDs)
				}
				got, err := tok.EncodePlain(c.Text)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, c.NoSpecial) && !(len(got) == 0 && len(c.NoSpecial) == 0) {
					t.Errorf("%s: EncodePlain(%q)\n got %v\nwant %v", c.Name, c.Text, got, c.NoSpecial)
				}
			}
		})
	}
}

// Token ids equal llama.cpp's for 1,000 random strings built to stress the
// pre-tokenizer and special-token matching
// (testdata/tokenizer/make_random_golden.py).
func TestRandomTokenize(t *testing.T) {
	var g struct {
		goldenHeader
		Cases []struct {
			Text      string  `json:"text"`
			IDs       []int32 `json:"ids"`
			NoSpecial []int32 `json:"ids_no_special"`
		} `json:"cases"`
	}
	decodeGolden(t, filepath.Join("..", "testdata", "tokenizer", "smollm2-random-tokenize.json"), &g)
	if len(g.Cases) == 0 {
		t.Fatal("no cases")
	}
	tok := goldenTokenizer(t, g.goldenHeader)
	for _, c := range g.Cases {
		if got := tok.Encode(c.Text, false); !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if got, err := tok.EncodePlain(c.Text); err != nil || !slices.Equal(got, c.NoSpecial) {
			t.Errorf("EncodePlain(%q)\n got %v, %v\nwant %v", c.Text, got, err, c.NoSpecial)
		}
	}
}

// Prompt ids equal llama.cpp's for every golden prompt (English, code,
// Japanese, emoji, 1,000+ token texts, chat).
func TestGoldenPrompts(t *testing.T) {
	files := readGolden(t, "*.json")
	for _, file := range files {
		if strings.HasSuffix(file, "-tokenize.json") {
			continue
		}
		var g struct {
			goldenHeader
			Cases []struct {
				Name      string  `json:"name"`
				Prompt    string  `json:"prompt"`
				AddBOS    bool    `json:"add_bos"`
				PromptIDs []int32 `json:"prompt_ids"`
			} `json:"cases"`
		}
		decodeGolden(t, file, &g)
		if len(g.Cases) == 0 {
			t.Fatalf("%s: no cases", file)
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			tok := goldenTokenizer(t, g.goldenHeader)
			for _, c := range g.Cases {
				if got := tok.Encode(c.Prompt, c.AddBOS); !slices.Equal(got, c.PromptIDs) {
					t.Errorf("%s: Encode(%.40q…, %v): %d ids, llama.cpp %d; first difference at %d", c.Name, c.Prompt, c.AddBOS, len(got), len(c.PromptIDs), firstDiff(got, c.PromptIDs))
				}
			}
		})
	}
}

func decodeGolden(t *testing.T, file string, dst any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
