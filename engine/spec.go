package engine

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/scheduler"
)

// Speculative decoding with an n-gram (prompt lookup) proposer.
//
// Each step, a decoding sequence may carry k draft tokens: the tokens that
// followed the most recent earlier occurrence of its last n tokens in its
// own prompt and output (no extra weights; it pays where an answer repeats
// its input: edits, reformatting, RAG quotes). The step computes 1+k rows
// for it, each with logits, and deliver verifies them in order (verify):
// row i's token is sampled exactly as a plain decode would sample it, with
// the same one PRNG draw, and the next row is used only while that token
// equals draft i. For a draft that is a point mass (the proposer's guess is
// deterministic) this is the standard speculative-sampling rule: draft d is
// accepted with probability p(d), and on rejection the token drawn is
// distributed as p with d removed and renormalised, so the output
// distribution is the target's; under greedy it is the argmax, so output is
// identical token for token, and a seeded sampled sequence draws the same
// numbers in the same order, which keeps seeds and Request.Resume exact.
// Verification stops at a stop token, the length limit or a rejection; the
// scheduler's Accept then keeps only the verified positions' KV and gives
// the rest of the blocks back at once. No prefix-cache entry is ever made
// from an unverified token: Advance counts only the newest token computed.
//
// Not speculated (a plain decode instead): a sequence with a constraint
// (its mask is computed for one row per step), a group leader not yet
// forked, a device-sampled engine drafting with the MTP head or an
// assistant (devsample.go: verifies), and pools that cannot roll back
// (recurrent state where the backend cannot put it back: state.go; the
// scheduler asks no drafts of them). A window pool rolls back: its window
// group releases blocks by verified tokens only (kvcache winTruncate).
//
// Where a copy breaks (an answer that reformats what it repeats), the
// proposer's copy cursor resumes it from the source (ngramPropose).
//
// Self-tuning: a sequence keeps decayed counts of drafts tried and
// accepted, in records by the length of the n-gram match behind each
// draft (shorter than specLongMatch, or not; a model's drafts in the
// first), and one for the copy cursor's drafts: α(i), the chance that
// draft i is right once the ones before it were, is its record's rate.
// The engine learns what a decode step of r rows costs from the step
// times it sees (rowCost). With S sequences decoding, n drafts are
// expected to deliver 1 + α(0) + α(0)α(1) + … tokens in a step of S+n
// rows, so a sequence drafts the n ≤ SpecConfig.K that
// makes the most tokens per second of step, and none while a plain step
// does best. Every draft the step can check counts, carried or not: the
// n-gram proposer proposes K whatever is carried, and the token sampled
// after the kept drafts checks the next proposed one (score).
// The cost is learned per row count, not as a line: on the CPU a step of
// 4 or 8 rows runs whole on the 4- and 8-row dot kernels, while 3 or 7 rows
// add 2- and 1-row passes (SmolLM2 at 2 threads, BenchmarkSpecStepRows on
// a quiet machine: t3 1.63·t1, t4 1.66, t7 3.00, t8 2.89, t11 4.31, t12
// 4.33; under load the gaps were wider: t3 2.15, t4 1.65), so a straight
// line priced 7 rows below 8 and drafted into the dearer sizes. An off
// sequence still proposes in the shadow: the proposal's first token is
// checked against the token the plain decode produced, so α keeps
// tracking and speculation comes back when drafts start to hit.

