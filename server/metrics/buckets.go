package metrics

// Histogram bucket boundaries (upper bounds, seconds unless said otherwise).
// They are chosen for LLM serving on hardware from one CPU core to one
// datacenter GPU, with the densest buckets where SLOs are usually set, so a
// histogram_quantile over them is accurate to a few percent where it matters.
// Changing one breaks dashboards that compare across versions: add, do not move.
var (
	// TTFTBuckets: 5 ms (GPU, short prompt, idle server) to 80 s (a long
	// prefill queued behind a full batch on a CPU). Dense between 50 ms and
	// 2 s, where interactive TTFT SLOs sit.
	TTFTBuckets = []float64{
		0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
		0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 20, 40, 80,
	}

	// ITLBuckets: the gap between consecutive tokens of one sequence. 1 ms
	// (GPU decode, small batch) to 2.5 s (a CPU step with a large batch or a
	// preemption pause). Reading speed is ~5-10 tokens/s, so 100-200 ms is the
	// line users notice.
	ITLBuckets = []float64{
		0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05,
		0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5,
	}

	// RequestBuckets: end-to-end request time, arrival to last token. 100 ms
	// (a few tokens) to 16 min (thousands of tokens on a CPU), roughly doubling.
	RequestBuckets = []float64{
		0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 240, 480, 960,
	}

	// QueueBuckets: arrival to first scheduled step. 1 ms (admitted at the
	// next step boundary) to 2 min (a saturated server); anything past the
	// first few buckets means the autoscaler should have acted.
	QueueBuckets = []float64{
		0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
	}

	// ReclaimBuckets: abort (client gone, stop string, stall, shutdown) to the
	// sequence's KV blocks being back in the pool. The design promises "before
	// the next step starts", so the range is 10 µs (loop idle) to one slow
	// step (1 s); mass above the step-duration buckets would be a bug.
	ReclaimBuckets = []float64{
		0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
		0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
	}

	// StepBuckets: one engine step (schedule + forward + sample). 0.5 ms (GPU
	// decode) to 5 s (a CPU prefill chunk of thousands of tokens).
	StepBuckets = []float64{
		0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
		0.15, 0.2, 0.3, 0.5, 1, 2, 5,
	}

	// BatchBuckets: tokens (batch rows) in one step, a count rather than
	// seconds. A decode step has one row per running sequence; a step with a
	// prefill chunk has up to --max-batch-tokens rows. Powers of two from 1
	// to 8192, so both the decode batch width and chunk sizes read directly.
	BatchBuckets = []float64{
		1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
	}
)
