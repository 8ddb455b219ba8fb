// Package metricstest reads a /metrics handler the way Prometheus does, for
// tests of the packages that export or feed server/metrics.
package metricstest

import (
	"net/http"
	"net/http/httptest"
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
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return fams
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
