package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// GBNF is llama.cpp's grammar format (grammars/README.md in llama.cpp),
// which llama-server takes as a request's grammar field. llguidance reads
// its own Lark dialect instead, so FromGBNF parses GBNF as llama.cpp does
// and writes the same language in Lark.
//
// The two differ in one way that matters for the translation: llguidance
// splits the output into lexemes (its terminals) greedily, a lexeme ending
// only where the next byte cannot extend it, while GBNF has no lexer and
// matches character by character. A grammar that names no rule from itself
// is regular, and becomes one terminal spanning the whole output: greedy
// matching against the end of the output is exact, and llguidance runs it
// as one DFA. A recursive grammar becomes rules whose every lexeme is one
// character, which greed cannot cut differently from GBNF.

// maxRepetition is llama.cpp's MAX_REPETITION_THRESHOLD: a larger minimum
// count is an error there, and so here.
const maxRepetition = 2000

// FromGBNF parses a GBNF grammar and returns it as a Lark grammar for
// llguidance. A syntax error wraps ErrGrammar and names the line and column.
func FromGBNF(src string) (Grammar, error) {
	p := &gbnfParser{src: src, rules: map[string]*gnode{}}
	if err := p.parse(); err != nil {
		return Grammar{}, fmt.Errorf("%w: GBNF %v", ErrGrammar, err)
	}
	lark, err := p.lark()
	if err != nil {
		return Grammar{}, fmt.Errorf("%w: GBNF %v", ErrGrammar, err)
	}
	return Grammar{Kind: Lark, Data: lark}, nil
}

type gkind int

const (
	gLit    gkind = iota // runes, in order; none is the empty string
	gClass               // ranges, negated or not
	gAny                 // any one character
	gRef                 // name
	gToken               // a model token: tok, negated or not
	gSeq                 // kids in order
	gAlt                 // one of kids
	gRepeat              // kids[0], min to max times (max -1: unbounded)
)

type gnode struct {
	kind     gkind
	runes    []rune
	ranges   [][2]rune
	negated  bool
	name     string
	tok      string
	kids     []*gnode
	min, max int
	// line and col locate a reference, for the undefined-rule error.
	line, col int
}

type gbnfParser struct {
	src   string
	pos   int
	rules map[string]*gnode
	order []string
	refs  []*gnode
}

type gbnfError struct {
	line, col int
	msg       string
}

func (e *gbnfError) Error() string {
	return fmt.Sprintf("line %d column %d: %s", e.line, e.col, e.msg)
}

func (p *gbnfParser) errorf(format string, args ...any) error {
	line, col := p.lineCol(p.pos)
	return &gbnfError{line, col, fmt.Sprintf(format, args...)}
}

func (p *gbnfParser) lineCol(pos int) (int, int) {
	before := p.src[:min(pos, len(p.src))]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

func (p *gbnfParser) peek(off int) byte {
	if p.pos+off < len(p.src) {
		return p.src[p.pos+off]
	}
	return 0
}

func (p *gbnfParser) eof() bool { return p.pos >= len(p.src) }

// space skips blanks and comments, and line breaks where newlineOK: inside
// parentheses, after ::= or |, and between rules (llama.cpp's parse_space).
func (p *gbnfParser) space(newlineOK bool) {
	for !p.eof() {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for !p.eof() && p.src[p.pos] != '\r' && p.src[p.pos] != '\n' {
				p.pos++
			}
		case newlineOK && (c == '\r' || c == '\n'):
			p.pos++
		default:
			return
		}
	}
}

func isWordChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || '0' <= c && c <= '9'
}

func (p *gbnfParser) name() (string, error) {
	start := p.pos
	for !p.eof() && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return "", p.errorf("expecting a rule name")
	}
	return p.src[start:p.pos], nil
}

