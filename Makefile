# skiff — `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
export PATH := /usr/local/go/bin:$(PATH)

KUBE_VERSION := $(shell sed -n 's|^\tk8s.io/api v0\.\([0-9]*\)\.\([0-9]*\)$$|1.\1.\2|p' go.mod)
SKIFF_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LAB ?= lab
LAB_NODES ?= 2
LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=v$(KUBE_VERSION)+skiff \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(KUBE_VERSION))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) \
	-X k8s.io/component-base/version.gitCommit=$(shell git rev-parse HEAD 2>/dev/null) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/component-base/version.buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ) \
	-X github.com/skiff-sh/skiff/internal/version.Version=$(SKIFF_VERSION)
BIN := bin/skiff
export SKIFF_BIN := $(CURDIR)/$(BIN)

.PHONY: help deps build run test unit e2e bench scale scale-upstream kwok kube-proxy coredns conformance conformance-smoke conformance-bin npapi-conformance generate lint docs verify clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

deps: ## install what building and testing need (apt packages, Go modules); idempotent
	@hack/install-deps.sh

build: ## build bin/skiff, bin/skiff-cni and the pause and netutil images (bin/images)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/skiff
	$(GO) build -trimpath -ldflags '-s -w' -o bin/skiff-cni ./cmd/skiff-cni
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/pause ./cmd/pause
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/netutil ./cmd/netutil
	./$(BIN) images build --pause bin/pause --netutil bin/netutil --out bin/images

run: deps build ## bring up the lab: a master, $(LAB_NODES) workers and an FRR top-of-rack router on this machine
	@if ./$(BIN) lab status --name $(LAB) >/dev/null 2>&1; then \
		echo "skiff: lab $(LAB) is already up (skiff lab down --name $(LAB) to remove it)"; ./$(BIN) lab status --name $(LAB); \
	else ./$(BIN) lab up --name $(LAB) --nodes $(LAB_NODES) --tor frr; fi

test: deps build kwok ## run every test: unit, fuzz seeds, end-to-end with the real kubectl and etcd, the 100-node scale smoke, and the conformance smoke
	@hack/test.sh

unit: ## unit tests only (no root, no network)
	$(GO) test -short ./...

e2e: deps build ## end-to-end suites under tests/e2e
	$(GO) test -count=1 -timeout 30m ./tests/e2e/...

bench: deps build kube-proxy coredns ## benchmarks: API and watch latency, HA writes (three embedded etcd members) against one member, the DNS zone's work per change, custom resources beside ConfigMaps, webhook and CEL admission overhead, idle RSS, the garbage collector's target, scheduler throughput, pod start-up, CPU requests under contention, the Job controller against the ReplicaSet controller, agent RSS, BGP propagation, NetworkPolicy in a lab, Services side by side with kube-proxy
	$(GO) test -run '^$$' -bench '^BenchmarkAPI$$' -benchtime 500x -timeout 20m ./tests/bench/... | tee bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkAPIAuthorization$$' -benchtime 1000x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkCustomResource$$' -benchtime 500x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkAdmission$$' -benchtime 500x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkIdle$$' -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkHAWrite$$' -benchtime 300x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkGCTarget$$' -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench Schedule -benchtime 1x -timeout 20m ./controlplane/scheduler/core | tee -a bench.out
	$(GO) test -run '^$$' -bench 'PodChange|HeadlessReplace' -benchmem -timeout 20m ./agent/clusterdns | tee -a bench.out
	$(GO) test -run '^$$' -bench SchedulerThroughAPI -benchtime 1x -timeout 40m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench PodStartup -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkAgentIdle$$' -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench CPUContention -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench JobController -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkBGPRoutePropagation$$' -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench '^BenchmarkBGPRoutePropagationDual$$' -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench 'ProgramServices|ProgramChange' -benchtime 3x -timeout 20m ./dataplane/loader/ | tee -a bench.out
	$(GO) test -run '^$$' -bench Connect -benchtime 2000x -timeout 20m ./dataplane/loader/ | tee -a bench.out
	$(GO) test -run '^$$' -bench PolicyVerdict -benchtime 3x -timeout 20m ./dataplane/netpol/ | tee -a bench.out
	$(GO) test -run '^$$' -bench FlowEventsFlood -benchtime 1x -timeout 20m ./dataplane/netpol/ | tee -a bench.out
	$(GO) test -run '^$$' -bench Compile -benchtime 5x -timeout 20m ./dataplane/policy/ | tee -a bench.out
	$(GO) test -run '^$$' -bench NetworkPolicy -benchtime 1x -timeout 40m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench FlowEvents$$ -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench ClusterDNS -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench LoadBalancer -benchtime 1x -timeout 20m ./tests/bench/... | tee -a bench.out
	$(GO) test -run '^$$' -bench ServiceConnect -benchtime 1x -timeout 60m ./tests/bench/... | tee -a bench.out

