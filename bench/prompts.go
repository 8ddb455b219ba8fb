package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

// words are common English words; a synthetic prompt is a seeded draw of
// them. Most are one token in any BPE vocabulary, so a prompt of n words is
// close to n tokens (the usage chunk reports the exact count).
var words = strings.Fields(`the of and to in is was that for on with as by at from
his her they this which have are be had not one were all we when there can an
your more said time about would out up if some into them other then these so
what him see two has look people could first water been call who oil now find
long down day did get come made may part over new sound take only little work
know place year live me back give most very after thing our just name good
sentence man think say great where help through much before line right too
mean old any same tell boy follow came want show also around form three small
set put end does another well large must big even such because turn here why
ask went men read need land different home us move try kind hand picture again
change off play spell air away animal house point page letter mother answer
found study still learn should world high every near add food between own
below country plant last school father keep tree never start city earth eye
light thought head under story saw left few while along might close something
seem next hard open example begin life always those both paper together got
group often run important until children side feet car mile night walk white
sea began grow took river four carry state once book hear stop without second
later miss idea enough eat face watch far really almost let above girl
sometimes mountain cut young talk soon list song being leave family`)

// Synthetic returns a prompt of n words. Each prompt starts with its own
// index so no two share a prefix (a prefix cache must not make one server
// look faster only because the benchmark repeats itself).
func Synthetic(i, n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	var b strings.Builder
	fmt.Fprintf(&b, "Request %d.", i)
	for range n {
		b.WriteByte(' ')
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// PromptFile is one line of a --prompts file: {"prompt": "...",
// "max_tokens": N}; max_tokens is optional.
type PromptFile struct {
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
}

// LoadPrompts reads a JSONL file of PromptFile lines (blank lines skipped).
func LoadPrompts(path string) ([]PromptFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	var out []PromptFile
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var p PromptFile
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			return nil, fmt.Errorf("prompts: %s:%d: %w", path, n, err)
		}
		if p.Prompt == "" {
			return nil, fmt.Errorf("prompts: %s:%d: empty \"prompt\"", path, n)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("prompts: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, errors.New("prompts: " + path + " has no prompts")
	}
	return out, nil
}
