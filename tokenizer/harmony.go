package tokenizer

import "slices"

// gpt-oss's vocabulary marks harmony's markers as control tokens, and
// <|end|> as an end of generation. Read that way, its reply would lose the
// structure that tells reasoning from answer and tool calls, and end after
// its first (analysis) message. llama.cpp loads such a vocabulary thus,
// and so does this package: <|start|>, <|channel|>, <|message|>,
// <|constrain|> and <|end|> are user-defined tokens, written out when
// decoded (the stream core parses them: server/stream/harmony.go), and
// <|end|> ends a message, not the generation; <|return|> and <|call|> end
// it. llama.cpp shows the first four in any vocabulary that has them; here
// only a harmony one (with <|return|> and <|call|>) is touched.

// harmonyShown are the markers a harmony vocabulary shows.
var harmonyShown = []string{"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>"}

// isHarmony reports whether v is a harmony vocabulary.
func isHarmony(v *Vocab) bool {
	return slices.Contains(v.Tokens, "<|return|>") && slices.Contains(v.Tokens, "<|call|>") &&
		slices.Contains(v.Tokens, "<|end|>")
}

// harmonyVocab is v with harmony's markers user-defined (a copy; v is
// left as the file has it), or v itself when it is not a harmony one.
func harmonyVocab(v *Vocab) *Vocab {
	if !isHarmony(v) {
		return v
	}
	c := *v
	c.TokenTypes = make([]int32, len(v.Tokens))
	for i := range c.TokenTypes {
		c.TokenTypes[i] = tokenType(v, i)
		if slices.Contains(harmonyShown, v.Tokens[i]) {
			c.TokenTypes[i] = typeUserDefined
		}
	}
	return &c
}

// harmonyEnds: <|return|> and <|call|> end a generation, so <|end|>,
// which ends each message, does not (findEOG).
func (t *Tokenizer) harmonyEnds() bool {
	_, ret := t.ids["<|return|>"]
	_, call := t.ids["<|call|>"]
	return ret && call
}
