// Package constrain restricts generation to a grammar: JSON Schema, a regular
// expression, a Lark grammar or a fixed list of choices. It wraps llguidance
// (guidance-ai's Rust crate, built from source by scripts/build-llguidance.sh
// into .build/lib/libllguidance.a) through its C API. The grammar types and
// the grammars Sluice writes itself are pure Go, in constrain/grammar (aliased
// here), so that code which only builds grammars does not link Rust.
//
// A Vocab is built once per model from the tokenizer's tokenizer.json and is
// safe for concurrent use. A Matcher follows one sequence: Mask writes the
// tokens the grammar allows next as a bitset, Commit advances it by the token
// sampled. A Matcher is not safe for concurrent use; the engine computes its
// mask on a worker goroutine while the forward pass runs and commits on the
// loop after joining that worker, so the two never overlap.
package constrain
