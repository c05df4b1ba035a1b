# temper-train — build, test, benchmark.
#
#   make demo       set up what is missing, build, and run on the built-in example trace
#   make test       vet + all tests (BPF/tracefs tests need root) + a short fuzz run
#   make fuzz       longer fuzz runs (FUZZTIME per target, default 2m)
#   make bench      decode benchmarks with ratios against their targets
#   make generate   regenerate observe/perfettopb (needs protoc) and the bpf2go
#                   output in bpf/ (needs clang-19, libbpf-dev)

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/temper-train
FUZZTIME  ?= 2m
SHORTFUZZ ?= 10s
EXAMPLE   := testdata/traces/workload-tracefs.txt.gz

.PHONY: all build demo setup test fuzz bench generate clean

all: build

# A static binary: it runs on nodes as it is and inside the scheduler test VM.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/temper-train

setup:
	scripts/setup.sh

demo: setup build
	$(BIN) trace summary --top 15 $(EXAMPLE)
	$(BIN) trace convert $(EXAMPLE) bin/example.pftrace
	@echo "bin/example.pftrace opens in https://ui.perfetto.dev"

test:
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	$(GO) test -run '^$$' -fuzz '^FuzzPerfettoReader$$' -fuzztime $(SHORTFUZZ) ./observe
	$(GO) test -run '^$$' -fuzz '^FuzzTextReader$$' -fuzztime $(SHORTFUZZ) ./observe

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzPerfettoReader$$' -fuzztime $(FUZZTIME) ./observe
	$(GO) test -run '^$$' -fuzz '^FuzzTextReader$$' -fuzztime $(FUZZTIME) ./observe

bench:
	scripts/bench.sh

generate:
	$(GO) build -o bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	cd observe/perfettopb && protoc --plugin=protoc-gen-go=../../bin/protoc-gen-go \
		--go_out=. --go_opt=paths=source_relative perfetto.proto
	$(GO) generate ./bpf

clean:
	rm -rf bin
