# dlock: make test runs everything CI runs; make demo shows the lock at work.
GO      ?= go
GOFLAGS ?=
BENCHTIME ?= 3s

.PHONY: all test test-short lint bench demo deps chaos

all: test

deps:
	@./scripts/ensure-deps redis zookeeper postgres mariadb etcd curator redispy node-redlock prometheus pushgateway
	@# etcd 3.6 for the etcdlock tests, built from its Go modules once per machine (about 2 minutes)
	$(GO) test -count=1 -run '^TestIntegrationBuildEtcd$$' ./internal/servers

## test: gofmt check, go vet, and every test (real servers) under -race.
## -p 4 -parallel 4: packages and tests that run side by side mostly wait on servers and timers,
## so twice as many as the CPUs keeps both cores busy; -timeout well above
## the slowest package, so a slow machine fails a test, not the whole run.
## The bench and interop modules' tests run side by side, after.
## TESTPKGS names the slowest packages first (a fresh clone alone, -p 4:
## chaos 236s, redislock 211s, zklock 205s, pglock 190s, cmd/dlock 163s,
## mysqllock 157s, redlock 133s, etcdlock 122s; then fence, dlockotel and
## internal/servers, 28-39s), then ./... for the rest. go test starts the
## packages' tests in the order named, each holding one of -p's slots to
## its end: in ./...'s alphabetical order zklock, redislock and redlock
## started last, minutes in, and the run waited minutes on them alone.
TESTFLAGS ?= -p 4 -parallel 4 -timeout 25m
TESTPKGS ?= ./chaos ./redislock ./zklock ./pglock ./cmd/dlock ./mysqllock ./redlock ./etcdlock ./fence ./dlockotel ./internal/servers ./...
test: deps lint
	$(GO) test -race -count=1 $(TESTFLAGS) $(TESTPKGS)
	cd bench && $(GO) test -count=1 ./... & bench=$$!; \
	  (cd interop && $(GO) test -race -count=1 ./...); interop=$$?; \
	  wait $$bench && exit $$interop

## test-short: unit tests only, no servers
test-short:
	$(GO) test -short -count=1 ./...
	cd bench && $(GO) test -short -count=1 ./...
	cd interop && $(GO) test -short -count=1 ./...

## lint: gofmt, go vet and govulncheck, for the library and the bench module
lint:
	@out=$$(gofmt -l . ); if [ -n "$$out" ]; then echo "gofmt wants to change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd interop && $(GO) vet ./...
	@./scripts/vulncheck


## bench: dlock against the raw Redis floor and peer libraries, in one run
bench: deps
	cd bench && $(GO) run ./cmd/lockbench -duration $(BENCHTIME)

## demo: start a local redis-server and watch workers contend for one lock
demo:
	@./scripts/ensure-deps redis
	@echo "make demo: compiling dlock (the first build compiles its dependencies and can take a few minutes)" >&2
	$(GO) run ./cmd/dlock demo

## chaos: the long chaos run behind docs/SAFETY.md: every backend for CHAOSTIME, with a timeline
CHAOSTIME ?= 10m
chaos: deps
	$(GO) build -o bin/dlock ./cmd/dlock
	./bin/dlock chaos --duration $(CHAOSTIME) --timeline chaos-timeline.html
