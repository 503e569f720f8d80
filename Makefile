# The one test command: every test of the root module and of the interop module, with the race detector.
GO ?= go

.PHONY: test test-root test-interop bench

test: test-root test-interop

test-root:
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) test -race -timeout 30m ./...

test-interop:
	cd interop && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test -race -timeout 30m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./store/ ./etcd3/ ./cache/ ./httpwatch/ ./listwatchtest/