func (p *gbnfParser) integer() (int, error) {
	start := p.pos
	for !p.eof() && '0' <= p.src[p.pos] && p.src[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == start {
		return 0, p.errorf("expecting an integer")
	}
	n, err := strconv.Atoi(p.src[start:p.pos])
	if err != nil {
		p.pos = start
		return 0, p.errorf("integer %s is too large", p.src[start:p.pos])
	}
	return n, nil
}

func (p *gbnfParser) parse() error {
	p.space(true)
	for !p.eof() {
		if err := p.rule(); err != nil {
			return err
		}
	}
	if p.rules["root"] == nil {
		return &gbnfError{1, 1, "grammar does not define root"}
	}
	for _, r := range p.refs {
		if p.rules[r.name] == nil {
			return &gbnfError{r.line, r.col, fmt.Sprintf("undefined rule identifier '%s'", r.name)}
		}
	}
	return nil
}

func (p *gbnfParser) rule() error {
	name, err := p.name()
	if err != nil {
		return err
	}
	p.space(false)
	if !strings.HasPrefix(p.src[p.pos:], "::=") {
		return p.errorf("expecting ::= after rule name %s", name)
	}
	p.pos += 3
	p.space(true)
	body, err := p.alternates(false)
	if err != nil {
		return err
	}
	switch p.peek(0) {
	case '\r':
		p.pos++
		if p.peek(0) == '\n' {
			p.pos++
		}
	case '\n':
		p.pos++
	case 0:
		if !p.eof() {
			return p.errorf("unexpected NUL byte")
		}
	default:
		return p.errorf("expecting newline or end, got %q", p.rest())
	}
	if p.rules[name] == nil {
		p.order = append(p.order, name)
	}
	// A second definition replaces the first, as in llama.cpp.
	p.rules[name] = body
	p.space(true)
	return nil
}

// rest is the start of the unparsed text, for errors.
func (p *gbnfParser) rest() string {
	r := p.src[p.pos:]
	if i := strings.IndexAny(r, "\r\n"); i >= 0 {
		r = r[:i]
	}
	if utf8.RuneCountInString(r) > 20 {
		r = string([]rune(r)[:20]) + "…"
	}
	return r
}

func (p *gbnfParser) alternates(nested bool) (*gnode, error) {
	alt := &gnode{kind: gAlt}
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alt.kids = append(alt.kids, seq)
		if p.peek(0) != '|' {
			break
		}
		p.pos++
		p.space(true)
	}
	if len(alt.kids) == 1 {
		return alt.kids[0], nil
	}
	return alt, nil
}

