// Package promreg registers Prometheus collectors so that several servers in one process (the
// chains of parallel tests, two apiservers side by side) may register the same metrics with one
// registry: the second registration of a name re-uses the collector the registry already holds.
//
// # API
//
//   - Register(reg, &collector) registers collector, or makes it the registry's collector of the
//     same name and type.
//
// # Invariants
//
//   - A collector of a new name is registered; one whose name the registry holds with the same
//     type is replaced by the registry's, so that both users count in one series; one whose name
//     it holds with another type or help is the registry's error (TestRegister).
package promreg
