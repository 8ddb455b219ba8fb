package server

import (
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/stream"
)

// echo reads echo, and vLLM's prompt extensions beside it
// (request_ext.go). On completions the prompt's text leads the completion;
// beside logprobs the prompt's tokens and logprobs lead the choice's
// logprobs, as OpenAI's legacy API gives them. On chat (vLLM's) the final
// message's content leads the reply when that message is the assistant's,
// the one a continue_final_message reply continues; after another role's
// there is nothing of the reply's to repeat.
func (wr *wireRequest) echo(chat, _ bool, g *stream.GenRequest) error {
	if err := wr.extensions(chat, g); err != nil {
		return err
	}
	if wr.Echo == nil || !*wr.Echo {
		return nil
	}
	g.Echo = true
	return nil
}

// chatEcho is what echo repeats of a chat: the final message's content
// when it is the assistant's.
func chatEcho(g *stream.GenRequest) string {
	if m := g.Messages[len(g.Messages)-1]; m.Role == "assistant" {
		return m.Content
	}
	return ""
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