func (p *gbnfParser) sequence(nested bool) (*gnode, error) {
	seq := &gnode{kind: gSeq}
	for !p.eof() {
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			lit := &gnode{kind: gLit}
			for p.peek(0) != '"' {
				if p.eof() {
					return nil, p.errorf("unexpected end of input in a string")
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				lit.runes = append(lit.runes, r)
			}
			p.pos++
			seq.kids = append(seq.kids, lit)
		case c == '[':
			p.pos++
			cl := &gnode{kind: gClass}
			if p.peek(0) == '^' {
				p.pos++
				cl.negated = true
			}
			for p.peek(0) != ']' {
				if p.eof() {
					return nil, p.errorf("unexpected end of input in a character class")
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.peek(0) == '-' && p.peek(1) != ']' {
					p.pos++
					if p.eof() {
						return nil, p.errorf("unexpected end of input in a character class")
					}
					if hi, err = p.char(); err != nil {
						return nil, err
					}
				}
				cl.ranges = append(cl.ranges, [2]rune{lo, hi})
			}
			p.pos++
			seq.kids = append(seq.kids, cl)
		case c == '<' || c == '!':
			t, err := p.token()
			if err != nil {
				return nil, err
			}
			seq.kids = append(seq.kids, t)
			p.space(nested)
			continue
		case isWordChar(c):
			line, col := p.lineCol(p.pos)
			name, _ := p.name()
			ref := &gnode{kind: gRef, name: name, line: line, col: col}
			p.refs = append(p.refs, ref)
			seq.kids = append(seq.kids, ref)
			p.space(nested)
			continue
		case c == '(':
			p.pos++
			p.space(true)
			inner, err := p.alternates(true)
			if err != nil {
				return nil, err
			}
			if p.peek(0) != ')' {
				if p.eof() {
					return nil, p.errorf("expecting ')' before the end of input")
				}
				return nil, p.errorf("expecting ')', got %q", p.rest())
			}
			p.pos++
			seq.kids = append(seq.kids, inner)
		case c == '.':
			p.pos++
			seq.kids = append(seq.kids, &gnode{kind: gAny})
		case c == '*' || c == '+' || c == '?':
			p.pos++
			lo, hi := 0, -1
			if c == '+' {
				lo = 1
			} else if c == '?' {
				hi = 1
			}
			if err := p.repeat(seq, string(c), lo, hi); err != nil {
				return nil, err
			}
		case c == '{':
			p.pos++
			p.space(nested)
			lo, err := p.integer()
			if err != nil {
				return nil, err
			}
			p.space(nested)
			hi := lo
			switch p.peek(0) {
			case '}':
			case ',':
				p.pos++
				p.space(nested)
				hi = -1
				if c := p.peek(0); '0' <= c && c <= '9' {
					if hi, err = p.integer(); err != nil {
						return nil, err
					}
					p.space(nested)
				}
				if p.peek(0) != '}' {
					return nil, p.errorf("expecting '}'")
				}
			default:
				return nil, p.errorf("expecting ',' or '}' in a repetition")
			}
			p.pos++
			if lo > maxRepetition {
				return nil, p.errorf("repetition count %d exceeds %d", lo, maxRepetition)
			}
			if hi >= 0 && hi < lo {
				return nil, p.errorf("repetition {%d,%d}: the maximum is below the minimum", lo, hi)
			}
			if err := p.repeat(seq, "{", lo, hi); err != nil {
				return nil, err
			}
		default:
			return seq, nil
		}
		p.space(nested)
	}
	return seq, nil
}

// repeat applies a repetition to the last item of seq: a whole string,
// class, group, reference, or an item already repeated ("a"*? is ("a"*)?).
func (p *gbnfParser) repeat(seq *gnode, op string, lo, hi int) error {
	if len(seq.kids) == 0 {
		p.pos--
		return p.errorf("expecting an item before %s", op)
	}
	last := seq.kids[len(seq.kids)-1]
	seq.kids[len(seq.kids)-1] = &gnode{kind: gRepeat, kids: []*gnode{last}, min: lo, max: hi}
	return nil
}

// char reads one character of a string or class: UTF-8, or an escape
// llama.cpp knows (\x.., \u...., \U........, \t \r \n \\ \" \[ \] \-).
func (p *gbnfParser) char() (rune, error) {
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errorf("invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	hex := 0
	switch p.peek(1) {
	case 'x':
		hex = 2
	case 'u':
		hex = 4
	case 'U':
		hex = 8
	case 't':
		p.pos += 2
		return '\t', nil
	case 'r':
		p.pos += 2
		return '\r', nil
	case 'n':
		p.pos += 2
		return '\n', nil
	case '\\', '"', '[', ']', '-':
		r := rune(p.peek(1))
		p.pos += 2
		return r, nil
	default:
		return 0, p.errorf("unknown escape \\%c", p.peek(1))
	}
	digits := p.src[min(p.pos+2, len(p.src)):min(p.pos+2+hex, len(p.src))]
	v, err := strconv.ParseUint(digits, 16, 32)
	if err != nil || len(digits) != hex || strings.ContainsAny(digits, "+-") {
		return 0, p.errorf("expecting %d hex digits after \\%c", hex, p.peek(1))
	}
	p.pos += 2 + hex
	return rune(v), nil
}

// token reads <[id]>, <text> or either negated with !.
func (p *gbnfParser) token() (*gnode, error) {
	t := &gnode{kind: gToken}
	if p.peek(0) == '!' {
		t.negated = true
		p.pos++
	}
	if p.peek(0) != '<' {
		return nil, p.errorf("expecting '<' after '!'")
	}
	end := strings.IndexByte(p.src[p.pos:], '>')
	if end < 0 {
		return nil, p.errorf("expecting '>' to close a token")
	}
	t.tok = p.src[p.pos : p.pos+end+1]
	if strings.HasPrefix(t.tok, "<[") {
		id := strings.TrimSuffix(strings.TrimPrefix(t.tok, "<["), "]>")
		if _, err := strconv.ParseUint(id, 10, 32); err != nil || !strings.HasSuffix(t.tok, "]>") {
			return nil, p.errorf("expecting a token id in %s", t.tok)
		}
	} else if t.negated {
		return nil, p.errorf("a negated token must be given by id (!<[id]>), not by text: %s", t.tok)
	}
	p.pos += end + 1
	return t, nil
}

// lark writes the grammar: one terminal when no rule reachable from root
// refers to itself, directly or not, and uses no model token; rules of
// one-character lexemes otherwise.
func (p *gbnfParser) lark() (string, error) {
	reach := p.reachable()
	regular := !p.recursive(reach)
	for _, name := range reach {
		if hasToken(p.rules[name]) {
			regular = false
		}
	}
	var b strings.Builder
	if regular {
		b.WriteString("start: " + terminalName("root") + "\n")
	} else {
		b.WriteString("start: " + ruleName("root") + "\n")
	}
	for _, name := range reach {
		body, err := p.expr(p.rules[name], regular)
		if err != nil {
			return "", err
		}
		if regular {
			b.WriteString(terminalName(name))
		} else {
			b.WriteString(ruleName(name))
		}
		b.WriteString(": " + body + "\n")
	}
	return b.String(), nil
}

// reachable lists the rules root uses, root first, in definition order.
func (p *gbnfParser) reachable() []string {
	seen := map[string]bool{"root": true}
	stack := []string{"root"}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		walk(p.rules[n], func(g *gnode) {
			if g.kind == gRef && !seen[g.name] {
				seen[g.name] = true
				stack = append(stack, g.name)
			}
		})
	}
	out := []string{"root"}
	for _, n := range p.order {
		if seen[n] && n != "root" {
			out = append(out, n)
		}
	}
	return out
}

func (p *gbnfParser) recursive(names []string) bool {
	const (
		unvisited = iota
		open
		done
	)
	state := map[string]int{}
	var visit func(string) bool
	visit = func(n string) bool {
		switch state[n] {
		case open:
			return true
		case done:
			return false
		}
		state[n] = open
		cycle := false
		walk(p.rules[n], func(g *gnode) {
			if g.kind == gRef && !cycle && visit(g.name) {
				cycle = true
			}
		})
		state[n] = done
		return cycle
	}
	for _, n := range names {
		if visit(n) {
			return true
		}
	}
	return false
}

func walk(g *gnode, f func(*gnode)) {
	f(g)
	for _, k := range g.kids {
		walk(k, f)
	}
}

func hasToken(g *gnode) bool {
	found := false
	walk(g, func(k *gnode) { found = found || k.kind == gToken })
	return found
}

// ruleName maps a GBNF name ([a-zA-Z0-9-]+) into Lark's lower-case rule
// names one to one: GBNF names have no underscore, so "_x" can spell "X".
func ruleName(n string) string {
	var b strings.Builder
	b.WriteString("r_")
	for _, c := range n {
		if 'A' <= c && c <= 'Z' {
			b.WriteString("_" + string(c-'A'+'a'))
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// terminalName is ruleName for Lark's upper-case terminal names.
func terminalName(n string) string {
	var b strings.Builder
	b.WriteString("T_")
	for _, c := range n {
		switch {
		case 'a' <= c && c <= 'z':
			b.WriteRune(c - 'a' + 'A')
		case 'A' <= c && c <= 'Z':
			b.WriteString("_" + string(c))
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// expr writes g as a Lark expression; "" is the empty string.
func (p *gbnfParser) expr(g *gnode, regular bool) (string, error) {
	switch g.kind {
	case gLit:
		if len(g.runes) == 0 {
			return `""`, nil
		}
		if regular {
			var b strings.Builder
			for _, r := range g.runes {
				if err := regexChar(&b, r); err != nil {
					return "", err
				}
			}
			return "/" + b.String() + "/", nil
		}
		parts := make([]string, len(g.runes))
		for i, r := range g.runes {
			var b strings.Builder
			if err := regexChar(&b, r); err != nil {
				return "", err
			}
			parts[i] = "/" + b.String() + "/"
		}
		if len(parts) == 1 {
			return parts[0], nil
		}
		return "(" + strings.Join(parts, " ") + ")", nil
	case gClass:
		return classRegex(g)
	case gAny:
		return "/(?s:.)/", nil
	case gRef:
		if regular {
			return terminalName(g.name), nil
		}
		return ruleName(g.name), nil
	case gToken:
		if g.negated { // token() admits only <[id]> here
			return "<[^" + strings.TrimPrefix(g.tok, "<["), nil
		}
		return g.tok, nil
	case gSeq, gAlt:
		if len(g.kids) == 0 {
			return `""`, nil
		}
		parts := make([]string, len(g.kids))
		for i, k := range g.kids {
			s, err := p.expr(k, regular)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		sep := " "
		if g.kind == gAlt {
			sep = " | "
		}
		return "(" + strings.Join(parts, sep) + ")", nil
	case gRepeat:
		inner, err := p.expr(g.kids[0], regular)
		if err != nil {
			return "", err
		}
		switch {
		case g.min == 0 && g.max == -1:
			return inner + "*", nil
		case g.min == 1 && g.max == -1:
			return inner + "+", nil
		case g.min == 0 && g.max == 1:
			return inner + "?", nil
		case g.max == 0:
			return `""`, nil
		case g.max == -1:
			return fmt.Sprintf("%s{%d,}", inner, g.min), nil
		case g.min == g.max:
			return fmt.Sprintf("%s{%d}", inner, g.min), nil
		}
		return fmt.Sprintf("%s{%d,%d}", inner, g.min, g.max), nil
	}
	return "", fmt.Errorf("unknown GBNF node %d", g.kind)
}

// regexChar writes r for a Rust regex between slashes: letters and digits
// as themselves, anything else as \x{...}, which needs no other escaping.
func regexChar(b *strings.Builder, r rune) error {
	if !utf8.ValidRune(r) {
		return fmt.Errorf("character U+%04X is not a Unicode scalar value", r)
	}
	if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
		b.WriteRune(r)
	} else {
		fmt.Fprintf(b, `\x{%X}`, r)
	}
	return nil
}

// classRegex writes a character class. GBNF's ranges are of code points,
// and no UTF-8 text holds a surrogate or one past U+10FFFF, so those parts
// of a range are left out: they never match in llama.cpp either.
func classRegex(g *gnode) (string, error) {
	var b strings.Builder
	b.WriteString("/[")
	if g.negated {
		b.WriteString("^")
	}
	n := 0
	for _, rg := range g.ranges {
		lo, hi := rg[0], rg[1]
		if lo > hi {
			return "", fmt.Errorf("character range %s-%s is out of order", quoteRune(lo), quoteRune(hi))
		}
		for _, part := range [][2]rune{{lo, min(hi, 0xD7FF)}, {max(lo, 0xE000), min(hi, utf8.MaxRune)}} {
			if part[0] > part[1] {
				continue
			}
			_ = regexChar(&b, part[0])
			if part[1] != part[0] {
				b.WriteString("-")
				_ = regexChar(&b, part[1])
			}
			n++
		}
	}
	if n == 0 {
		if g.negated { // [^] in llama.cpp: any character
			return "/(?s:.)/", nil
		}
		return "", fmt.Errorf("character class matches no character")
	}
	b.WriteString("]/")
	return b.String(), nil
}

func quoteRune(r rune) string {
	if utf8.ValidRune(r) && r > 0x20 && r < 0x7F {
		return string(r)
	}
	return fmt.Sprintf("U+%04X", r)
}
