// Package metricstest reads a /metrics handler the way Prometheus does, for
// tests of the packages that export or feed server/metrics.
package metricstest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is a parsed exposition, by family name.
type Families map[string]*dto.MetricFamily

// Scrape GETs /metrics from h and parses the text exposition, as Prometheus would.
func Scrape(t testing.TB, h http.Handler) Families {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return Read(t, rec.Body)
}

// Value returns the first series of name whose labels include labels, given
// as name, value pairs (none: any series): a gauge's or counter's value, a
// histogram's sample count.
func (fams Families) Value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("%s: labels %q are not name, value pairs", name, labels)
	}
	f, ok := fams[name]
	if !ok {
		t.Fatalf("family %s missing", name)
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("%s: no series with labels %q", name, labels)
	return 0
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		if !hasLabel(m, pairs[i], pairs[i+1]) {
			return false
		}
	}
	return true
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name && lp.GetValue() == value {
			return true
		}
	}
	return false
}

// CompareFamilies lists how the families of got whose names start with
// prefix differ from want's in name, type, HELP text and label names, one
// line each; "" when they agree. Values are not compared.
func CompareFamilies(want, got Families, prefix string) string {
	var diffs []string
	for name, w := range want {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		g, ok := got[name]
		switch {
		case !ok:
			diffs = append(diffs, name+": missing")
		case g.GetType() != w.GetType():
			diffs = append(diffs, fmt.Sprintf("%s: type %v, want %v", name, g.GetType(), w.GetType()))
		case g.GetHelp() != w.GetHelp():
			diffs = append(diffs, fmt.Sprintf("%s: HELP %q, want %q", name, g.GetHelp(), w.GetHelp()))
		case !slices.Equal(LabelNames(g), LabelNames(w)):
			diffs = append(diffs, fmt.Sprintf("%s: labels %q, want %q", name, LabelNames(g), LabelNames(w)))
		}
	}
	for name := range got {
		if _, ok := want[name]; strings.HasPrefix(name, prefix) && !ok {
			diffs = append(diffs, name+": not in the reference")
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "\n")
}

// LabelNames is the sorted union of a family's label names.
func LabelNames(f *dto.MetricFamily) []string {
	var names []string
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			names = append(names, lp.GetName())
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Read parses a text exposition from r.
func Read(t testing.TB, r io.Reader) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return fams
}
