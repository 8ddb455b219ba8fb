package server

import (
	"net/http"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Headers of the resume protocol (httpedge: every HTTP API shares it). The
// response id also appears as "id" in every chunk.
const (
	streamIDHeader    = httpedge.StreamIDHeader
	lastEventIDHeader = httpedge.LastEventIDHeader
)

// ResumeStore keeps recent streams replayable for a bounded window and
// within a total byte cap (httpedge.Store); the Messages and Responses
// streams live in the same one, under the same caps.
type ResumeStore struct{ *httpedge.Store }

// NewResumeStore keeps each stream for window after its last use, and all
// streams' events within maxBytes.
func NewResumeStore(window time.Duration, maxBytes int) *ResumeStore {
	return &ResumeStore{httpedge.NewStore(window, maxBytes)}
}

// shared is the store the other HTTP adapters are lent (nil: resume off).
func (s *ResumeStore) shared() *httpedge.Store {
	if s == nil {
		return nil
	}
	return s.Store
}

// choicesState is a multi-choice stream retained for a resume: every
// choice's request (its seed fixed), TextStream, tool parse and chunk
// format, whether its finish chunk is in the log, and the log the choices
// share. One request at a time holds its lease.
type choicesState struct {
	*httpedge.Retained
	gen     *stream.GenRequest
	reqs    []engine.Request
	formats []chunkFormat
	cs      []stream.ChoiceStream // Text and Tools last the stream; Gen, Out and End one connection
	ended   []bool                // the choice's finish (or error) is settled
	errs    []error
	cached  []int // prompt tokens the first submission found in the prefix cache
	done    bool  // the log ends with [DONE]
}

func newChoicesState(id string, g *stream.GenRequest, reqs []engine.Request, base chunkFormat, b *stream.Backend, log *httpedge.EventLog) *choicesState {
	st := &choicesState{Retained: httpedge.NewRetained(id, log), gen: g, reqs: reqs, formats: make([]chunkFormat, len(reqs)),
		cs: make([]stream.ChoiceStream, len(reqs)), ended: make([]bool, len(reqs)), errs: make([]error, len(reqs)), cached: make([]int, len(reqs))}
	st.Keeps(g.RetainedBytes(reqs...))
	for i := range reqs {
		st.formats[i] = base.withIndex(i)
		st.formats[i].lp = newLogprobFormat(b.Tokenizer, g)
		st.cs[i] = stream.NewChoiceStream(b, g, reqs[i].Prompt)
	}
	return st
}

// usage sums the choices' completion tokens; each prompt counts once,
// however many choices it had.
func (st *choicesState) usage() Usage {
	var u Usage
	n := max(st.gen.N, 1)
	for i := range st.cs {
		if i%n == 0 {
			u.PromptTokens += len(st.reqs[i].Prompt)
			u.CachedTokens += st.cached[i]
		}
		u.CompletionTokens += len(st.cs[i].Text.IDs())
		u.ReasoningTokens += st.cs[i].ReasoningTokens()
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// resumeChoices replays a multi-choice stream's events after Last-Event-ID
// and continues every choice the cut left unfinished from its own tokens
// (stream.ContinueChoices: its seed, its sampler position, its stop and
// tool state), so the joined stream equals an uninterrupted one; a choice
// whose every token was produced before the cut only gets its ending.
// Nothing is generated twice.
func (s *Server) resumeChoices(w http.ResponseWriter, r *http.Request, id string) {
	rc, err := s.store.shared().Open(r, id, func(o httpedge.Resumable) bool { _, ok := o.(*choicesState); return ok })
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, err)
		}
		return
	}
	defer rc.Release()
	st, ctx := rc.State.(*choicesState), rc.Ctx
	gens := make([]*stream.Generation, len(st.cs))
	live := make([]bool, len(st.cs))
	if !st.done {
		produced := make([][]int32, len(st.cs))
		for i := range st.cs {
			live[i], produced[i] = !st.ended[i], st.cs[i].Text.IDs()
		}
		if gens, err = stream.ContinueChoices(ctx, s.backend.Load(), st.gen, st.reqs, produced, live); err != nil {
			writeError(w, err)
			return
		}
		for _, gen := range gens {
			if gen != nil {
				ctx = gen.Context() // the one all continued choices share
				break
			}
		}
	}
	setSSEHeaders(w, id)
	sw := newSSEWriter(ctx, w, st.Log, &st.formats[0], s.cfg.WriteTimeout, rc.Last)
	_ = sw.Flush() // the replay
	if st.done {
		return
	}
	for i := range st.cs {
		if live[i] && gens[i] == nil { // every token was produced before the cut
			c, cw := &st.cs[i], &choiceWriter{sw: sw, f: &st.formats[i]}
			cw.finish(c.EndProduced(cw).Finish)
			st.ended[i] = true
		}
	}
	s.pumpChoices(st, gens, sw, false)
}
