package constrain_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/constrain"
	"github.com/sluicehq/sluice/constrain/grammar"
)

// gbnfAccepts reports whether llguidance, given the GBNF grammar as
// FromGBNF writes it, admits text: each of the default model's tokens of
// text allowed by the mask before it, and the whole a complete sentence.
func gbnfAccepts(t *testing.T, v *constrain.Vocab, g constrain.Grammar, ids []int32) bool {
	t.Helper()
	m, err := v.NewMatcher(g)
	if err != nil {
		t.Fatalf("%v\n%s", err, g.Data)
	}
	if feed(t, v, m, ids) >= 0 {
		return false
	}
	mask := make([]uint32, v.MaskWords())
	if err := m.Mask(mask); err != nil {
		t.Fatal(err)
	}
	return m.Accepting()
}

type gbnfCase struct {
	name, gbnf string
	pass, fail []string
}

// llamaVerdict asks llama.cpp's own matcher, tests/test-gbnf-validator.cpp
// built against the llama.cpp under comparison, whether text is in the
// grammar; ok is false when SLUICE_GBNF_VALIDATOR does not name one, or it
// cannot load the grammar.
func llamaVerdict(t *testing.T, gbnf, text string) (valid, ok bool) {
	bin := os.Getenv("SLUICE_GBNF_VALIDATOR")
	if bin == "" {
		return false, false
	}
	dir := t.TempDir()
	g, in := filepath.Join(dir, "g.gbnf"), filepath.Join(dir, "input")
	if os.WriteFile(g, []byte(gbnf), 0o644) != nil || os.WriteFile(in, []byte(text), 0o644) != nil {
		t.Fatal("writing the validator's files")
	}
	out, _ := exec.Command(bin, g, in).CombinedOutput()
	switch {
	case strings.Contains(string(out), "Input string is valid"):
		return true, true
	case strings.Contains(string(out), "Input string is invalid"):
		return false, true
	}
	return false, false
}

func checkGBNF(t *testing.T, cases []gbnfCase) {
	tok, v := smolVocab(t)
	compared := 0
	defer func() {
		if os.Getenv("SLUICE_GBNF_VALIDATOR") != "" {
			t.Logf("%d verdicts compared with llama.cpp's validator", compared)
		}
	}()
	for _, c := range cases {
		g, err := grammar.FromGBNF(c.gbnf)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for _, s := range slices.Concat(c.pass, c.fail) {
			if valid, ok := llamaVerdict(t, c.gbnf, s); ok {
				compared++
				if valid != slices.Contains(c.pass, s) {
					t.Errorf("%s: %q: llama.cpp's validator says valid=%v, the case says otherwise", c.name, s, valid)
				}
			}
		}
		for _, s := range c.pass {
			if !gbnfAccepts(t, v, g, tok.Encode(s, false)) {
				t.Errorf("%s: %q refused, llama.cpp accepts it\n%s", c.name, s, g.Data)
			}
		}
		for _, s := range c.fail {
			if gbnfAccepts(t, v, g, tok.Encode(s, false)) {
				t.Errorf("%s: %q accepted, llama.cpp refuses it\n%s", c.name, s, g.Data)
			}
		}
	}
}