// SpecConfig turns on speculative decoding.
type SpecConfig struct {
	// Method is the proposer: "" (off), "ngram", "draft" (Draft's
	// greedy guesses, draft.go) or "mtp" (the target's own
	// multi-token-prediction head MTP, mtp.go).
	Method string
	// Draft is method draft's model, of the target's vocabulary, with a KV
	// store of its own of DraftBlocks blocks of the engine's BlockSize.
	Draft       Model
	DraftBlocks int
	// MTP is method mtp's head, bound to the target model, with its own
	// KV store of the engine's BlockSize.
	MTP MTPHead
	// Assistant is method draft's drafter when the draft model is an
	// assistant that runs on the target's own state (a Gemma 4 assistant,
	// assistant.go) instead of a Draft: no KV store of its own.
	Assistant Assistant
	// K is the most draft tokens per sequence per step (0 = DefaultSpecK).
	K int
	// NGram and MinNGram are the longest and shortest suffixes matched,
	// longest first (0 = DefaultSpecNGram, DefaultSpecMinNGram).
	NGram, MinNGram int
	// Fixed turns self-tuning off: every decode with a proposal carries up
	// to K drafts whatever they have been worth (for tests and for
	// measuring the proposer alone).
	Fixed bool
	// LogitRows is the most logit rows the model returns per step (the
	// models.Options.MaxSeqs it was loaded with), drafts' rows included;
	// 0 = MaxSeqs, which leaves drafts only the rows of idle sequence
	// slots. Load the model with MaxSeqs·(1+K) to let a full batch
	// speculate.
	LogitRows int
}

// Speculation defaults.
const (
	DefaultSpecK     = 8
	DefaultSpecNGram = 3
	// specWindow bounds how far back a proposer looks, so its cost per
	// step stays small beside the forward pass on long sequences.
	specWindow = 4096
	// DefaultSpecMinNGram is the shortest suffix matched. Two tokens
	// pick a copy up again one or two tokens after a reformat breaks it
	// (a JSON key's quote re-tokenized after a new line: `"` then `email`
	// where the prompt has ` "` then `email`), which three tokens miss
	// until the value is under way. Short matches are priced by their own
	// record (specState), so where two-token repeats are chance (free
	// text) the tuner carries few of them. BenchmarkSpeculative, SmolLM2
	// at 2 threads, 2 against 3 alternated: JSON 1.47-1.66x against
	// 1.36-1.39x quiet, 1.71-1.79x against 1.33-1.43x with a third process
	// spinning; free text 1.03-1.10x against 1.02-1.07x; edit no worse.
	// One token recurs by chance too often: 1-token matches drafted
	// 0.2-0.25 rows a token on free text at 0.19 acceptance, 0.92x plain.
	DefaultSpecMinNGram = 2
	// specLongMatch is the match length from which an n-gram draft is
	// priced by the long matches' record instead of the short ones'.
	specLongMatch = 5
	// specRowCost is the cost of a draft row (over one sequence's share
	// of a plain step) before the step times have shown one.
	specRowCost = 0.25
	// specMinGain is the expected gain over a plain step below which a
	// sequence does not draft: the estimates behind it (a decayed rate of
	// a few dozen drafts, step times learned under varying load) are not
	// finer than that, and drafts at the margin cost where they miss.
	// Measured, quiet, SmolLM2 at 2 threads (BenchmarkSpeculative): free
	// text at 0 drafted at acceptance 0.21-0.29 (0.1 rows a token) and
	// lost 3-6%, every one of those drafts priced a 2-8% gain.
	specMinGain = 0.1
	// specCostRows bounds the step sizes whose times are learned one by
	// one; larger steps are priced by the straight-line fit alone.
	specCostRows = 256
)

func (c *SpecConfig) validate() error {
	switch c.Method {
	case "":
		return nil
	case "ngram", "draft", "mtp":
	default:
		return fmt.Errorf("%w: speculative method %q (want ngram, draft or mtp)", ErrConfig, c.Method)
	}
	if c.K == 0 {
		c.K = DefaultSpecK
	}
	if c.NGram == 0 {
		c.NGram = max(DefaultSpecNGram, c.MinNGram)
	}
	if c.MinNGram == 0 {
		c.MinNGram = min(DefaultSpecMinNGram, c.NGram)
	}
	if c.K < 1 || c.K > 64 || c.MinNGram < 1 || c.NGram < c.MinNGram || c.NGram > 64 {
		return fmt.Errorf("%w: speculative k %d, n-gram %d", ErrConfig, c.K, c.NGram)
	}
	return nil
}

