# temper-train — build, test, benchmark.
#
#   make demo       set up what is missing, build, and train a profile for the built-in
#                   demo workload: observe, analyze, synthesize, then refine it against
#                   stock CFS with the workload's latency benchmark for ~2 minutes,
#                   ending with the report (root: BPF and scheduling)
#   make test       everything CI runs, on a fresh machine too: set up what is
#                   missing, build etcd + kube-apiserver and fetch the sched_ext
#                   kernel into the cache (once), gofmt, go mod tidy, make
#                   portable, vet, all
#                   tests (as root: BPF, cgroups, real servers), a short fuzz
#                   run and make vmtest. .ci/run calls exactly this.
#   make portable   the trace model, analyze, synthesize, profiles and machine
#                   build for macOS; synthesize links no cilium/ebpf, no gonum/plot
#   make fuzz       longer fuzz runs (FUZZTIME per target, default 2m)
#   make bench      decode benchmarks with ratios against their targets
#   make stats-rates  refine's decision rule: every rate test (false keeps,
#                   power, harm, guard vetoes, α-spending, coverage)
#   make planted    refine end to end on a planted-effect benchmark (root, CFS):
#                   RUNS seeded runs per scenario (default 60), one table,
#                   rates held to issue 23's targets (refine/planted)
#   make vmtest     the sched_ext scheduler in a qemu VM with a Debian sid kernel
#                   (downloaded once into $TEMPER_CACHE, default
#                   ~/.cache/temper-train; a few minutes)
#   make vmtest-refine  refine and train through sched_ext in that VM: the
#                   demo, SIGKILL → revert → resume, Redis (about 16 min)
#   make generate   regenerate observe/perfettopb (needs protoc) and the bpf2go
#                   output in bpf/ (needs clang-19, libbpf-dev)

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/temper-train
FUZZTIME  ?= 2m
SHORTFUZZ ?= 10s
EXAMPLE   := testdata/traces/workload-tracefs.txt.gz

.PHONY: all build demo setup testdeps test portable fuzz bench generate vmtest clean

all: build

# A static binary: it runs on nodes as it is and inside the scheduler test VM.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/temper-train

setup:
	scripts/setup.sh

DEMO := bin/demo

DEMO_TIME ?= 2m

