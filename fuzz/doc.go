// Package fuzz holds listwatch's go test -fuzz targets and their checked-in seed corpora
// (testdata/fuzz/<Target>/). `go test ./fuzz/` replays every seed and corpus entry as a regression
// test; `go test -fuzz <Target> ./fuzz/` explores further.
//
// # What each target holds
//
//   - FuzzStoreOps: for any sequence of store operations the fuzzer's bytes choose, every answer
//     and every watch stream of store.Store is the naive model's (package proptest/storemodel,
//     whose doc lists the invariants; the same property as proptest's TestStoreMatchesModel).
//   - FuzzListQuery: httpwatch.ParseListOptions, for any query, resource path name and WatchList
//     gate, keeps what the apiserver's parsing promises (k8s.io/apiserver
//     pkg/endpoints/handlers/get.go listOpts: the meta.k8s.io/v1 parameter codec, apimachinery's
//     pkg/apis/meta/internalversion/defaults.go SetListOptionsDefaults and validation/validation.go
//     ValidateListOptions). A refusal is an *apierrors.StatusError, 400 BadRequest or 422 Invalid
//     on meta.k8s.io ListOptions, with a message. Accepted options obey ValidateListOptions (on a
//     watch, sendInitialEvents only with resourceVersionMatch NotOlderThan and resourceVersionMatch
//     only with sendInitialEvents and no continue; on a list, resourceVersionMatch only Exact or
//     NotOlderThan and only with a resourceVersion and no continue, and never sendInitialEvents;
//     sendInitialEvents never with WatchList off); a watch from "" or "0" that set neither
//     sendInitialEvents nor resourceVersionMatch was defaulted to a watch-list when WatchList is
//     on; field selectors name only the resource's field labels (metadata.name and
//     metadata.namespace for the ConfigMaps fuzzed); a path name is pinned by a metadata.name
//     selector; and the options, encoded back as client-go encodes them, parse to the same options.
//   - FuzzWatchDecoder: watchclient.Decoder (which accepts what k8s.io/client-go's
//     rest/watch/decoder.go Decode accepts) never panics on any bytes; it ends with io.EOF,
//     io.ErrUnexpectedEOF or an error wrapping ErrInvalidFrame, and repeats that error on the next
//     Decode; it returns only frames of a known event type whose object is a JSON object; and those
//     frames, written again with watchclient.AppendFrame (one per line), decode to the same frames.
//
// The seeds in each Fuzz function and the corpus files are the regression tests: a change that
// breaks one of these properties on them fails `go test ./fuzz/`.
package fuzz