// specState is one sequence's acceptance record; loop-owned.
type specState struct {
	// tried and hit are decayed counts of draft tokens checked and right,
	// in records by the length for which the n-gram match behind a
	// draft has agreed with the text (specRecord): [1] for specLongMatch
	// tokens or more, [0] for shorter ones and every draft of a model,
	// [2] for the copy cursor's drafts (priced with the short matches,
	// they drafted into free text's chance repeats: replay free 1.02-1.04x
	// against 1.07-1.09x with a record of their own). A
	// text that repeats itself keeps repeating once a long stretch has
	// matched, while a short match is more often chance, so one rate for
	// both drafted too little where copies run long.
	tried, hit [specRecords]float64
	// ext is the match length behind the pending proposal (s.draft): 0
	// for a model's drafts; pending says the next delivery scores it.
	ext     int
	pending bool
	// seeded: the records start from the engine's recent acceptance
	// (specPrior) rather than a flat ½.
	seeded bool
	// The copy cursor (ngramPropose): src is the pending n-gram
	// proposal's source in the sequence's tokens (≤ 0: none; a match
	// is at least one token, so a source is never 0), cursor the source
	// token expected next since a copy broke, and cursorAt the length of
	// the text when the copy last moved.
	src, cursor, cursorAt int
}

// specPrior is the engine's recent acceptance over all sequences, in
// specState's records: a new sequence starts from it, weighted as
// specPriorWeight drafts, so that a stream of requests whose drafts miss
// (free text) does not pay for the same first misses in every request
// before its own record learns. Loop-owned.
type specPrior struct{ tried, hit [specRecords]float64 }

// specPriorWeight is how many drafts a new sequence's record counts the
// engine's rate as: enough to start below the margin where drafts miss,
// few enough that the sequence's own first verifications outweigh it.
const specPriorWeight = 2

func (g *specPrior) add(tried, hit [specRecords]float64) {
	const decay = 0.95 // per verification: the last ~20 across sequences
	for b := range tried {
		if tried[b] > 0 {
			g.tried[b] = g.tried[b]*decay + tried[b]
			g.hit[b] = g.hit[b]*decay + hit[b]
		}
	}
}

// seed starts p, a sequence's first record, from the engine's rate.
func (g *specPrior) seed(p *specState) {
	p.seeded = true
	for b := range g.tried {
		if g.tried[b] >= 1 {
			p.tried[b] = specPriorWeight
			p.hit[b] = specPriorWeight * g.hit[b] / g.tried[b]
		}
	}
}

// accept is the chance that draft i (from 0) of a proposal is right once
// the ones before it were, with one prior trial at ½: behind it, the match
// has agreed for ext+i tokens.
func (p *specState) accept(ext, i int) float64 {
	b := specRecord(ext, i)
	return (p.hit[b] + 0.5) / (p.tried[b] + 1)
}

// specRecords is the number of acceptance records: short matches and a
// model's drafts, long matches, and the copy cursor's drafts.
const specRecords = 3

// specRecord is the record of draft i of a proposal whose match length is
// ext (0: a model's; specCursorExt: the copy cursor's).
func specRecord(ext, i int) int {
	switch {
	case ext == specCursorExt:
		return 2
	case ext > 0 && ext+i >= specLongMatch:
		return 1
	}
	return 0
}

// alpha is the acceptance of a model's drafts (all in one record).
func (p *specState) alpha() float64 { return p.accept(0, 0) }

// score records how proposal prop fared: its first kept tokens were
// carried and accepted, and next is the token sampled after them. next
// also checks the proposal's next token where it was proposed but not
// carried, so a sequence that drafts short (or not at all) still learns
// whether longer drafts would have been right.
func (p *specState) score(prop []int32, ext, kept int, next int32) (tried, hit [specRecords]float64) {
	right := kept
	if kept < len(prop) && prop[kept] == next {
		right++
	}
	for i := range min(right+1, len(prop), kept+1) {
		b := specRecord(ext, i)
		tried[b]++
		if i < right {
			hit[b]++
		}
	}
	for b := range tried {
		if tried[b] > 0 {
			p.record(b, tried[b], hit[b])
		}
	}
	return tried, hit
}

// record adds to record b a verification of tried drafts of which hit
// were right.
func (p *specState) record(b int, tried, hit float64) {
	const decay = 0.8 // per verification: a record follows its last ~5
	p.tried[b] = p.tried[b]*decay + tried
	p.hit[b] = p.hit[b]*decay + hit
}

