package server

import (
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// echo reads completions' echo. On chat it is refused (vLLM's chat echo,
// the last message repeated, is not served); beside logprobs it is refused
// too, since OpenAI then gives the prompt tokens' logprobs, which the
// engine does not compute.
func (wr *wireRequest) echo(chat, logprobs bool, g *stream.GenRequest) error {
	if wr.Echo == nil || !*wr.Echo {
		return nil
	}
	switch {
	case chat:
		return httpedge.Unsupported("echo", "echo is not supported on chat completions")
	case logprobs:
		return httpedge.Unsupported("echo", "echo with logprobs (the prompt's logprobs) is not supported")
	}
	g.Echo = true
	return nil
}

// echoText is the prompt as text: the tokens decoded as generated text is
// (special tokens such as the BOS Prepare added are left out), so a text
// prompt comes back as it was sent.
func echoText(b *stream.Backend, req engine.Request) string {
	dec := b.Tokenizer.NewDetokenizer()
	var text []byte
	for _, id := range req.Prompt {
		text = append(text, dec.Add(id)...)
	}
	return string(append(text, dec.Flush()...))
}