# The demo's benchmark reads the workload's own request-latency histogram
# (scripts/demo-bench.sh); one CPU spinner in a BestEffort cgroup stands for
# a neighbour. On a noisy machine refine refuses with the numbers rather
# than guess; the report is written either way.
demo: setup build
	@[ "$$(id -u)" -eq 0 ] || { echo "make demo traces with BPF and needs root: sudo make demo" >&2; exit 1; }
	gcc -O2 -Wall -pthread -o bin/workload testdata/workload/workload.c
	rm -rf $(DEMO) $(DEMO).stats
	$(BIN) train --id demo-workload --out $(DEMO) --duration 5s --backend cfs \
		--bench 'scripts/demo-bench.sh $(DEMO).stats 1' --adapter jsonl --metric p50_ms --min-effect 20% \
		--background 1 --max-time $(DEMO_TIME) --warmup 500ms \
		-- bin/workload --dir bin --stats $(DEMO).stats \
		|| { [ -f $(DEMO)/refine/REPORT.md ] && echo "refine stopped early (the error above); $(DEMO)/refine/REPORT.md says what it measured"; }
	$(BIN) lint $(DEMO)/profiles/demo-workload/*.toml
	@echo "$(DEMO)/observe/trace.pftrace opens in https://ui.perfetto.dev; $(DEMO)/analysis.json, wake-graph.dot (and .svg) and plots/ hold the analysis; $(DEMO)/profiles the synthesized profile; $(DEMO)/refine/REPORT.md the measurements against stock CFS, ledger.jsonl every trial"

# What the tests need beyond Debian packages, built or downloaded once into
# the cache: etcd + kube-apiserver for target's pod tests (~8 min
# cold) and the sched_ext kernel with its BTF for scheduler/scx and vmtest.
testdeps: setup
	@scripts/kube-bins.sh >/dev/null
	@scripts/vm-kernel.sh --btf >/dev/null

test: setup testdeps
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		[ -z "$$unformatted" ] || { echo "gofmt needed: $$unformatted" >&2; exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy" >&2; exit 1; }
	@$(MAKE) --no-print-directory portable
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	FUZZTIME=$(SHORTFUZZ) GO=$(GO) scripts/fuzz.sh
	@$(MAKE) --no-print-directory vmtest

# The trace model and the stages that read it build on any OS (only
# observe/record, the BPF tracer, is Linux-only), and synthesize links
# neither the BPF library nor the plotting one.
PORTABLE := ./observe ./analyze ./synthesize ./profiles ./machine
portable:
	@out=$$(GOOS=darwin $(GO) build $(PORTABLE) 2>&1) || { echo "GOOS=darwin go build of the portable packages fails ($$(echo "$$out" | grep -v '^#' | head -1)): keep Linux-only code out of $(PORTABLE) (the tracer belongs in observe/record)" >&2; exit 1; }
	@linked=$$($(GO) list -deps ./synthesize | grep -oE '^(github.com/cilium/ebpf|gonum.org/v1/plot)' | sort -u | tr '\n' ' '); \
		[ -z "$$linked" ] || { echo "synthesize links $${linked% }: keep BPF in observe/record and plots in chart" >&2; exit 1; }

fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

bench:
	@$(MAKE) --no-print-directory build
	scripts/bench.sh

# The sched_ext backend attached for real: this machine's kernel has no
# sched_ext, so scripts/vmtest.sh boots one that has under qemu and runs the
# scheduler/scx VM tests and the apply/observe/analyze checks inside it.
vmtest:
	GO=$(GO) scripts/vmtest.sh

# refine and train through the embedded sched_ext scheduler in the VM: the
# demo workload, SIGKILL → revert → resume, Redis (about 16 min under TCG;
# the REPORT.md files and ledgers land in /tmp/temper-vmtest-out).
.PHONY: vmtest-refine
vmtest-refine:
	VMTEST_BASE=0 VMTEST_REFINE=1 GO=$(GO) scripts/vmtest.sh

generate:
	$(GO) build -o bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	cd observe/perfettopb && protoc --plugin=protoc-gen-go=../../bin/protoc-gen-go \
		--go_out=. --go_opt=paths=source_relative perfetto.proto
	$(GO) generate ./bpf

clean:
	rm -rf bin

.PHONY: stats-rates
# Every test that measures an error rate of refine's decisions, each able to
# fail (docs/refine.md, "What the rate tests catch"): the final's false keeps
# at no effect and at the minimum effect, its power, harm at one level,
# guard vetoes, errors from none, α-spending across looks, the stratified
# interval's coverage, the U test's size; and the whole engine's false keeps
# and power.
RATE_TESTS = ^(TestFalseAcceptRate|TestPower|TestErrorsGuardFromNone|TestNonInferiorN|TestFinalFalseKeepRate|TestFinalPowerRate|TestFinalHarmRate|TestFinalGuardRate|TestFinalErrorsRate|TestSpendMonteCarlo|TestStratifiedCoverage|TestUTestSize|TestEquivalenceFalseClaimRate|TestEquivalencePower)$$
stats-rates:
	$(GO) test -count=1 -run '$(RATE_TESTS)' -v ./refine ./refine/stats

# refine on the real CFS backend and a benchmark whose answer is known
# (refine/planted): RUNS per scenario; 60 because 0 false keeps in 59 is
# the fewest runs whose upper 95% bound is within 5%.
RUNS ?= 60
MIN_EFFECT ?= 20%
.PHONY: planted
planted:
	PLANTED_RUNS=$(RUNS) PLANTED_MIN_EFFECT=$(MIN_EFFECT) PLANTED_RATES=1 $(GO) test -count=1 -timeout 0 -run '^TestPlanted$$' -v ./refine/planted
