package runplan

import "math/rand/v2"

// Rand returns the generator of the role's index-th member of a run seeded by seed: its own
// stream, so that what one member draws does not depend on how the others are scheduled.
func Rand(seed, role uint64, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, role<<32|uint64(index)))
}

// Share returns client i's share of ops requests split evenly among clients, the first
// ops%clients clients sending one more; -1, no bound, when ops is 0.
func Share(ops int64, clients, i int) int64 {
	if ops <= 0 {
		return -1
	}
	share := ops / int64(clients)
	if int64(i) < ops%int64(clients) {
		share++
	}
	return share
}
