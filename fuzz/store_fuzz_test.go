package fuzz

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/proptest/storemodel"
)

// FuzzStoreOps lets the fuzzer's bytes choose a sequence of store operations (rapid decodes them
// into puts, deletes, txns, ranges, compactions, leases, watches and drains) and checks every
// response and every watch stream against the naive model, as TestStoreMatchesModel does.
// `go test ./fuzz/` runs the checked-in corpus; `go test -fuzz FuzzStoreOps ./fuzz/` explores.
func FuzzStoreOps(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) { storemodel.Run(t) }))
}
