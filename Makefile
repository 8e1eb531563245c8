# Netloom. The README's two commands: `make demo` and `make test`.
GO      ?= go
BIN     := bin/netloom
GOFLAGS ?=
export CGO_ENABLED := 1

.PHONY: all build deps test test-short vet demo bench fuzz clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(GO) build $(GOFLAGS) -o $(BIN) ./cmd/netloom

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

vet: deps
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Every test, against real ibsim fabrics, OpenSM and infiniband-diags.
test: build vet
	$(GO) test $(GOFLAGS) -count=1 -timeout 20m ./...

# Pure logic only: no simulated fabric is started.
test-short: deps
	$(GO) test -short -count=1 ./...

# Short fuzzing of every decoder of outside input.
fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzParseNetfile -fuzztime 30s ./internal/fabric/sim/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 30s ./internal/store/sqlite/

demo: build
	scripts/demo.sh

bench: build
	bench/run.sh

clean:
	rm -rf bin