# Upstream kube-proxy for BenchmarkServiceConnect's side-by-side run, built in its own throwaway
# module (tests/bench/kubeproxy) so skiff's go.mod never holds k8s.io/kubernetes; CI never builds
# it. The first build fetches ~2.5 GB of modules and takes ~5 minutes.
KUBE_PROXY_VERSION := v1.37.2
kube-proxy: tests/bench/kubeproxy/kube-proxy ## upstream kube-proxy (for make bench only)
tests/bench/kubeproxy/kube-proxy: tests/bench/kubeproxy/go.mod tests/bench/kubeproxy/go.sum
	cd tests/bench/kubeproxy && $(GO) build -o kube-proxy -ldflags "-s -w \
		-X k8s.io/component-base/version.gitVersion=$(KUBE_PROXY_VERSION) \
		-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
		k8s.io/kubernetes/cmd/kube-proxy

# kwok (sigs.k8s.io/kwok), the simulated nodes of the scale harness (tests/scale), built in its
# own throwaway module; its stages (fast node start-up, heartbeats with Leases, fast pods) are
# kwok's own files from the module, gathered into one configuration. ~2 minutes the first time.
KWOK_DIR := tests/scale/kwok
kwok: $(KWOK_DIR)/kwok $(KWOK_DIR)/stages.yaml ## kwok and its stages (for make scale and the 100-node smoke in make test)
$(KWOK_DIR)/kwok: $(KWOK_DIR)/go.mod $(KWOK_DIR)/go.sum
	cd $(KWOK_DIR) && $(GO) build -o kwok -ldflags '-s -w' sigs.k8s.io/kwok/cmd/kwok
$(KWOK_DIR)/stages.yaml: $(KWOK_DIR)/go.mod $(KWOK_DIR)/go.sum
	cd $(KWOK_DIR) && src="$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage" && \
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do \
		echo '---'; cat "$$src/$$f"; done > stages.yaml.tmp && mv stages.yaml.tmp stages.yaml

# Upstream's control plane for the scale harness's side-by-side run: kube-apiserver,
# kube-scheduler and kube-controller-manager at $(KUBE_PROXY_VERSION) and etcd at the version
# skiff embeds, in their own throwaway module (tests/scale/upstream); CI never builds them.
UPSTREAM_DIR := tests/scale/upstream
UPSTREAM_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_PROXY_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37
scale-upstream: $(UPSTREAM_DIR)/bin/kube-apiserver $(UPSTREAM_DIR)/bin/kube-scheduler $(UPSTREAM_DIR)/bin/kube-controller-manager $(UPSTREAM_DIR)/bin/etcd ## upstream's control plane (for make scale)
$(UPSTREAM_DIR)/bin/kube-%: $(UPSTREAM_DIR)/go.mod $(UPSTREAM_DIR)/go.sum
	cd $(UPSTREAM_DIR) && $(GO) build -o bin/kube-$* -ldflags "$(UPSTREAM_LDFLAGS)" k8s.io/kubernetes/cmd/kube-$*
$(UPSTREAM_DIR)/bin/etcd: $(UPSTREAM_DIR)/go.mod $(UPSTREAM_DIR)/go.sum $(UPSTREAM_DIR)/etcd/main.go
	cd $(UPSTREAM_DIR) && $(GO) build -o bin/etcd -ldflags '-s -w' ./etcd