// Every grammar llama.cpp v0.5.0 ships (grammars/*.gbnf, copied to
// testdata/gbnf) converts, compiles in llguidance, and admits the texts it
// describes and no others. With SLUICE_GBNF_VALIDATOR naming llama.cpp's
// test-gbnf-validator, each text's verdict is checked against llama.cpp's
// own too (here and in TestGBNFLlamaCppCases).
func TestGBNFShippedGrammars(t *testing.T) {
	samples := map[string]struct{ pass, fail []string }{
		"arithmetic.gbnf": {
			pass: []string{"x=1\n", "(a+b)*2=c\n", "12 +3 = 15\n", "x=1\ny2 = (x)\n"},
			fail: []string{"x=\n", "X=1\n", "x=1", "1+=2\n"},
		},
		"c.gbnf": {
			pass: []string{"int main(){return 0;}", "int f(int a){x = a+1;}", "float g(){while(a<b){a = a+1;}}", ""},
			fail: []string{"int main(){return 0}", "main(){}", "int f(int){}"},
		},
		"chess.gbnf": {
			pass: []string{"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n3. O-O-O Qxd8+\n"},
			fail: []string{"1. e4 e5\n", "1. e9 e5\n2. a3 a4\n", "2. e4 e5\n3. a3 a4\n"},
		},
		"english.gbnf": {
			pass: []string{"Hello, world!", "a b\nc", "[x]{y}|z~"},
			fail: []string{"héllo", "two  spaces", " lead", "end "},
		},
		"japanese.gbnf": {
			pass: []string{"こんにちは 世界", "カタカナ、ひらがな。"},
			fail: []string{"hello", "こんにちは  世界", ""},
		},
		"json.gbnf": {
			pass: []string{`{"a": [1, 2.5, true, null], "b": {"c": "d\n\u00e9"}}`, `{}`, "{\n  \"k\": -0.5e3}"},
			fail: []string{`{"a": 01}`, `{a: 1}`, `[1]`, `{"a": 1,}`, `{"a": "x` + "\x01" + `"}`},
		},
		"json_arr.gbnf": {
			pass: []string{"[\n1,\n{\"a\": [true]}]", "[\n]"},
			fail: []string{"[1]", "[\n1, 2]", "{}"},
		},
		"list.gbnf": {
			pass: []string{"- one\n- two\n", "- x\n"},
			fail: []string{"- one", "* one\n", "- \n", ""},
		},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "gbnf", "*.gbnf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no grammars under testdata/gbnf: %v", err)
	}
	var cases []gbnfCase
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, ok := samples[filepath.Base(f)]
		if !ok {
			t.Errorf("%s: no sample texts", f)
		}
		cases = append(cases, gbnfCase{filepath.Base(f), string(src), s.pass, s.fail})
	}
	checkGBNF(t, cases)
}

