// Package engine owns the generation loop: continuous batching of sequences
// over a paged KV cache, each sequence's lifecycle (submit, stream, finish,
// abort), sampling, and the cancellation path that returns a sequence's KV
// blocks to the pool before the next step.
//
// Concurrency: one goroutine, the loop, owns the scheduler, the KV pool and
// all per-sequence state:
//
//	for { select { arrivals, aborts, stop }; step() }
//	step = schedule → build kernels.Batch → Model.Forward → sample → deliver
//
// Callers reach it only through channels: Submit sends an arrival (bounded
// by Config.MaxQueue: ErrQueueFull is the backpressure; with several
// Request.Tenant values waiting, a tenant under its share, MaxQueue over the
// tenants waiting, still gets in up to twice MaxQueue in all, and only one
// at or over its share gets ErrTenantQueueFull), Abort and context
// cancellation (context.AfterFunc, no goroutine per sequence) send an abort.
// Both take effect at the next step boundary. The loop never waits on a
// reader: each Sequence's token channel is buffered for every token it may
// produce, and is closed exactly once, by the loop, after its Result is set.
// Status and metrics read a Stats snapshot published once per step, and an
// optional Observer is called from the loop.
//
// SubmitGroup (group.go) sends the n choices of one prompt as one arrival:
// the first prefills the prompt; when its KV is complete the others fork its
// block table (scheduler.Fork, kvcache.Pool.Fork) and run as ordinary
// sequences from there.
//
// A model that can leave its logits on its device (DeviceModel, with a
// kernels.DeviceSampler: the CUDA backend) has each step's tokens sampled
// there, and only the rows hostOnly names come back (devsample.go);
// SLUICE_DEVICE_SAMPLE=0 keeps every row on the host.
//
// Config.Speculate turns on speculative decoding (spec.go): n-gram drafts
// verified in the same step as the plain decodes, exact under greedy and
// distribution-preserving under sampling, rejected positions' blocks
// returned at once (scheduler.Accept; a window pool's window group too),
// self-tuned per sequence. Constrained sequences, and recurrent-state pools
// whose backend cannot put the state back, do not speculate.
//
// The engine knows nothing of HTTP, JSON or SSE, nor of devices: the Model
// owns its KV storage, sized for Config.Blocks × Config.BlockSize slots.
package engine
