// Package fuzz holds listwatch's go test -fuzz targets and their checked-in seed corpora
// (testdata/fuzz/<Target>/). `go test ./fuzz/` replays every corpus entry as a regression test;
// `go test -fuzz <Target> ./fuzz/` explores further.
package fuzz
