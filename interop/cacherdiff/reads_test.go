package cacherdiff

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/apis/example"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/interop/internal/cachepair"
)

// describeError is an error as a client sees it: an API status with its code, reason, message,
// details and Retry-After; a storage error with its code, key and resourceVersion; else its type and
// text.
func describeError(err error) string {
	if err == nil {
		return "no error"
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		var b strings.Builder
		fmt.Fprintf(&b, "status %d %s %q", s.Code, s.Reason, s.Message)
		if d := s.Details; d != nil {
			fmt.Fprintf(&b, " details{name=%q group=%q kind=%q retryAfter=%d", d.Name, d.Group, d.Kind, d.RetryAfterSeconds)
			for _, c := range d.Causes {
				fmt.Fprintf(&b, " cause{%s %q %q}", c.Type, c.Message, c.Field)
			}
			b.WriteString("}")
		}
		return b.String()
	}
	if se, ok := err.(*k8sstorage.StorageError); ok {
		return fmt.Sprintf("storage error code=%d key=%s rv=%d: %v", se.Code, se.Key, se.ResourceVersion, err)
	}
	return fmt.Sprintf("%T: %v", err, err)
}

// describeList is a list's metadata and items, one a line, for diffs.
func describeList(l *example.PodList) string {
	var b strings.Builder
	rem := "unset"
	if l.RemainingItemCount != nil {
		rem = strconv.FormatInt(*l.RemainingItemCount, 10)
	}
	fmt.Fprintf(&b, "resourceVersion=%s continue=%q remainingItemCount=%s, %d items:", l.ResourceVersion, l.Continue, rem, len(l.Items))
	for _, p := range l.Items {
		fmt.Fprintf(&b, "\n  %s/%s rv=%s labels=%v node=%q phase=%s", p.Namespace, p.Name, p.ResourceVersion, p.Labels, p.Spec.NodeName, p.Status.Phase)
	}
	return b.String()
}

// predicate is a random selection predicate, with the trigger's index field set when the field
// selector pins spec.nodeName, as the pod registry's MatchPod sets it
// (pkg/registry/core/pod/strategy.go).
func (r *runner) predicate() (k8sstorage.SelectionPredicate, string) {
	ls, err := labels.Parse(pick(r.Rng, labelSels))
	if err != nil {
		r.T.Fatal(err)
	}
	fs, err := fields.ParseSelector(pick(r.Rng, fieldSelFns)(r))
	if err != nil {
		r.T.Fatal(err)
	}
	p := k8sstorage.SelectionPredicate{Label: ls, Field: fs, GetAttrs: cachepair.PodAttrs}
	if _, ok := fs.RequiresExactMatch("spec.nodeName"); ok {
		p.IndexFields = []string{"spec.nodeName"}
	}
	return p, fmt.Sprintf("labels=%q fields=%q", ls.String(), fs.String())
}

// key is a random key: the resource, a namespace (both recursive) or one object (not recursive).
func (r *runner) key() (string, bool) {
	switch r.Rng.IntN(4) {
	case 0, 1:
		return cachepair.ResourcePrefix, true
	case 2:
		return cachepair.ResourcePrefix + r.namespace() + "/", true
	default:
		return podKey(r.namespace(), pick(r.Rng, podNames)), false
	}
}

// revision is a random resourceVersion to read or watch from: unset, "0", the current one, one in
// the history, one below the caches' list or the compaction, a future one (rarely: the caches wait
// 3 s for it), or not a number. future says it is a future one.
func (r *runner) revision() (rv string, future bool) {
	switch n := r.Rng.IntN(20); {
	case n < 4:
		return "", false
	case n < 8:
		return "0", false
	case n < 11:
		return strconv.FormatInt(r.h.Rev, 10), false
	case n < 16:
		return strconv.FormatInt(1+r.Rng.Int64N(r.h.Rev), 10), false
	case n < 17:
		if r.compactRev > 1 {
			return strconv.FormatInt(1+r.Rng.Int64N(r.compactRev), 10), false
		}
		return strconv.FormatInt(1+r.Rng.Int64N(r.listRV), 10), false
	case n < 19 && r.Future():
		return strconv.FormatInt(r.h.Rev+1+r.Rng.Int64N(3), 10), true
	case n < 19:
		return strconv.FormatInt(r.h.Rev, 10), false
	default:
		return "x1", false
	}
}