// The grammar cases of llama.cpp's tests/test-grammar-integration.cpp
// (v0.5.0), with its passing and failing strings.
func TestGBNFLlamaCppCases(t *testing.T) {
	checkGBNF(t, []gbnfCase{
		{"simple grammar", `
            root ::= expr
            expr ::= term ("+" term)*
            term ::= number
            number ::= [0-9]+`,
			[]string{"42", "1+2+3+4+5", "123+456"},
			[]string{"+", "/ 3", "1+2+3+4+5+", "12a45"}},
		{"medium complexity grammar", `
            root ::= expression
            expression ::= term ws (("+"|"-") ws term)*
            term ::= factor ws (("*"|"/") ws factor)*
            factor ::= number | variable | "(" expression ")" | function-call
            number ::= [0-9]+
            variable ::= [a-zA-Z_][a-zA-Z0-9_]*
            function-call ::= variable ws "(" (expression ("," ws expression)*)? ")"
            ws ::= [ \t\n\r]?`,
			[]string{"42", "1*2*3*4*5", "x", "x+10", "x1+y2", "(a+b)*(c-d)", "func()", "func(x,y+2)",
				"a*(b+c)-d/e", "f(g(x),h(y,z))", "x + 10", "x1 + y2", "(a + b) * (c - d)", "func(x, y + 2)",
				"a * (b + c) - d / e", "f(g(x), h(y, z))", "123+456", "123*456*789-123/456+789*123",
				"123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456"},
			[]string{"+", "/ 3x", "x + + y", "a * / b", "func(,)", "func(x y)", "(a + b", "x + y)",
				"a + b * (c - d", "42 +", "x +", "x + 10 +", "(a + b) * (c - d", "func(", "func(x, y + 2",
				"a * (b + c) - d /", "f(g(x), h(y, z)",
				"123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456/"}},
		{"special characters", `
            root ::= ... "abc" ...
            `,
			[]string{"abcabcabc", "aaaabcccc", "🔵🟠✅abc❌🟠🔵"},
			[]string{"aaabcccc", "aaaaabcccc", "aaaabccc", "aaaabccccc", "🔵🟠✅❌abc❌✅🟠🔵", "🔵🟠abc🟠🔵"}},
		{"* quantifier", `root ::= "a"*`,
			[]string{"", "a", "aaaaa", "aaaaaaaaaaaaaaaaaa", strings.Repeat("a", 62)},
			[]string{"b", "ab", "aab", "ba", strings.Repeat("a", 62) + "b"}},
		{"+ quantifier", `root ::= "a"+`,
			[]string{"a", "aaaaa", "aaaaaaaaaaaaaaaaaa", strings.Repeat("a", 62)},
			[]string{"", "b", "ab", "aab", "ba", strings.Repeat("a", 62) + "b"}},
		{"? quantifier", `root ::= "a"?`,
			[]string{"", "a"},
			[]string{"b", "ab", "aa", "ba"}},
		{"mixed quantifiers", `
            root ::= cons+ vowel* cons? (vowel cons)*
            vowel ::= [aeiouy]
            cons ::= [bcdfghjklmnpqrstvwxyz]
            `,
			[]string{"yes", "no", "noyes", "crwth", "four", "bryyyy"},
			[]string{"yess", "yesno", "forty", "catyyy"}},
		{"simple exact repetition", `
            root ::= [ab]{4}
        `, []string{"aaaa", "bbbb", "abab"}, []string{"a", "b", "aaaaa"}},
		{"simple min repetition", `
            root ::= [ab]{4,}
        `, []string{"aaaa", "aaaaab", "bbbb", "ababab"}, []string{"", "aba"}},
		{"simple max repetition", `
            root ::= [ab]{0,4}
        `, []string{"", "a", "aa", "aaa", "aaab"}, []string{"aaaaa"}},
		{"min / max repetition", `
            root ::= ("0x" [A-F0-9]{2} " "?){3,5}
        `, []string{"0xFF 0x12 0xAB", "0xFF 0x12 0xAB 0x00 0x00"},
			[]string{"", "0xFF", "0xFF 0x12", "0xFF 0x12 0xAB 0x00 0x00 0x00"}},
		{"segfault", `
            root ::= ( [x]* )*
        `, []string{"", "x", "xx"}, []string{"y", "yy"}},
		// Where greedy lexing would cut differently from GBNF: the class run
		// must give back its last character to the literal after it, in a
		// regular grammar and in a recursive one.
		{"run then its own character", `root ::= [a-z]* "x"`,
			[]string{"x", "abx", "xxx"}, []string{"ab", "abxy"}},
		{"recursive, run then its own character", `
            root ::= "(" item ")" | "<" root ">"
            item ::= [a-z]* "x" | "a" "ab"`,
			[]string{"(x)", "<(abx)>", "(aab)", "<<(aab)>>"}, []string{"(ab)", "<(x)"}},
		{"escapes", `root ::= "\x41\u00e9\U0001F600\t\"\\" [\]\-\[] [^\n]`,
			[]string{"Aé😀\t\"\\]a", "Aé😀\t\"\\-é"}, []string{"Aé😀\t\"\\]\n", "Aé😀\t\"\\xa"}},
		{"comments and multi-line rules", `
# a comment
root ::= ( # open
    "a" |   # first
    "b"
  ) tail # after
tail ::= "c" |
  "d"
`, []string{"ac", "bd"}, []string{"a", "ab", "cd"}},
		{"left recursion (llama.cpp refuses it; llguidance parses it)", `root ::= "a" | root "a"`,
			[]string{"a", "aaa"}, []string{"", "b"}},
	})
}