// rowCost learns the time of an all-decode step by its row count: the
// exponentially weighted mean of recent steps of each size, and a
// straight-line fit a + b·rows over all of them (weighted least squares)
// that prices a size not seen lately.
type rowCost struct {
	w, x, y, xx, xy float64
	seqs            float64    // sequences in the latest step
	byRows          []stepTime // [rows]
}

// stepTime is the decayed count and time sum of the steps of one size.
type stepTime struct{ w, y float64 }

func (r *rowCost) add(rows, seqs int, d time.Duration) {
	const decay = 0.98 // per step: the estimates follow the last ~50
	x, y := float64(rows), d.Seconds()
	r.w, r.x, r.y = r.w*decay+1, r.x*decay+x, r.y*decay+y
	r.xx, r.xy = r.xx*decay+x*x, r.xy*decay+x*y
	r.seqs = float64(seqs)
	for i := range r.byRows {
		r.byRows[i].w *= decay
		r.byRows[i].y *= decay
	}
	if rows < specCostRows {
		if rows >= len(r.byRows) {
			r.byRows = append(r.byRows, make([]stepTime, rows+1-len(r.byRows))...)
		}
		r.byRows[rows].w++
		r.byRows[rows].y += y
	}
}

// line is the straight-line fit's a and b; ok is false until the rows
// have varied enough to show a slope.
func (r *rowCost) line() (a, b float64, ok bool) {
	den := r.w*r.xx - r.x*r.x
	if r.w < 4 || den < 0.5*r.w*r.w { // the rows' variance is under ½: no slope to see
		return 0, 0, false
	}
	b = (r.w*r.xy - r.x*r.y) / den
	return (r.y - b*r.x) / r.w, b, true
}

// time is the expected time of an all-decode step of rows rows when plain
// steps have seqs rows: the recent mean of that size, pulled toward the
// straight line with the weight of one step, so a size whose one slow step
// fell in a burst of load is tried again once its weight has decayed. In
// units of the plain step until any step has been seen.
func (r *rowCost) time(rows, seqs int) float64 {
	a, b, ok := r.line()
	var est float64
	switch {
	case ok && a+b*float64(seqs) > 0:
		est = a + b*float64(rows)
	case r.w > 0:
		mean := r.y / r.w
		est = mean * (1 + specRowCost*float64(rows-seqs)/float64(seqs))
	default:
		return 1 + specRowCost*float64(rows-seqs)/float64(seqs)
	}
	if rows < len(r.byRows) {
		t := r.byRows[rows]
		est = (t.y + est) / (t.w + 1)
	}
	return max(est, 1e-9)
}

// draftLen is how many of k drafts with a match length ext (spec.accept)
// a sequence should carry: the n that makes the most expected tokens per
// second in a step of seqs sequences (the others plain).
func (r *rowCost) draftLen(spec *specState, ext, k, seqs int) int {
	seqs = max(seqs, 1)
	best, bestRate := 0, float64(seqs)/r.time(seqs, seqs)*(1+specMinGain)
	toks, p := float64(seqs), 1.0
	for n := 1; n <= k; n++ {
		p *= spec.accept(ext, n-1)
		toks += p
		if rate := toks / r.time(seqs+n, seqs); rate > bestRate {
			best, bestRate = n, rate
		}
	}
	return best
}

// cost is the cost of one draft row over one sequence's share of a plain
// step of the latest size (the metric's c).
func (r *rowCost) cost() float64 {
	s := max(int(r.seqs), 1)
	plain := r.time(s, s)
	return min(max((r.time(s+1, s)-plain)*float64(s)/plain, 0.01), 2)
}

