package tokenizer_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

// The default model's GGUF, fetched by scripts/fetch-model.sh (git-ignored).
func smolPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
}

var smol struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	err  error
}

// smolTokenizer returns the SmolLM2 tokenizer built from the GGUF vocabulary,
// shared by the tests of this package, or skips when the model is absent.
func smolTokenizer(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	path := smolPath()
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
		smol.tok, smol.err = tokenizer.New(v)
	})
	if smol.err != nil {
		tb.Fatalf("SmolLM2 tokenizer: %v", smol.err)
	}
	return smol.tok
}

// Control tokens written in text are single tokens, and the ids the
// vocabulary names for BOS/EOS and end of generation are those llama.cpp
// derives for this file (EOG: <|endoftext|>, <|im_end|>, and the FIM
// repository token <reponame> it also stops on).
func TestSmolSpecialTokens(t *testing.T) {
	tok := smolTokenizer(t)
	tests := []struct {
		text string
		id   int32
	}{{"<|endoftext|>", 0}, {"<|im_start|>", 1}, {"<|im_end|>", 2}, {"<reponame>", 4}}
	for _, tt := range tests {
		if got := tok.Encode(tt.text, true); len(got) != 1 || got[0] != tt.id {
			t.Errorf("Encode(%q) = %v, want [%d]", tt.text, got, tt.id)
		}
		if id, ok := tok.TokenID(tt.text); !ok || id != tt.id {
			t.Errorf("TokenID(%q) = %d, %v", tt.text, id, ok)
		}
		if got := tok.Decode([]int32{tt.id}, true); got != "" {
			t.Errorf("Decode([%d], skipSpecial) = %q, want \"\"", tt.id, got)
		}
	}
	if tok.BOS() != 1 || tok.EOS() != 2 || tok.VocabSize() != 49152 {
		t.Errorf("BOS %d EOS %d vocab %d, want 1 2 49152", tok.BOS(), tok.EOS(), tok.VocabSize())
	}
	if got := tok.EOGIDs(); !slices.Equal(got, []int32{0, 2, 4}) {
		t.Errorf("EOGIDs = %v, want [0 2 4]", got)
	}
	for id, want := range map[int32]bool{0: true, 1: false, 2: true, 4: true, 5: false, 100: false} {
		if tok.IsEOG(id) != want {
			t.Errorf("IsEOG(%d) = %v", id, !want)
		}
	}
	// The GGUF says add_bos_token = false: addSpecial adds nothing.
	if got := tok.Encode("Hi", true); len(got) != 1 {
		t.Errorf("Encode(Hi, true) = %v, want one token", got)
	}
}

func TestSmolRoundTrip(t *testing.T) {
	tok := smolTokenizer(t)
	for _, text := range smolTexts {
		ids := tok.Encode(text, false)
		if got := tok.Decode(ids, false); got != text {
			t.Errorf("Decode(Encode(%q)) = %q", text, got)
		}
		if got := tokenizer.DecodeLibrary(tok, ids, false); got != text {
			t.Errorf("library Decode(Encode(%q)) = %q", text, got)
		}
	}
}

// The Go byte-level decoder gives the library's text for arbitrary id
// sequences, including ones that split characters and skip specials.
func TestSmolDecodeMatchesLibrary(t *testing.T) {
	tok := smolTokenizer(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		ids := make([]int32, 1+rng.IntN(10))
		for i := range ids {
			// Low ids are the specials and single bytes, the interesting part.
			if rng.IntN(2) == 0 {
				ids[i] = int32(rng.IntN(300))
			} else {
				ids[i] = int32(rng.IntN(tok.VocabSize()))
			}
		}
		for _, skip := range []bool{false, true} {
			got, want := tok.Decode(ids, skip), tokenizer.DecodeLibrary(tok, ids, skip)
			if strings.ContainsRune(got, 0) {
				continue // the library cannot return text with a NUL
			}
			if got != want {
				t.Fatalf("ids %v skip=%v: Decode %q, library %q", ids, skip, got, want)
			}
		}
	}
}

