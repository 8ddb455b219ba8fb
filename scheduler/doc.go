// Package scheduler owns per-step batch composition: which sequences run in
// a step and how many of their tokens, admission against the KV pool,
// chunked prefill, preemption by recompute, and fairness between priorities.
//
// It thinks in tokens, not in prefill/decode phases. A sequence knows
// len(Tokens) tokens (prompt, resumed output, generated output) of which
// NumComputed have their KV in the cache; each step schedules n more of
// them. A decode is simply n = 1; a prompt longer than the step's token
// budget is split across steps and mixed with other sequences' decodes.
//
// Each step (Schedule):
//  1. running sequences that decode, in precedence order;
//  2. running sequences still prefilling (a chunk each);
//  3. waiting sequences, while the token budget, the sequence cap and the
//     pool (keeping a watermark of blocks free) allow: tenants (Seq.Tenant)
//     take turns by fair queuing over the tokens admitted (fair.go), each
//     tenant's own in precedence order. Admission stops at the first that
//     does not fit, so a large request is not overtaken forever by small
//     ones; a sequence of higher Priority may first preempt its tenant's
//     running ones of lower Priority to make room.
//
// Steps 2 and 3 share the step's token budget, and when step 1 scheduled any
// decode they share at most MaxPrefillTokensWithDecodes tokens (default
// 128), however many decodes there are: every running stream waits for the
// whole step, so a new prompt joins a busy batch in bounded chunks
// (decode-priority chunked prefill) rather than in one step that stalls them
// all. The rule is set by what a step costs: a step that carries any prompt
// token pays a fixed cost (the CPU's tiled prompt kernels unpack every
// weight once per step, ~90 prompt tokens' worth on the reference machine)
// plus a little per token, so the streams lose least when a prompt goes in
// as few steps as the bound allows; past 128 tokens a chunk's cost grows
// faster than its tokens (see DefaultMaxPrefillTokensWithDecodes). Smaller chunks for
// small batches (the former 4 tokens per decode) paid the fixed cost five
// times for a 69-token prompt beside 3 streams, and 4 clients got less
// throughput than 1. With nothing decoding, prefill gets the full budget.
//
// When a running sequence cannot grow, the running sequence of lowest
// precedence is preempted by recompute: its blocks are freed and it returns
// to the waiting queue at its place; on readmission it recomputes its known
// tokens, mostly served from the prefix cache.
//
// Precedence (within a tenant): higher Priority first, then earlier arrival. Waiting ages: one
// priority level is worth AgingSteps steps of waiting, so the order key
// Priority*AgingSteps - arrivalStep is fixed per sequence, and any waiting
// sequence eventually outranks every later arrival (no starvation).
//
// Concurrency: none. The engine loop owns the scheduler and its pool.
package scheduler
