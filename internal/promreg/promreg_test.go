package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRegister: a new name is registered; the same name again is the registry's collector, so
// both count in one series; the same name with another help is refused.
func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	newCounter := func(help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: help}, []string{"l"})
	}
	first := newCounter("h")
	if err := Register(reg, &first); err != nil {
		t.Fatal(err)
	}
	second := newCounter("h")
	if err := Register(reg, &second); err != nil || second != first {
		t.Fatalf("second registration: %v, same collector %t", err, second == first)
	}
	second.WithLabelValues("a").Inc()
	first.WithLabelValues("a").Inc()
	var m dto.Metric
	if err := first.WithLabelValues("a").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 2 {
		t.Fatalf("one series counts %v, want 2", got)
	}
	other := newCounter("other help")
	if err := Register(reg, &other); err == nil {
		t.Fatal("a collector of the same name with another help was accepted")
	}
}