// propose is the scheduler's Config.Propose: the drafts for running
// sequence q's next step, at most max of them.
func (e *Engine) propose(q *scheduler.Seq, limit int) []int32 {
	s := owner(q)
	s.spec.pending = false
	if e.dev != nil && !e.dev.verifies(e) || s.req.Constraint != nil || len(s.choices) > 0 {
		return nil
	}
	cfg := &e.cfg.Speculate
	// Drafts, and the token after them, stay within the length limit.
	k := min(cfg.K, limit, s.maxLen-len(q.Tokens)-1)
	if k <= 0 {
		return nil
	}
	seqs := int(e.specCost.seqs)
	if !s.spec.seeded {
		e.specPrior.seed(&s.spec)
	}
	var d []int32
	var n, ext int
	if e.mtp == nil && e.draft == nil && e.assist == nil {
		// All k are proposed, whatever is carried: the ones left out
		// are checked against the tokens the step produces (score).
		d, ext = s.spec.ngramPropose(q.Tokens, cfg.MinNGram, cfg.NGram, k, s.draft[:0])
		n = e.specCost.draftLen(&s.spec, ext, len(d), seqs)
		if cfg.Fixed {
			n = len(d)
		}
	} else {
		n = e.specCost.draftLen(&s.spec, 0, k, seqs)
		if cfg.Fixed {
			n = k
		}
		switch {
		case e.mtp != nil:
			d = e.mtp.propose(e, s, n)
		case e.draft != nil:
			d = e.draft.propose(e, s, n)
		default:
			d = e.assist.propose(e, s, n)
		}
	}
	s.draft = d
	s.spec.ext, s.spec.pending = ext, len(d) > 0
	return d[:min(n, len(d))]
}

// ngramDraft appends to out (empty) k tokens that followed the most recent
// earlier occurrence of the last maxN (down to minN) tokens of h, or none,
// and says how far back that occurrence agrees with h's end: its match
// length, counted up to specLongMatch (or maxN where that is more).
func ngramDraft(h []int32, minN, maxN, k int, out []int32) ([]int32, int) {
	src, ext := ngramMatch(h, minN, maxN)
	if src < 0 {
		return out, 0
	}
	return copyDraft(h, src, k, out), ext
}

// ngramMatch finds the most recent earlier occurrence of the last maxN
// (down to minN) tokens of h: src is the index of the token that followed
// it (-1 for none), ext its match length as ngramDraft counts it.
func ngramMatch(h []int32, minN, maxN int) (src, ext int) {
	l := len(h)
	lo := max(0, l-specWindow)
	for n := min(maxN, l-1); n >= minN; n-- {
		suf := h[l-n:]
	scan:
		for j := l - n - 1; j >= lo; j-- { // h[j:j+n] vs the suffix, the latest first
			for i := n - 1; i >= 0; i-- {
				if h[j+i] != suf[i] {
					continue scan
				}
			}
			ext := n
			for ext < specLongMatch && j+n-1-ext >= lo && h[j+n-1-ext] == h[l-1-ext] {
				ext++
			}
			return j + n, ext
		}
	}
	return -1, 0
}

// copyDraft appends to out k tokens of h from src on, read on into the
// draft itself where they reach the end of h: a loop of period l−src
// drafts k tokens, not just one period.
func copyDraft(h []int32, src, k int, out []int32) []int32 {
	l := len(h)
	for i := src; len(out) < k; i++ {
		if i < l {
			out = append(out, h[i])
		} else {
			out = append(out, out[i-l])
		}
	}
	return out
}

// The copy cursor. An answer that reformats what it copies (a JSON
// document pretty-printed, code re-indented) breaks each copy with tokens
// of its own (a new line and an indent where the source had a space), and
// often re-tokenizes the source's next token (`"` after the indent where
// the source has ` "`), so for a token or two after each break no n-gram
// of the answer occurs in the source, and the short ones that do occur
// are the answer's own formatting, followed by the previous field. The
// proposer remembers where the copy broke, the source token expected
// next, and drafts from the token after the answer's last one where that
// occurs within specCursorSpan tokens of the cursor (the break replaced
// source tokens) in preference to a match shorter than specCursorBeats;
// with no match at all, from the cursor itself (the break was an
// insertion). A one-token match anywhere is chance too often
// (DefaultSpecMinNGram); this one is tied to where the copy broke. A
// short match that copies fewer than specCursorBeats tokens does not move
// the cursor, and the cursor lapses after specCursorSpan tokens without progress (the
// copy was not resumed). Its drafts are priced by a record of their own.
const (
	specCursorSpan  = 6
	specCursorBeats = 3
	specCursorExt   = -1 // the match length ngramPropose gives the cursor's drafts
)

