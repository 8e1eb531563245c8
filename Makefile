# Netloom. The README's two commands: `make demo` and `make test`.
GO      ?= go
BIN     := bin/netloom
GOFLAGS ?=
export CGO_ENABLED := 1
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build deps agent web test test-short vet demo demo-eth bench fuzz proto gen clean package

all: build

deps:
	@scripts/install-deps.sh

# The MPI agent libraries (one per MPI ABI), when the agent is present.
agent: deps
	@if [ -f agent/Makefile ]; then $(MAKE) -C agent; fi

# The web UI, bundled into web/dist and embedded in the binary.
web: deps
	@if [ -f web/package.json ]; then cd web && npm ci --no-audit --no-fund --loglevel=error && npm run build; fi

build: deps agent web
	$(GO) build $(GOFLAGS) -o $(BIN) ./cmd/netloom

vet: deps
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) run ./internal/recordgen/cmd/recordgen -check

# Every test, against real ibsim fabrics, OpenSM, infiniband-diags, MPI and Chromium.
# MPICH's UCX probes every network device at MPI_Init; the Ethernet lab's
# tests (test/ethlab, test/e2e TestEth*) add and remove interfaces in the root
# namespace meanwhile, which fails a job being started elsewhere ("init_worker:
# No such device"). Every other test's ranks share one host: shared memory.
# The lab's own jobs set their transports on mpiexec's command line.
test: export UCX_TLS ?= self,sm
test: build vet
	$(GO) test $(GOFLAGS) -count=1 -timeout 45m ./...
	@if [ -f agent/Makefile ]; then $(MAKE) -C agent test; fi
	@if [ -f web/package.json ]; then cd web && npm test; fi

# Pure logic only: no simulated fabric is started.
test-short: deps
	$(GO) test -short -count=1 ./...

# Every decoder of outside input, 30 s each (FUZZTIME=5m for longer).
FUZZTIME ?= 30s
FUZZ = FuzzParseNetfile:./internal/fabric/sim/ FuzzDecode:./internal/store/codec/ \
  FuzzDecodeDatagram:./internal/ingest/ FuzzAccountFiles:./internal/auth/ FuzzParseSqueue:./internal/sched/slurm/ \
  FuzzParseSacct:./internal/sched/slurm/ FuzzExpandHostlist:./internal/sched/ FuzzParseMapping:./internal/analysis/ \
  FuzzDecodeProcess:./internal/store/codec/ FuzzDecodeCache:./internal/fabric/ib/ FuzzCheckActions:./internal/model/ FuzzDecodeSample:./internal/store/codec/ FuzzReadProfile:./internal/ingest/ \
  FuzzDecode:./internal/sflow/ FuzzRoCE:./internal/sflow/ FuzzDecodeConnections:./internal/ingest/
fuzz: deps
	set -e; for f in $(FUZZ); do $(GO) test -run '^$$' -fuzz "^$${f%%:*}$$" -fuzztime $(FUZZTIME) "$${f#*:}"; done

# Regenerate the Go code of the wire format (the agent runs protoc-c at build time).
proto:
	GOBIN=$(CURDIR)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go
	protoc -I proto --plugin=protoc-gen-go=bin/protoc-gen-go --go_out=. \
	  --go_opt=module=github.com/netloom/netloom proto/netloom/agent/v1/agent.proto

# Regenerate everything agent.proto declares: the Go wire code (proto) and
# the code of the per-process record from its annotations (internal/recordgen;
# docs/architecture.md, "How to add a field"). `make vet` and the recordgen
# tests fail when a committed generated file differs from what it writes.
gen: proto
	$(GO) run ./internal/recordgen/cmd/recordgen

# The .deb and .rpm (dist/), built by nfpm from deploy/nfpm.yaml: the
# binary, the agent libraries, the systemd unit, the default config in
# /etc/netloom/ and a netloom system user made at install.
NFPM            := github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.0
NETLOOM_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null | sed 's/^v//; s/^\([0-9a-f]\{7,\}\)/0.0.0+g\1/; s/-/./g' || echo 0.0.0)
package: build
	mkdir -p dist
	set -e; for p in deb rpm; do NETLOOM_VERSION=$(NETLOOM_VERSION) $(GO) run $(NFPM) package --config deploy/nfpm.yaml --packager $$p --target dist/; done

demo: build
	scripts/demo.sh

# The same on an Ethernet fabric of network namespaces whose links carry the
# job's bytes (as root; docs/ethernet.md).
demo-eth: build
	scripts/demo-eth.sh

bench: build
	bench/run.sh

clean:
	rm -rf bin web/dist dist