# The scale harness at every size, skiff beside upstream; results land in tests/scale/results.
SCALE_NODES ?= 100,1000,5000
# Pods per node (upstream's load test: 30). 5,000 nodes at 30 need ~21 GiB for skiff's server
# alone; on a 24 GB machine run that size with SCALE_PODS=10.
SCALE_PODS ?= 30
SCALE_CHURN ?= 2m
# The real agent's run (a lab node among kwok's): the lab's server shares the machine with its
# agents, kwok and FRR, so it runs a smaller cluster than the server-alone sizes.
SCALE_AGENT_NODES ?= 1000
SCALE_AGENT_PODS ?= 10
scale: deps build kwok scale-upstream ## the scale harness: kwok nodes, ClusterLoader2-like load, skiff beside upstream at $(SCALE_NODES) nodes, then a real agent among $(SCALE_AGENT_NODES)
	$(GO) test -count=1 -run '^TestScale$$' -timeout 6h -v ./tests/scale/ -args -scale.nodes $(SCALE_NODES) -scale.pods-per-node $(SCALE_PODS) \
		-scale.upstream -scale.pause 60s -scale.churn $(SCALE_CHURN) -scale.settle 60s -scale.out $(CURDIR)/tests/scale/results
	$(GO) test -count=1 -run '^TestAgentScale$$' -timeout 2h -v ./tests/scale/ -args -scale.agent-nodes $(SCALE_AGENT_NODES) \
		-scale.agent-pods-per-node $(SCALE_AGENT_PODS) -scale.agent-routes 5000 -scale.agent-rounds 40 -scale.out $(CURDIR)/tests/scale/results

# Upstream CoreDNS (its kubernetes plugin only) for BenchmarkClusterDNS's side-by-side run, in
# its own throwaway module (tests/bench/coredns) as kube-proxy; CI never builds it.
coredns: tests/bench/coredns/coredns ## upstream CoreDNS (for make bench only)
tests/bench/coredns/coredns: tests/bench/coredns/go.mod tests/bench/coredns/go.sum tests/bench/coredns/main.go
	cd tests/bench/coredns && $(GO) build -o coredns -ldflags "-s -w" .

