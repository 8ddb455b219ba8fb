package bench

import (
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0..100) of xs by linear
// interpolation between the closest ranks (NumPy's default): for sorted x of
// length n, rank r = p/100·(n−1), result x[⌊r⌋] + (r−⌊r⌋)·(x[⌊r⌋+1] − x[⌊r⌋]).
// Zero for an empty slice. xs is not modified.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	r := p / 100 * float64(len(s)-1)
	lo := int(r)
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (r-float64(lo))*(s[lo+1]-s[lo])
}

// Dist is a distribution summarized in seconds.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// NewDist summarizes xs (seconds).
func NewDist(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Dist{
		N: len(s), Mean: sum / float64(len(s)),
		P50: percentileSorted(s, 50), P90: percentileSorted(s, 90), P99: percentileSorted(s, 99),
		Max: s[len(s)-1],
	}
}

// SLO is the service-level objective a request must meet to count towards
// goodput. A zero limit is not checked.
type SLO struct {
	TTFT time.Duration `json:"ttft"`
	TPOT time.Duration `json:"tpot"`
}

// Met reports whether r finished without error within the limits. An
// abandoned request never meets it: nobody was there to be served.
func (o SLO) Met(r *Result) bool {
	if !r.OK() {
		return false
	}
	if o.TTFT > 0 && r.TTFT > o.TTFT {
		return false
	}
	if o.TPOT > 0 && r.TPOT() > o.TPOT {
		return false
	}
	return true
}

// Summary is the arithmetic of one run over its results.
type Summary struct {
	Requests  int     `json:"requests"`  // sent
	OK        int     `json:"ok"`        // finished without error
	Errors    int     `json:"errors"`    // failed (status, in-band error, broken stream)
	Abandoned int     `json:"abandoned"` // hung up on purpose
	Cut       int     `json:"cut"`       // still running at the run's deadline
	WallS     float64 `json:"wall_s"`    // first send to last end

	OutputTokens int     `json:"output_tokens"` // all requests, abandoned included
	PromptTokens int     `json:"prompt_tokens"`
	TokensPerS   float64 `json:"output_tokens_per_s"` // OutputTokens / WallS
	RequestsPerS float64 `json:"requests_per_s"`      // OK / WallS

	// TTFT and ITL cover every request that did not fail (OK, cut at the
	// deadline, or abandoned) and saw a first token, so a level whose long
	// requests outlast the cap still reports how soon they started. TPOT and
	// E2E cover only the requests that ran to their end (OK), so a hang-up
	// after 8 tokens does not shorten them.
	TTFT Dist `json:"ttft_s"`
	TPOT Dist `json:"tpot_s"`
	ITL  Dist `json:"itl_s"`
	E2E  Dist `json:"e2e_s"`

	SLO          SLO     `json:"slo"`
	Good         int     `json:"good"`          // OK requests meeting SLO
	GoodputPerS  float64 `json:"goodput_per_s"` // Good / WallS
	GoodFraction float64 `json:"good_fraction"` // Good / (Requests − Abandoned − Cut)

	FirstErrors []string `json:"first_errors,omitempty"` // up to 5 distinct messages
}

// Summarize computes a Summary. Wall time runs from the earliest Start to
// the latest Start+E2E.
func Summarize(rs []Result, slo SLO) Summary {
	s, _, _ := summarize(rs, slo)
	return s
}

// summarize is Summarize that also returns the TTFT and inter-token gap
// samples (seconds) its TTFT and ITL distributions were computed from.
func summarize(rs []Result, slo SLO) (s Summary, ttft, itl []float64) {
	s = Summary{Requests: len(rs), SLO: slo}
	var tpot, e2e []float64
	var first, last time.Time
	for i := range rs {
		r := &rs[i]
		if !r.Start.IsZero() {
			if first.IsZero() || r.Start.Before(first) {
				first = r.Start
			}
			if end := r.Start.Add(r.E2E); end.After(last) {
				last = end
			}
		}
		s.OutputTokens += r.OutputTokens
		s.PromptTokens += r.PromptTokens
		if r.Err == "" && r.ContentEvents > 0 {
			ttft = append(ttft, r.TTFT.Seconds())
			for _, g := range r.ITL {
				itl = append(itl, g.Seconds())
			}
		}
		switch {
		case r.Abandoned:
			s.Abandoned++
			continue
		case r.Cut:
			s.Cut++
			continue
		case r.Err != "":
			s.Errors++
			if len(s.FirstErrors) < 5 && !slices.Contains(s.FirstErrors, r.Err) {
				s.FirstErrors = append(s.FirstErrors, r.Err)
			}
			continue
		}
		s.OK++
		if slo.Met(r) {
			s.Good++
		}
		e2e = append(e2e, r.E2E.Seconds())
		if t := r.TPOT(); t > 0 {
			tpot = append(tpot, t.Seconds())
		}
	}
	s.TTFT, s.TPOT, s.ITL, s.E2E = NewDist(ttft), NewDist(tpot), NewDist(itl), NewDist(e2e)
	if !first.IsZero() {
		s.WallS = last.Sub(first).Seconds()
	}
	if s.WallS > 0 {
		s.TokensPerS = float64(s.OutputTokens) / s.WallS
		s.RequestsPerS = float64(s.OK) / s.WallS
		s.GoodputPerS = float64(s.Good) / s.WallS
	}
	if n := s.Requests - s.Abandoned - s.Cut; n > 0 {
		s.GoodFraction = float64(s.Good) / float64(n)
	}
	return s, ttft, itl
}
