package scheduler

import "github.com/sluicehq/sluice/kvcache"

// State is where a sequence is in the scheduler.
type State uint8

const (
	StateNew     State = iota // not yet added
	StateWaiting              // queued, holding no blocks
	StateRunning              // admitted, holding blocks for its computed tokens
	StateDone                 // finished or aborted: removed, blocks released
)

func (s State) String() string {
	return [...]string{"new", "waiting", "running", "done"}[s]
}

// Seq is one sequence as the scheduler sees it. The owner (the engine loop)
// sets Tokens, Priority, Tenant, Salt and Owner before Add and appends each
// sampled token to Tokens; everything else belongs to the scheduler.
type Seq struct {
	Tokens   []int32 // every known token: prompt, resumed output, generated output
	Priority int     // higher runs first, among its tenant's sequences
	// Tenant is who sent the sequence (an API key's id; "" for all when
	// there is no such notion): admission shares turns fairly between
	// tenants (fair.go).
	Tenant string
	// Salt is the sequence's prefix-cache partition (kvcache.SaltOf): it
	// shares cached blocks only with sequences of the same Salt.
	Salt  uint64
	Owner any // the owner's handle for this sequence, carried in plans

	id           uint64
	key          int64 // precedence: Priority*AgingSteps - arrival step
	state        State
	computed     int
	table        kvcache.Table
	admitted     bool
	cachedTokens int
	preemptions  int
	scheduled    int64 // the step this sequence was last scheduled in
}

// State is where the sequence is.
func (q *Seq) State() State { return q.state }

// NumComputed is the number of leading tokens whose KV is in the cache.
func (q *Seq) NumComputed() int { return q.computed }

// Blocks is the sequence's block table (valid until the next scheduler call).
func (q *Seq) Blocks() []int32 { return q.table.Blocks() }

// WindowBlocks is the sequence's window-group block table (kvcache
// window.go), nil when the pool has no window group.
func (q *Seq) WindowBlocks() []int32 { return q.table.WindowBlocks() }

// Admitted reports whether the sequence has ever been admitted (it stays
// true across preemptions).
func (q *Seq) Admitted() bool { return q.admitted }

// CachedTokens is the number of tokens served from the prefix cache at the
// sequence's first admission (later readmissions after preemption do not count).
func (q *Seq) CachedTokens() int { return q.cachedTokens }

// Preemptions counts how often the sequence was preempted.
func (q *Seq) Preemptions() int { return q.preemptions }

// before reports whether a runs before b: higher key, then earlier arrival.
func before(a, b *Seq) bool {
	if a.key != b.key {
		return a.key > b.key
	}
	return a.id < b.id
}

// Item is one sequence's share of a step: positions [Start, Start+N).
type Item struct {
	Seq   *Seq
	Start int
	N     int
	// Sample: the step reaches the end of the sequence's known tokens, so its
	// last row's logits give the next token.
	Sample bool
	// Decode: a running sequence's one newest token. Everything else is
	// prefill (prompt chunks, admissions, recomputes after preemption) and
	// counts against MaxPrefillTokensWithDecodes.
	Decode bool
	// Draft are a decode's proposed next tokens (Config.Propose), laid out
	// after its newest token: N = 1 + len(Draft), every row sampled. Their
	// KV is unverified: Advance counts only the newest token as computed and
	// the owner calls Accept with how many drafts verification kept.
	Draft []int32
}

// Plan is one step's schedule. It is reused by the next Schedule call.
type Plan struct {
	Items     []Item
	Tokens    int    // sum of Items[i].N
	Preempted []*Seq // running sequences sent back to the waiting queue this step
	// Unfit are sequences removed (state Done) because they cannot fit even
	// in an empty pool; the owner finishes them. The engine's length limit
	// keeps this empty.
	Unfit []*Seq
}

func (p *Plan) reset() {
	clear(p.Items) // drop references to finished sequences
	p.Items = p.Items[:0]
	p.Tokens = 0
	clear(p.Preempted)
	p.Preempted = p.Preempted[:0]
	clear(p.Unfit)
	p.Unfit = p.Unfit[:0]
}