# Upstream's conformance suite (tests/conformance): the e2e test binary, the ginkgo CLI and
# agnhost, built in their own throwaway module (tests/conformance/e2e) so skiff's go.mod never
# holds k8s.io/kubernetes; the binaries are git-ignored. The first build fetches ~2.5 GB of
# modules and takes ~10 minutes on 2 cores; later builds are cached.
E2E_VERSION := v1.37.2
E2E_DIR := tests/conformance/e2e
E2E_BIN := $(E2E_DIR)/bin
E2E_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(E2E_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37
PROCS ?= 6
FOCUS ?= \[Conformance\]
SKIP ?=
REPEAT ?= 1
IP_FAMILY ?= ipv4
OUT ?= tests/conformance
BASE ?=
conformance-bin: $(E2E_BIN)/e2e.test $(E2E_BIN)/ginkgo $(E2E_BIN)/agnhost $(E2E_BIN)/sample-apiserver $(E2E_BIN)/nnp $(E2E_BIN)/busybox ## upstream's e2e.test, ginkgo, agnhost, sample-apiserver, nonewprivs' nnp and BusyBox (for make conformance)
# e2epatch: fixes of bugs in upstream's e2e framework itself (each names its upstream issue),
# in a hard-linked copy of the pinned module that e2e.test is built from (-modfile); the
# module cache is not changed, and agnhost and the harness read the pristine module.
$(E2E_BIN)/e2e.test: $(E2E_DIR)/go.mod $(E2E_DIR)/go.sum tests/conformance/e2epatch/main.go
	cd $(E2E_DIR) && $(GO) mod download k8s.io/kubernetes
	$(GO) run ./tests/conformance/e2epatch -e2e-dir $(E2E_DIR) -kube-src "$$(cd $(E2E_DIR) && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)" -out $(E2E_BIN)/patched
	cd $(E2E_DIR) && $(GO) test -c -modfile bin/patched/go.mod -o bin/e2e.test -ldflags "$(E2E_LDFLAGS)" k8s.io/kubernetes/test/e2e
$(E2E_BIN)/ginkgo: $(E2E_DIR)/go.mod $(E2E_DIR)/go.sum
	cd $(E2E_DIR) && $(GO) build -o bin/ginkgo github.com/onsi/ginkgo/v2/ginkgo
$(E2E_BIN)/agnhost: $(E2E_DIR)/go.mod $(E2E_DIR)/go.sum
	cd $(E2E_DIR) && CGO_ENABLED=0 $(GO) build -o bin/agnhost -ldflags '-s -w' k8s.io/kubernetes/test/images/agnhost
$(E2E_BIN)/sample-apiserver: $(E2E_DIR)/go.mod $(E2E_DIR)/go.sum
	cd $(E2E_DIR) && CGO_ENABLED=0 $(GO) build -o bin/sample-apiserver -ldflags '-s -w' k8s.io/sample-apiserver
$(E2E_BIN)/nnp: $(E2E_DIR)/go.mod $(E2E_DIR)/go.sum
	cd $(E2E_DIR) && CGO_ENABLED=0 $(GO) build -o bin/nnp -ldflags '-s -w' k8s.io/kubernetes/test/images/nonewprivs
$(E2E_BIN)/busybox: hack/build-busybox.sh
	hack/build-busybox.sh $@

CONFORMANCE_RUN = $(GO) run ./tests/conformance/harness --bin-dir $(E2E_BIN) \
	--kube-src "$$(cd $(E2E_DIR) && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)" --e2e-version $(E2E_VERSION)

conformance: deps build conformance-bin ## upstream's [Conformance] specs against a lab (FOCUS=, SKIP=, PROCS=, REPEAT= runs in a row, IP_FAMILY=ipv4|dual|ipv6, OUT=, BASE= an earlier results.json for the specs not selected); writes OUT/RESULTS.md (default tests/conformance)
	$(CONFORMANCE_RUN) --focus '$(FOCUS)' --skip '$(SKIP)' --procs $(PROCS) --repeat $(REPEAT) --ip-family $(IP_FAMILY) --out $(OUT) $(if $(BASE),--base $(BASE))

conformance-smoke: deps build conformance-bin ## the conformance specs in tests/conformance/smoke.txt (fast, passing today); fails unless all pass
	$(CONFORMANCE_RUN) --smoke tests/conformance/smoke.txt --procs 4 --lab csmoke --work $(E2E_DIR)/smoke

# The ClusterNetworkPolicy conformance suite of sigs.k8s.io/network-policy-api, as its README
# runs it (go test ./conformance -run TestConformanceProfiles), in a copy of that module (its
# own go.mod; never skiff's) against a lab with the suite's agnhost image imported.
# The standard profile only: the CRD skiff installs is the standard channel, without the
# experimental fields (destinationNamedPort, nodes peers) the extended tests use.
NPAPI_WORK := tests/conformance/npapi/work
NPAPI_FEATURES ?= ClusterNetworkPolicy
npapi-conformance: deps build conformance-bin ## network-policy-api's ClusterNetworkPolicy conformance profile against a lab (NPAPI_FEATURES=); writes tests/conformance/npapi/report.yaml and run.log
	$(CONFORMANCE_RUN) --lab npapi --work $(E2E_DIR)/npapi --images registry.k8s.io/e2e-test-images/agnhost:2.45
	rm -rf $(NPAPI_WORK) && mkdir -p $(NPAPI_WORK) && cp -r "$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/network-policy-api)/." $(NPAPI_WORK) && chmod -R u+w $(NPAPI_WORK)
	$(GO) run ./tests/conformance/npapi/sctpless $(NPAPI_WORK)
	cd $(NPAPI_WORK) && KUBECONFIG=/var/lib/skiff/lab/npapi/admin.kubeconfig GOFLAGS=-mod=mod $(GO) test ./conformance -run TestConformanceProfiles -count=1 -timeout 60m -v -args \
		-conformance-profiles=ClusterNetworkPolicy -supported-features=$(NPAPI_FEATURES) -organization=skiff-sh -project=skiff \
		-url=https://github.com/skiff-sh/skiff -version=$$(git rev-parse --short HEAD) -contact=skiff \
		-additional-info=https://github.com/skiff-sh/skiff/blob/main/docs/conformance.md \
		-report-output=$(CURDIR)/tests/conformance/npapi/report.yaml > $(CURDIR)/tests/conformance/npapi/run.log 2>&1; \
		status=$$?; $(CURDIR)/bin/skiff lab down --name npapi; grep -E '^(---|===|ok|FAIL|PASS)' $(CURDIR)/tests/conformance/npapi/run.log | tail -80; exit $$status

generate: ## regenerate committed generated code (OpenAPI definitions)
	$(GO) generate ./...

lint: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

docs: ## regenerate the generated reference pages (docs/reference/commands, from the CLI)
	$(GO) run ./cmd/skiff gen-docs docs/reference/commands

verify: generate docs ## regenerate and fail if anything generated (code, reference docs) or go.mod is stale
	$(GO) mod tidy
	git diff --exit-code

clean: ## remove build output
	rm -rf bin bench.out
