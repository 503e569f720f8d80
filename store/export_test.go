package store

// SetAfterStep makes s call f after each step of its periodic work, with the store's lock free. Set
// it before the store does any periodic work.
func SetAfterStep(s *Store, f func()) { s.afterStep = f }