// Model tokens: <[id]> is that token and !<[id]> any other, as llama.cpp
// matches them; text around them is text.
func TestGBNFTokens(t *testing.T) {
	tok, v := smolVocab(t)
	open, close := tok.Encode("<filename>", true), tok.Encode("<gh_stars>", true)
	if len(open) != 1 || len(close) != 1 || slices.Contains(tok.EOGIDs(), close[0]) {
		t.Fatalf("<filename> and <gh_stars> are not single tokens of the default model that do not end a generation: %v %v", open, close)
	}
	g, err := grammar.FromGBNF("root ::= <[" + itoa(open[0]) + "]> content <[" + itoa(close[0]) + "]>\ncontent ::= (!<[" + itoa(close[0]) + "]>)*")
	if err != nil {
		t.Fatal(err)
	}
	hello := tok.Encode("hello world", false)
	cases := []struct {
		ids  []int32
		pass bool
	}{
		{slices.Concat(open, hello, close), true},
		{slices.Concat(open, close), true},
		{slices.Concat(open, open, hello, close), true},
		{slices.Concat(open, hello), false},
		{slices.Concat(hello, close), false},
		{slices.Concat(open, close, close), false},
	}
	for _, c := range cases {
		if got := gbnfAccepts(t, v, g, c.ids); got != c.pass {
			t.Errorf("%q: accepted %v, want %v", tok.Decode(c.ids, true), got, c.pass)
		}
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// A grammar llama.cpp's parser refuses is refused before llguidance sees
// it, with the position and the reason.
func TestGBNFSyntaxErrors(t *testing.T) {
	cases := []struct{ gbnf, want string }{
		{`rot ::= "a"`, "does not define root"},
		{"root ::= expr\nexpr ::= numero", "undefined rule identifier 'numero'"},
		{`root = "a"`, "line 1 column 6: expecting ::="},
		{`root ::= "a`, "unexpected end of input"},
		{`root ::= [a`, "unexpected end of input"},
		{`root ::= ("a"`, "expecting ')'"},
		{`root ::= * "a"`, "expecting an item before *"},
		{`root ::= "a"{2001}`, "exceeds 2000"},
		{`root ::= "a"{3,2}`, "below the minimum"},
		{`root ::= "a"{x}`, "expecting an integer"},
		{`root ::= "\q"`, `unknown escape \q`},
		{`root ::= "\x4"`, `expecting 2 hex digits`},
		{`root ::= "a" ) "b"`, "expecting newline or end"},
		{`root ::= "\uD800"`, "not a Unicode scalar value"},
		{`root ::= !<think>`, "by id"},
	}
	for _, c := range cases {
		_, err := grammar.FromGBNF(c.gbnf)
		if !errors.Is(err, grammar.ErrGrammar) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want ErrGrammar containing %q", c.gbnf, err, c.want)
		}
	}
}

// BenchmarkGBNFMask is the cost per token of a GBNF grammar as FromGBNF
// writes it, replaying benchDoc: llama.cpp's json.gbnf (recursive, so one
// lexeme per character) beside llguidance's own JSON (json_object), and a
// regular grammar (one lexeme for the whole output).
func BenchmarkGBNFMask(b *testing.B) {
	tok, v := smolVocab(b)
	jsonGBNF, err := os.ReadFile(filepath.Join("testdata", "gbnf", "json.gbnf"))
	if err != nil {
		b.Fatal(err)
	}
	doc := tok.Encode(benchDoc, false)
	line := tok.Encode(strings.Repeat("- "+benchDoc[:60]+"\n", 4), false)
	cases := []struct {
		name string
		gbnf string
		g    constrain.Grammar
		ids  []int32
	}{
		{name: "json.gbnf", gbnf: string(jsonGBNF), ids: doc},
		{name: "json_object", g: constrain.Grammar{Kind: constrain.JSONObject}, ids: doc},
		{name: "list-regular", gbnf: `root ::= ("- " [^\n]+ "\n")+`, ids: line},
	}
	for _, c := range cases {
		g := c.g
		if c.gbnf != "" {
			if g, err = grammar.FromGBNF(c.gbnf); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			mask := make([]uint32, v.MaskWords())
			n := 0
			for b.Loop() {
				m, err := v.NewMatcher(g)
				if err != nil {
					b.Fatal(err)
				}
				for _, id := range c.ids {
					if err := m.Mask(mask); err != nil {
						b.Fatal(err)
					}
					if !allowed(mask, id) {
						b.Fatalf("token %d refused", id)
					}
					if err := m.Commit(id); err != nil {
						b.Fatal(err)
					}
					n++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "us/token")
		})
	}
}
