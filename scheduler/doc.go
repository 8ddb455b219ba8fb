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
// decode they share at most PrefillTokensPerDecode tokens per decode (at least
// MinPrefillTokensWithDecodes, at most MaxPrefillTokensWithDecodes): every running
// stream waits for the whole step, so a new prompt is fed to a busy batch in
// small chunks (decode-priority chunked prefill) rather than in one step that
// stalls them all. With nothing decoding, prefill gets the full budget.
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
