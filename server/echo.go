package server

import (
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// echo reads completions' echo, and vLLM's prompt extensions beside it
// (request_ext.go). On chat echo is refused (vLLM's chat echo, the last
// message repeated, is not served). Beside logprobs the prompt's tokens and
// logprobs lead the choice's logprobs, as OpenAI's legacy API gives them.
func (wr *wireRequest) echo(chat, logprobs bool, g *stream.GenRequest) error {
	if err := wr.extensions(chat, g); err != nil {
		return err
	}
	if wr.Echo == nil || !*wr.Echo {
		return nil
	}
	if chat {
		return httpedge.Unsupported("echo", "echo is not supported on chat completions")
	}
	if logprobs {
		if err := wr.echoLogprobs(g); err != nil {
			return err
		}
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
