package cpu

// Reading ahead (issue 26's decode bandwidth at two threads). A decode step
// of a small model is a chain of matrix products that share out over the
// threads, with the caller's serial work between them: norms, RoPE, the
// attention of one row, the activations' quantization. During that work
// the helpers spin and memory sits idle. On SmolLM2-135M at two threads
// (a CPU profile of BenchmarkDecodeBandwidthPaired on a Zen 3 VM) the
// caller spent an eighth of the step outside the products and the helper
// as long spinning, and decode read 0.77–0.81 of the rate of one long
// product over as many bytes.
//
// A helper that finds no chunk left of a product therefore reads the
// first bytes of the weights of the product expected next into its cache,
// until a new operation arrives. Which product comes next is learned, not
// told: a model runs its products in the same order every step, so each
// weight remembers the weights of the product that followed it last time
// (tensor.next), and a guess that is wrong costs reads that were free.
// On that machine the step became 1.04–1.05× faster (SmolLM2-135M, two
// threads, BenchmarkDecodeReadAhead, the two ways alternated step by step).
//
// Only regrouped matrices are read ahead: they are copies on the Go heap
// (x16pack.go), whereas another weight may lie in the model file's mmap
// (an MoE expert stack, any weight after KeepFileLayout), which its owner
// may unmap while a helper still reads. Gemma 3's Q5_0, Q4_K and Q6_K
// matrices gained nothing measurable read ahead, neither in the mmap under
// the runtime's panic-on-fault (BenchmarkDecodeReadAhead 0.99–1.02) nor
// as Upload's copies on huge pages (weightarena.go; 0.995–0.999).

// SetReadAhead turns reading ahead on (the default) or off, for
// benchmarks that time a step both ways in one process
// (models.BenchmarkDecodeReadAhead). Off takes effect from the next product.
func (b *Backend) SetReadAhead(on bool) {
	b.noReadAhead = !on
	b.after = readAhead{}
}

// maxReadAhead is how many weights of one product are remembered: the
// most a product shares its activations among (gate and up, or Q, K and V)
// and one to spare.
const maxReadAhead = 4

// readAheadBytes bounds what a helper reads ahead after one product: well
// inside a core's L2 (1 MiB on Zen 3, 1.25–2 MiB on Ice Lake and Sapphire
// Rapids), so the first lines read are still there when the product starts.
// The serial gaps of SmolLM2's decode step are 10–40 µs, 0.2–0.8 MB at the
// machine's read rate.
const readAheadBytes = 512 << 10

// opWeights are the weights of one product, in the order its chunks
// reach them; unused entries are nil.
type opWeights [maxReadAhead]*tensor

// readAhead is what a helper reads after a product: byte ranges of
// regrouped weights, empty entries skipped.
type readAhead [maxReadAhead][]byte

// beginProduct is called by a product on the row kernels, or with tiled
// set on the tiled ones, before it is shared out. It records op as the
// successor of the previous product and sets w.after to the first bytes of
// op's own successor, for the helpers to read once they run out of chunks.
// Operations that are not products leave w.after as it is: the product
// after them is still the one expected.
func (w *workers) beginProduct(op opWeights, tiled bool) {
	if w.pool == nil || w.noReadAhead || op[0] == nil || op[0] == w.prev {
		// (The same weights twice in a row: a step mixing prompt rows
		// with others runs its product in two parts.)
		return
	}
	if w.prev != nil {
		w.prev.next = op
	}
	w.prev = op[0]
	w.after = readAhead{}
	if tiled {
		// Prompt rows read the weights' unpacked tiles (amxcache.go), not
		// the bytes that would be read ahead.
		return
	}
	budget := readAheadBytes
	for i, t := range op[0].next {
		if t == nil || t.layout == nil || budget == 0 {
			break
		}
		n := min(len(t.raw), budget)
		w.after[i] = t.raw[:n]
		budget -= n
	}
}

// readAheadUntil reads the cache lines of ahead, in order, until they are
// all read or operation gen is no longer the current one (a new operation
// has come, or the pool is stopping). It returns a byte of what it read,
// for the caller to keep so that the loads are not dropped as unused.
func (p *pool) readAheadUntil(ahead *readAhead, gen uint64) byte {
	const page = 4096 // between checks for a new operation: 64 lines
	var sink byte
	for _, r := range ahead {
		for off := 0; off < len(r); off += page {
			if p.claim.Load()>>genShift != gen || p.quit.Load() {
				return sink
			}
			sink += touchLines(r[off:min(off+page, len(r))])
		}
	}
	return sink
}

// touchLines loads one byte of every 64-byte line of b. The loads do not
// depend on one another, so the core keeps as many in flight as it has
// miss buffers and its L2 prefetcher follows the stream.
func touchLines(b []byte) byte {
	var s byte
	for i := 0; i < len(b); i += 64 {
		s += b[i]
	}
	return s
}
