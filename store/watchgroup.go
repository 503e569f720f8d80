package store

import "slices"

// watcherSet is an unordered set of watchers kept as a slice for fast iteration; each watcher records its
// position in the one set of a group that holds it.
type watcherSet struct {
	list []*watcher
}

func (ws *watcherSet) add(w *watcher) {
	w.setPos = len(ws.list)
	ws.list = append(ws.list, w)
}

func (ws *watcherSet) remove(w *watcher) {
	last := ws.list[len(ws.list)-1]
	ws.list[w.setPos] = last
	last.setPos = w.setPos
	ws.list[len(ws.list)-1] = nil
	ws.list = ws.list[:len(ws.list)-1]
	w.setPos = -1
}

// watcherGroup indexes watchers by what they watch, as mvcc/watcher_group.go does with a key map and an
// interval tree. Single keys and prefixes (the common case: Kubernetes watches prefixes) are found by
// map lookups; other ranges are checked one by one.
type watcherGroup struct {
	all        []*watcher // every watcher, each knowing its position in groupPos
	keys       map[string]*watcherSet
	prefixes   map[string]*watcherSet
	prefixLens map[int]int // number of distinct prefixes of each length
	lens       []int       // the keys of prefixLens, ascending
	ranges     map[keyRange]*watcherSet
	cursor     int // where the next choose starts in all
}

func newWatcherGroup() *watcherGroup {
	return &watcherGroup{
		keys:       make(map[string]*watcherSet),
		prefixes:   make(map[string]*watcherSet),
		prefixLens: make(map[int]int),
		ranges:     make(map[keyRange]*watcherSet),
	}
}

func (g *watcherGroup) size() int { return len(g.all) }

func (g *watcherGroup) add(w *watcher) {
	w.groupPos = len(g.all)
	g.all = append(g.all, w)
	switch {
	case !w.kr.isRange:
		g.setFor(g.keys, w.kr.key).add(w)
	case w.kr.isPrefix():
		if g.prefixes[w.kr.key] == nil {
			if g.prefixLens[len(w.kr.key)]++; g.prefixLens[len(w.kr.key)] == 1 {
				g.updateLens()
			}
		}
		g.setFor(g.prefixes, w.kr.key).add(w)
	default:
		set := g.ranges[w.kr]
		if set == nil {
			set = &watcherSet{}
			g.ranges[w.kr] = set
		}
		set.add(w)
	}
}

func (g *watcherGroup) setFor(m map[string]*watcherSet, k string) *watcherSet {
	set := m[k]
	if set == nil {
		set = &watcherSet{}
		m[k] = set
	}
	return set
}

// choose returns up to n watchers of the group, starting where the previous choose stopped, so that
// successive calls take every watcher in turn.
func (g *watcherGroup) choose(n int) []*watcher {
	if len(g.all) <= n {
		g.cursor = 0
		return append([]*watcher(nil), g.all...)
	}
	start := g.cursor % len(g.all)
	out := make([]*watcher, 0, n)
	out = append(out, g.all[start:min(start+n, len(g.all))]...)
	out = append(out, g.all[:n-len(out)]...)
	g.cursor = (start + n) % len(g.all)
	return out
}

// has reports whether w is in the group.
func (g *watcherGroup) has(w *watcher) bool {
	return w.groupPos >= 0 && w.groupPos < len(g.all) && g.all[w.groupPos] == w
}

func (g *watcherGroup) updateLens() {
	g.lens = g.lens[:0]
	for l := range g.prefixLens {
		g.lens = append(g.lens, l)
	}
	slices.Sort(g.lens)
}

// remove deletes w from the group; it reports false if w was not in it.
func (g *watcherGroup) remove(w *watcher) bool {
	if !g.has(w) {
		return false
	}
	last := g.all[len(g.all)-1]
	g.all[w.groupPos] = last
	last.groupPos = w.groupPos
	g.all[len(g.all)-1] = nil
	g.all = g.all[:len(g.all)-1]
	w.groupPos = -1
	switch {
	case !w.kr.isRange:
		g.removeFrom(g.keys, w.kr.key, w)
	case w.kr.isPrefix():
		if g.removeFrom(g.prefixes, w.kr.key, w) {
			if g.prefixLens[len(w.kr.key)]--; g.prefixLens[len(w.kr.key)] == 0 {
				delete(g.prefixLens, len(w.kr.key))
				g.updateLens()
			}
		}
	default:
		set := g.ranges[w.kr]
		set.remove(w)
		if len(set.list) == 0 {
			delete(g.ranges, w.kr)
		}
	}
	return true
}

// removeFrom removes w from m[k] and reports whether that emptied the set.
func (g *watcherGroup) removeFrom(m map[string]*watcherSet, k string, w *watcher) bool {
	set := m[k]
	set.remove(w)
	if len(set.list) == 0 {
		delete(m, k)
		return true
	}
	return false
}

// forEach calls f for every watcher in the group that watches key.
func (g *watcherGroup) forEach(key string, f func(w *watcher)) {
	if set := g.keys[key]; set != nil {
		for _, w := range set.list {
			f(w)
		}
	}
	for _, l := range g.lens {
		if l > len(key) {
			break
		}
		if set := g.prefixes[key[:l]]; set != nil {
			for _, w := range set.list {
				f(w)
			}
		}
	}
	for kr, set := range g.ranges {
		if kr.contains(key) {
			for _, w := range set.list {
				f(w)
			}
		}
	}
}

// contains reports whether any watcher in the group watches key.
func (g *watcherGroup) contains(key string) bool {
	if g.keys[key] != nil {
		return true
	}
	for _, l := range g.lens {
		if l > len(key) {
			break
		}
		if g.prefixes[key[:l]] != nil {
			return true
		}
	}
	for kr := range g.ranges {
		if kr.contains(key) {
			return true
		}
	}
	return false
}