// ngramPropose is the n-gram proposer: ngramDraft, or the copy cursor's
// draft (ext specCursorExt). It records the draft's source and match
// length for follow.
func (p *specState) ngramPropose(h []int32, minN, maxN, k int, out []int32) ([]int32, int) {
	src, ext := ngramMatch(h, minN, maxN)
	if l := len(h); p.cursorLive(l) && (src < 0 || ext < specCursorBeats) {
		anchored := false
		for i := p.cursor; i < min(p.cursor+specCursorSpan, l-1); i++ {
			if h[i] == h[l-1] {
				src, ext, anchored = i+1, specCursorExt, true
				break
			}
		}
		if !anchored && src < 0 {
			src, ext = p.cursor, specCursorExt
		}
	}
	p.src, p.ext = src, ext
	if src < 0 {
		return out, 0
	}
	return copyDraft(h, src, k, out), ext
}

// cursorLive says whether the copy cursor may still draft when the text
// is l tokens long.
func (p *specState) cursorLive(l int) bool {
	return p.cursor > 0 && p.cursor < l && l-p.cursorAt <= specCursorSpan
}

// follow moves the copy cursor once the proposal from p.src has been
// verified: kept drafts were accepted and next was produced after them,
// and h is the text so far. Where next is the source's next token too the
// copy goes on; where not, the copy broke before that source token.
func (p *specState) follow(h []int32, kept int, next int32) {
	if p.src <= 0 { // no n-gram proposal (a model's drafts leave it 0)
		return
	}
	at := p.src + kept
	if at < len(h) && h[at] == next {
		at++
	}
	fromCursor := p.ext == specCursorExt
	if fromCursor || at-p.src >= specCursorBeats || !p.cursorLive(len(h)) {
		if at > p.src || !fromCursor { // progress, or a new break: the span starts again
			p.cursorAt = len(h)
		}
		p.cursor = at
	}
	p.src = -1
}

// verify samples an item's 1+len(Draft) rows in order, delivering each
// token while the previous one matched its draft, then tells the scheduler
// how many drafts were kept.
func (e *Engine) verify(it scheduler.Item, logits *stepLogits, row int, now time.Time) {
	s := owner(it.Seq)
	kept := 0
	var tok int32
	for i := 0; i <= len(it.Draft); i++ {
		var lp *Logprob
		var err error
		tok, lp, err = e.sampleRow(s, logits, nil, row+i)
		if err != nil {
			e.end(s, Result{Finish: FinishError, Err: err})
			return
		}
		if !e.emit(s, tok, lp, now) {
			break // ended: its blocks are back in the pool
		}
		if i == len(it.Draft) || tok != it.Draft[i] {
			break
		}
		kept++
	}
	if s.spec.pending {
		e.specPrior.add(s.spec.score(s.draft, s.spec.ext, kept, tok))
		s.spec.follow(it.Seq.Tokens, kept, tok)
		s.spec.pending = false
	}
	e.st.SpecDrafts++
	e.st.SpecDraftTokens += int64(len(it.Draft))
	e.st.SpecAcceptedTokens += int64(kept)
	e.sched.Accept(it.Seq, kept)
	e.rollBackState(s, it, kept) // state.go: a hybrid model's recurrent state
}

// shadow checks a plain decode's token against the proposal its step did
// not carry, so an off sequence's acceptance keeps up to date.
func (e *Engine) shadow(s *Sequence, tok int32) {
	if s.spec.pending {
		e.specPrior.add(s.spec.score(s.draft, s.spec.ext, 0, tok))
		s.spec.follow(s.sq.Tokens, 0, tok)
		s.spec.pending = false
	}
}

// observeStep feeds an all-decode step's time to the row-cost fit.
func (e *Engine) observeStep(plan *scheduler.Plan, d time.Duration) {
	if e.cfg.Speculate.Method == "" || len(plan.Items) == 0 || len(plan.Preempted) > 0 {
		return
	}
	for _, it := range plan.Items {
		if !it.Decode {
			return
		}
	}
	e.specCost.add(plan.Tokens, len(plan.Items), d)
	e.st.SpecRowCost = e.specCost.cost()
}
