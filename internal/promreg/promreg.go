package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers *c with reg or, when reg already holds a collector of the same description
// and type, makes *c that collector.
func Register[T prometheus.Collector](reg prometheus.Registerer, c *T) error {
	err := reg.Register(*c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			*c = existing
			return nil
		}
	}
	return err
}