func (r *runner) match() metav1.ResourceVersionMatch {
	switch n := r.Rng.IntN(20); {
	case n < 10:
		return ""
	case n < 14:
		return metav1.ResourceVersionMatchNotOlderThan
	case n < 19:
		return metav1.ResourceVersionMatchExact
	default:
		return "Newest"
	}
}

// Sync brings both caches to etcd's current revision with a consistent list of everything, which
// is compared as any list: afterwards reads of any staleness see the same state in both.
func (r *runner) Sync() {
	r.T.Helper()
	opts := k8sstorage.ListOptions{Recursive: true, Predicate: k8sstorage.Everything}
	r.compareList("sync: consistent list of "+cachepair.ResourcePrefix, cachepair.ResourcePrefix, opts, 0)
}

// list sends both caches the same random list and follows its continue tokens for a few pages.
func (r *runner) list() {
	r.T.Helper()
	r.Sync()
	key, recursive := r.key()
	pred, sel := r.predicate()
	rv, _ := r.revision()
	match := r.match()
	switch r.Rng.IntN(4) {
	case 0:
		pred.Limit = 1
	case 1:
		pred.Limit = int64(2 + r.Rng.IntN(4))
	}
	opts := k8sstorage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: match, Predicate: pred, Recursive: recursive}
	what := fmt.Sprintf("list of %s recursive=%t rv=%q match=%q limit=%d %s", key, recursive, rv, match, pred.Limit, sel)
	r.compareList(what, key, opts, 3)
}

// compareList sends both caches the list, compares the answers and, while both return the same
// continue token, asks for up to pages further pages (sometimes with a resourceVersion, which is
// refused).
func (r *runner) compareList(what, key string, opts k8sstorage.ListOptions, pages int) {
	r.T.Helper()
	for page := 0; ; page++ {
		var lists [2]*example.PodList
		var errs [2]error
		for i, c := range r.caches {
			lists[i] = &example.PodList{}
			errs[i] = c.Storage.GetList(r.ctx, key, opts, lists[i])
		}
		if page == 0 {
			r.stats.lists++
		} else {
			r.stats.pages++
		}
		if !r.sameList(what, lists, errs) || errs[0] != nil || lists[0].Continue == "" || page >= pages || r.Rng.IntN(4) == 0 {
			return
		}
		opts.Predicate.Continue = lists[0].Continue
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
		if r.Rng.IntN(8) == 0 {
			opts.ResourceVersion = strconv.FormatInt(r.h.Rev, 10)
		}
		what = fmt.Sprintf("%s, page %d (rv=%q)", what, page+2, opts.ResourceVersion)
	}
}

func (r *runner) sameList(what string, lists [2]*example.PodList, errs [2]error) bool {
	r.T.Helper()
	if errs[0] != nil || errs[1] != nil {
		a, b := describeError(errs[0]), describeError(errs[1])
		if a != b {
			r.Failf("%s:\nupstream:  %s\nlistwatch: %s", what, a, b)
			return false
		}
		return true
	}
	if !apiequality.Semantic.DeepEqual(lists[0], lists[1]) {
		r.Failf("%s: the lists differ (-upstream +listwatch):\n%s\nobjects: %s", what,
			cmp.Diff(describeList(lists[0]), describeList(lists[1])), cmp.Diff(lists[0], lists[1]))
		return false
	}
	return true
}

// get sends both caches the same random get.
func (r *runner) get() {
	r.T.Helper()
	r.Sync()
	key := podKey(r.namespace(), pick(r.Rng, podNames))
	rv, _ := r.revision()
	opts := k8sstorage.GetOptions{ResourceVersion: rv, IgnoreNotFound: r.Rng.IntN(3) == 0}
	what := fmt.Sprintf("get of %s rv=%q ignoreNotFound=%t", key, rv, opts.IgnoreNotFound)
	var pods [2]*example.Pod
	var errs [2]error
	for i, c := range r.caches {
		pods[i] = &example.Pod{}
		errs[i] = c.Storage.Get(context.WithoutCancel(r.ctx), key, opts, pods[i])
	}
	r.stats.gets++
	if a, b := describeError(errs[0]), describeError(errs[1]); a != b {
		r.Failf("%s:\nupstream:  %s\nlistwatch: %s", what, a, b)
		return
	}
	if errs[0] == nil && !apiequality.Semantic.DeepEqual(pods[0], pods[1]) {
		r.Failf("%s: the objects differ (-upstream +listwatch):\n%s", what, cmp.Diff(pods[0], pods[1]))
	}
}
