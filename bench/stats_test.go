package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 99, 7},
		{[]float64{4, 1, 3, 2}, 0, 1},
		{[]float64{4, 1, 3, 2}, 100, 4},
		{[]float64{4, 1, 3, 2}, 50, 2.5},                     // rank 1.5
		{[]float64{10, 20, 30, 40, 50}, 90, 46},              // rank 3.6
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 9.91}, // rank 8.91
	}
	for _, tc := range tests {
		if got := Percentile(tc.xs, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
		}
	}
}

// result builds a finished request: TTFT, then n−1 equal gaps.
func result(start time.Time, ttft, gap time.Duration, n int) Result {
	r := Result{Start: start, TTFT: ttft, OutputTokens: n, ContentEvents: n}
	for range n - 1 {
		r.ITL = append(r.ITL, gap)
	}
	r.E2E = ttft + time.Duration(n-1)*gap
	return r
}

func TestSummarizeGoodput(t *testing.T) {
	t0 := time.Unix(0, 0)
	rs := []Result{
		result(t0, 100*ms, 20*ms, 11),             // ends 300 ms; meets both
		result(t0.Add(100*ms), 300*ms, 10*ms, 21), // ends 600 ms; TTFT too slow
		result(t0.Add(200*ms), 50*ms, 60*ms, 6),   // ends 550 ms; TPOT too slow
		result(t0.Add(300*ms), 150*ms, 45*ms, 11), // ends 900 ms; meets both
		{Start: t0.Add(400 * ms), E2E: 10 * ms, Err: "HTTP 429: queue full", Status: 429},
		{Start: t0.Add(500 * ms), TTFT: 80 * ms, E2E: 100 * ms, ITL: []time.Duration{20 * ms}, OutputTokens: 2, ContentEvents: 2, Abandoned: true},
		{Start: t0.Add(600 * ms), TTFT: 90 * ms, E2E: 1400 * ms, OutputTokens: 1, ContentEvents: 1, Cut: true}, // ends 2 s
		{Start: t0.Add(700 * ms), E2E: 1300 * ms, Cut: true},                                                   // never started: no TTFT
	}
	s := Summarize(rs, SLO{TTFT: 200 * ms, TPOT: 50 * ms})
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if s.Requests != 8 || s.OK != 4 || s.Errors != 1 || s.Abandoned != 1 || s.Cut != 2 || s.Good != 2 {
		t.Errorf("counts %+v", s)
	}
	check("wall", s.WallS, 2.0)
	check("output tokens", float64(s.OutputTokens), 11+21+6+11+2+1)
	check("tokens/s", s.TokensPerS, 52.0/2)
	check("requests/s", s.RequestsPerS, 4.0/2)
	check("goodput/s", s.GoodputPerS, 2.0/2)
	check("good fraction", s.GoodFraction, 2.0/5) // abandoned and cut do not count
	check("e2e p50", s.E2E.P50, (0.35+0.5)/2)     // OK only: 0.3 0.35 0.5 0.6
	// TTFT of the OK, abandoned and started cut requests: 0.05 0.08 0.09 0.1 0.15 0.3.
	if s.TTFT.N != 6 {
		t.Errorf("TTFT n %d, want 6", s.TTFT.N)
	}
	check("ttft p50", s.TTFT.P50, 0.095)
	check("ttft p90", s.TTFT.P90, 0.15+0.5*0.15)
	check("ttft max", s.TTFT.Max, 0.3)
	// TPOT of OK requests: 0.01 0.02 0.045 0.06.
	check("tpot p50", s.TPOT.P50, 0.0325)
	// ITL: 10×0.02, 20×0.01, 5×0.06, 10×0.045, and the abandoned one's 0.02 = 46 gaps.
	if s.ITL.N != 46 {
		t.Errorf("ITL n %d, want 46", s.ITL.N)
	}
	check("itl p50", s.ITL.P50, 0.02)
	check("itl max", s.ITL.Max, 0.06)
	check("e2e max", s.E2E.Max, 0.6)
	if len(s.FirstErrors) != 1 || !strings.Contains(s.FirstErrors[0], "429") {
		t.Errorf("FirstErrors %q", s.FirstErrors)
	}
}

func TestSLOZeroLimitsOnlyNeedOK(t *testing.T) {
	r := result(time.Unix(0, 0), time.Hour, time.Hour, 3)
	if !(SLO{}).Met(&r) {
		t.Error("an OK request must meet an empty SLO")
	}
	r.Err = "x"
	if (SLO{}).Met(&r) {
		t.Error("a failed request met the SLO")
	}
}