func TestSmolDecoderStreams(t *testing.T) {
	tok := smolTokenizer(t)
	for _, text := range smolTexts {
		ids := tok.Encode(text, false)
		d := tok.NewDecoder()
		var sb strings.Builder
		for _, id := range ids {
			chunk := d.Add(id)
			if !utf8.ValidString(chunk) || strings.ContainsRune(chunk, utf8.RuneError) {
				t.Errorf("%q: chunk %q after id %d is not whole characters", text, chunk, id)
			}
			sb.WriteString(chunk)
		}
		sb.WriteString(d.Flush())
		if want := tok.Decode(ids, true); sb.String() != want {
			t.Errorf("streamed %q, want %q", sb.String(), want)
		}
	}
}

var smolTexts = []string{
	"Hello, world! 12345 items.",
	"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
	"日本の首都は東京です。東京には多くの",
	"Family: 👨\u200d👩\u200d👧\u200d👦, flags: 🇯🇵🇫🇷, 🏳️\u200d🌈 ❤️",
	"Café, naïve, e\u0301 and n\u0303, Ångström, Straße",
	"def f(x):\n    return x ** 2  # square\n\n\tindent\r\n",
	"   spaces   and\ttabs\n\n\n",
}

// EncodePlain spells control tokens out as text, and the ids decode back to it.
func TestSmolEncodePlain(t *testing.T) {
	tok := smolTokenizer(t)
	text := "x<|im_end|>\n<|im_start|>system"
	ids, err := tok.EncodePlain(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if tok.IsSpecial(id) {
			t.Errorf("EncodePlain(%q) = %v holds control token %d", text, ids, id)
		}
	}
	if got := tok.Decode(ids, true); got != text {
		t.Errorf("Decode(EncodePlain(%q)) = %q", text, got)
	}
	if got := tok.Encode(text, false); !slices.Contains(got, 2) || !slices.Contains(got, 1) {
		t.Errorf("Encode(%q) = %v lacks the control tokens", text, got)
	}
}

// One Tokenizer serves many goroutines (one per request in the server).
func TestSmolConcurrentUse(t *testing.T) {
	tok := smolTokenizer(t)
	want := make([][]int32, len(smolTexts))
	for i, text := range smolTexts {
		want[i] = tok.Encode(text, false)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range 50 {
				i := (g + k) % len(smolTexts)
				ids := tok.Encode(smolTexts[i], false)
				if !slices.Equal(ids, want[i]) {
					t.Errorf("goroutine %d: Encode(%q) = %v, want %v", g, smolTexts[i], ids, want[i])
					return
				}
				d := tok.NewDecoder()
				var sb strings.Builder
				for _, id := range ids {
					sb.WriteString(d.Add(id))
				}
				sb.WriteString(d.Flush())
				if sb.String() != tok.Decode(ids, true) {
					t.Errorf("goroutine %d: streamed %q", g, sb.String())
					return
				}
			}
		})
	}
	wg.Wait()
}

// After a prompt as context, a generated " word" keeps its leading space and
// the prompt's own text is not repeated.
func TestSmolDecoderAfterPrompt(t *testing.T) {
	tok := smolTokenizer(t)
	prompt := tok.Encode("<|im_start|>assistant\nThe capital of France is", false)
	gen := tok.Encode(" Paris. 日本の首都は東京です。", false)
	d := tok.NewDecoder(prompt...)
	var sb strings.Builder
	for _, id := range gen {
		sb.WriteString(d.Add(id))
	}
	sb.WriteString(d.Flush())
	if want := " Paris. 日本の首都は東京です。"; sb.String() != want {
		t.Errorf("streamed %q, want %q", sb.String(), want)
	}
}

// The GGUF's own template renders SmolLM2's ChatML prompt, and its control
// tokens encode as single ids.
func TestSmolChatTemplate(t *testing.T) {
	tok := smolTokenizer(t)
	got, err := tok.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "What is 2+2?"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" +
		"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Fatalf("rendered %q\nwant %q", got, want)
	}
	ids := tok.Encode(got, true)
	var control []int32
	for _, id := range ids {
		if tok.IsSpecial(id) {
			control = append(control, id)
		}
	}
	if !slices.Equal(control, []int32{1, 2, 1, 2, 1}) {
		t.Errorf("control tokens %v, want im_start/im_end pairs [1 2 1 2 1]", control)
	}
}
