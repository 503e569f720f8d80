package proptest

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/proptest/storemodel"
)

// TestStoreMatchesModel checks the store against the naive model (see package storemodel).
func TestStoreMatchesModel(t *testing.T) {
	checks := 0
	rapid.Check(t, func(t *rapid.T) { checks += storemodel.Run(t) })
	t.Logf("%d responses and deliveries checked against the model", checks)
}
