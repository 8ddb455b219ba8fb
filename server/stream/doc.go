// Package stream is the transport-neutral stream core: everything a
// generation request goes through between a transport's wire shape and the
// engine, written once for the OpenAI HTTP/SSE API, gRPC and whatever
// adapter comes next.
//
//	adapter: wire shape → GenRequest (SetMessages, SetPrompt*, SetParams: one set of rules)
//	Prepare(backend, g)   chat template, tokenize, check against Backend.Limit, fix the seed
//	Backend.Submit(ctx, req) → Generation (the context the engine watches; the abort
//	    policy is the Backend's, set once where a server attaches it)
//	Pump(gen, TextStream, Emitter, PumpConfig, shutdown)
//	    Sequence.Tokens ─▶ TextStream (detokenize with the prompt as context, stop-string hold-back)
//	                    ─▶ Emitter.Text(text, ids) / KeepAlive / Flush (framing: the adapter's)
//	    timers: coalescing, keep-alive, the stall clock (reset by tokens and by Sequence.Progress)
//	Classify(err) → Class: HTTP status, OpenAI type and code, gRPC code (the one error table)
//
// Several choices (n, a completions list of prompts) go the same way in the
// plural (choices.go): PrepareChoices → SubmitChoices (each prompt prefilled
// once, its n choices forked from it; one context for all) → PumpChoices
// (a Pump per choice, their emitter calls serialized).
//
// Cancellation has one owner, the engine: it watches the Generation's
// context and frees the sequence's blocks when it ends. A transport ends
// that context when its client leaves; Pump ends it when a write fails.
// Pump calls Sequence.Abort only for what it alone sees: a stop string, a
// stall, shutdown.
//
// A feature meant for every transport plugs in here once: a field is one
// more Params entry validated in SetParams, an output kind one more thing
// the Emitter receives, a producer one more Engine.
//
// Concurrency: Pump, its TextStream and its Emitter belong to the goroutine
// serving one request; Prepare and Submit are safe for concurrent use.
package stream
