package proptest

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/proptest/storemodel"
)

// TestStoreMatchesModel checks the store against the naive model (see package storemodel), with
// the machine driving the store's periodic work.
func TestStoreMatchesModel(t *testing.T) {
	checks := 0
	rapid.Check(t, func(t *rapid.T) { checks += storemodel.Run(t) })
	t.Logf("%d responses and deliveries checked against the model", checks)
}

// TestStoreMatchesModelDriven is TestStoreMatchesModel with the store's own goroutine doing its
// periodic work alongside the machine's requests.
func TestStoreMatchesModelDriven(t *testing.T) {
	checks := 0
	rapid.Check(t, func(t *rapid.T) { checks += storemodel.RunDriven(t) })
	t.Logf("%d responses and deliveries checked against the model", checks)
}
