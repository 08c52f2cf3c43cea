# podlab: every stage of "kubectl run" done for real, one subcommand per stage.
#
#   make demo    install and build only what `podlab up` runs (the Debian
#                packages that build runc and the demo images, runc, podlab,
#                the demo images), then run the whole chain offline with
#                `podlab up`: API server -> store -> scheduler -> kubelet ->
#                pull -> unpack -> spec -> runc -> Running; it prints each of
#                its 4 stages with the time it took
#   make test    install what is missing (every Debian package and tool,
#                kubectl, etcd, crictl and crane among them), build, and run
#                every test (and every shell block of every lesson)
#   make bench   measure podlab against crane, tar, umoci, bare runc and raw
#                bbolt, the scheduler and pod start-up, and the API server
#                over HTTPS (README: Performance)
#   make tools   the tools the lessons, tests and benchmarks run and the demo
#                does not: kubectl, etcd and etcdctl, crictl, crane (each is a
#                target of its own: make kubectl, make etcd, ...)
#   make kube-apiserver  the real kube-apiserver, which only make bench runs
#                (beside podlab's API server; about 7 minutes to build)
#
# Everything podlab makes lives under STATE_DIR: $PODLAB_STATE_DIR when it
# is set (the state directory podlab itself uses), else /var/lib/podlab as
# root; `make images STATE_DIR=DIR` still wins. The tools it needs are
# installed into ./bin.

SHELL        := /bin/bash
GO           ?= go
BIN          := $(CURDIR)/bin
UID          := $(shell id -u)
STATE_DIR    ?= $(or $(PODLAB_STATE_DIR),$(if $(filter 0,$(UID)),/var/lib/podlab,$(or $(XDG_DATA_HOME),$(HOME)/.local/share)/podlab))
RUNC_VERSION := v1.5.3
CRANE_VERSION:= v0.22.1
# kubectl's release follows podlab's k8s.io modules (k8s.io/api v0.37.2 is Kubernetes v1.37.2).
KUBECTL_VERSION := v1.37.2
# etcd's release is tools/etcd/go.mod's (go.etcd.io/etcd/server/v3).
ETCD_VERSION := 3.6.16
# crictl, the CRI's own client (cri-tools follows Kubernetes' minor release).
CRICTL_VERSION := 1.37.0
KUBECTL_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBECTL_VERSION) -X $(p).gitMajor=1 \
	-X $(p).gitMinor=$(word 2,$(subst ., ,$(KUBECTL_VERSION))) -X $(p).gitTreeState=clean)
# The Debian packages `make demo` needs: gcc, libc6-dev, pkg-config and
# libseccomp-dev build runc with seccomp (cgo) and the pause image's static
# program (gcc -static); apt-get and dpkg-deb, which fetch and unpack nginx's
# packages for its image, are part of every Debian.
DEMO_APT_PACKAGES := libseccomp-dev pkg-config gcc libc6-dev
# What the tests, the lessons (nsenter, ps, python3, jq in lesson 18, capsh in
# lesson 09, file in lesson 19) and the benchmarks add, beyond Debian 12's
# minimal install (coreutils, grep, sed, mawk, findutils, diffutils, tar, gzip,
# mount) and Go, git, make and gcc;
# make deps (make test, make bench) installs both lists.
TEST_APT_PACKAGES := pigz umoci iproute2 curl ca-certificates time util-linux procps python3 openssl containernetworking-plugins iptables \
	containerd runsc crun jq libcap2-bin file

PODLAB := $(BIN)/podlab --state-dir $(STATE_DIR)
export PODLAB_DEB_CACHE := $(STATE_DIR)/cache/debs
# where the tests find the demo images `make images` built
export PODLAB_DEMO_IMAGES := $(STATE_DIR)/demo-images
export PATH := $(BIN):$(PATH)

.PHONY: all deps apt-demo apt tools runc crane kubectl etcd crictl kube-apiserver build images demo demo-run test bench clean

all: build

# apt-install: install those of the Debian packages $(1) that are missing (as root).
define apt-install
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "Debian packages: all installed ($(strip $(1)))"; exit 0; fi; \
	if [ "$(UID)" != 0 ]; then echo "missing Debian packages: $$missing (run 'sudo make $@')"; exit 1; fi; \
	echo "installing Debian packages: $$missing"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null
endef

## deps: install what is missing for everything (the tests, the lessons, the
## benchmarks): every Debian package (containerd, runsc and crun among them),
## runc with the 2025 CVE fixes, and the tools (kubectl, etcd, etcdctl,
## crictl, crane)
deps: apt runc tools

## apt-demo: the Debian packages make demo needs; apt: all of them
apt-demo:
	$(call apt-install,$(DEMO_APT_PACKAGES))
apt:
	$(call apt-install,$(DEMO_APT_PACKAGES) $(TEST_APT_PACKAGES))

## tools: what the lessons, tests and benchmarks run beside podlab and runc
tools: kubectl etcd crictl crane

## runc: runc $(RUNC_VERSION) with seccomp into bin/ (cgo: needs make apt-demo's packages)
runc:
	@if $(BIN)/runc --version 2>/dev/null | grep -q "runc version $(RUNC_VERSION:v%=%)" && \
	    $(BIN)/runc --version 2>/dev/null | grep -q libseccomp; then \
		echo "runc $(RUNC_VERSION): in bin/ already"; \
	else \
		echo "building runc $(RUNC_VERSION) with seccomp into bin/ (fixes CVE-2025-31133, CVE-2025-52565, CVE-2025-52881)"; \
		GOBIN=$(BIN) $(GO) install -tags seccomp github.com/opencontainers/runc@$(RUNC_VERSION); \
	fi

## crane: for make bench (podlab's pull against go-containerregistry's)
crane:
	@if [ ! -x $(BIN)/crane ]; then \
		echo "building crane $(CRANE_VERSION) into bin/ (for make bench)"; \
		GOBIN=$(BIN) $(GO) install github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION); \
	fi

## kubectl: the real kubectl at podlab's Kubernetes release (the lessons, the tests)
kubectl:
	@if ! $(BIN)/kubectl version --client 2>/dev/null | grep -qx "Client Version: $(KUBECTL_VERSION)"; then \
		echo "building kubectl $(KUBECTL_VERSION) from k8s.io/kubectl into bin/ (tools/kubectl; about 3.5 minutes on 2 cores)"; \
		cd tools/kubectl && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBECTL_LDFLAGS)" -o $(BIN)/kubectl .; \
	fi

## etcd: etcd and etcdctl (podlab etcd, podlab apiserver --etcd-servers, make test's second pass)
etcd:
	@if ! $(BIN)/etcd --version 2>/dev/null | grep -qx "etcd Version: $(ETCD_VERSION)" || \
	    ! $(BIN)/etcdctl version 2>/dev/null | grep -qx "etcdctl version: $(ETCD_VERSION)"; then \
		echo "building etcd and etcdctl $(ETCD_VERSION) into bin/ (tools/etcd; about a minute on 2 cores; Debian's 3.4 is too old for Kubernetes v1.37)"; \
		cd tools/etcd && CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/etcd . && \
		CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/etcdctl go.etcd.io/etcd/etcdctl/v3; \
	fi

## kube-apiserver: the real kube-apiserver of the lab's release, from
## k8s.io/kubernetes (tools/kube-apiserver), for make bench only: the
## benchmarks run it on its own etcd beside podlab's API server
## (BenchmarkNetworkList). Its version is kubectl's, set as kubectl's is.
kube-apiserver:
	@if ! $(BIN)/kube-apiserver --version 2>/dev/null | grep -qx "Kubernetes $(KUBECTL_VERSION)"; then \
		echo "building kube-apiserver $(KUBECTL_VERSION) from k8s.io/kubernetes into bin/ (tools/kube-apiserver; about 7 minutes on 2 cores)"; \
		cd tools/kube-apiserver && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBECTL_LDFLAGS)" -o $(BIN)/kube-apiserver .; \
	fi

## crictl: the CRI's own client (podlab runtime, the lessons from 05 on)
crictl:
	@if ! $(BIN)/crictl --version 2>/dev/null | grep -qx "crictl version $(CRICTL_VERSION)"; then \
		echo "building crictl $(CRICTL_VERSION) into bin/ (sigs.k8s.io/cri-tools; about 30 seconds)"; \
		GOBIN=$(BIN) CGO_ENABLED=0 $(GO) install -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$(CRICTL_VERSION)" sigs.k8s.io/cri-tools/cmd/crictl@v$(CRICTL_VERSION); \
	fi

## build: bin/podlab and bin/podlab-runc (the runtime's per-container part,
## the shim and a foreground run, small so that it starts fast: see
## cmd/podlab-runc), static (no dynamic loader at start), in one go build
## (one package graph, both links at once); urfave_cli_no_docs drops the CLI
## library's man-page generator, which every start would pay for
build:
	CGO_ENABLED=0 $(GO) build -tags urfave_cli_no_docs -o $(BIN)/ ./cmd/podlab ./cmd/podlab-runc

## images: build the demo images (hello, nginx from Debian's packages) into an
## OCI layout; CGO_ENABLED=0 as make build, so that it reuses what that compiled
images: build
	CGO_ENABLED=0 $(GO) run ./images/build --out $(STATE_DIR)/demo-images --cache $(PODLAB_DEB_CACHE)

## demo: what `podlab up` runs, and only that, in 4 stages, each printed with
## the time it took: the Debian packages the demo needs (DEMO_APT_PACKAGES);
## runc and podlab, built side by side (make -j2); the demo images (nginx's
## Debian packages fetched by apt-get download, cached under STATE_DIR); the
## chain, offline. Each stage is its own make (the targets above), so make -n
## demo shows what each would run (the + runs this recipe under -n).
SUBMAKE := $(MAKE) --no-print-directory
demo:
	+@t0=$$(date +%s); t=$$t0; \
	stage() { printf '\n[%s/4] %s\n' "$$1" "$$2"; }; \
	took() { now=$$(date +%s); printf '[%s/4] done in %ss (%ss since make demo started)\n' "$$1" $$((now-t)) $$((now-t0)); t=$$now; }; \
	stage 1 "Debian packages: $(DEMO_APT_PACKAGES)" && $(SUBMAKE) apt-demo && took 1 && \
	stage 2 "runc $(RUNC_VERSION) and podlab, built side by side" && $(SUBMAKE) -j2 runc build && took 2 && \
	stage 3 "the demo images (nginx from Debian's packages, hello, pause) into $(STATE_DIR)/demo-images" && \
		$(SUBMAKE) -o build images && took 3 && \
	stage 4 "podlab up: the chain, offline" && $(SUBMAKE) demo-run && took 4

## demo-run: podlab up, the chain's 16 steps of a pod done for real, offline:
## it serves $(STATE_DIR)/demo-images from an in-process registry
demo-run:
	$(PODLAB) up

## test: everything, with the real runc (as root) and the demo images; then
## the API server suites again on a real etcd (bin/etcd); the store's etcd
## tests (steps/store/etcd_test.go) run in the first pass. The lessons
## (lessons/lessons_test.go: all in order, and each alone after lesson 01
## and the lessons it needs, two sessions at a time) take longer than go
## test's default 10 minutes: about 30 on a loaded 2-core machine
ETCD_SUITES := ./steps/apiserver/ ./steps/apiserver/rest/
test: deps build images
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 60m ./...
	PODLAB_TEST_STORE=etcd $(GO) test -count=1 $(ETCD_SUITES)

## bench: podlab against crane, tar, umoci and bare runc, side by side in one run;
## the API server over HTTPS (issue 13: creates, watch delivery, kubectl get,
## the scheduler and pod start-up over the network; issue 14: a node dies,
## from its taint to its Deployment's pods Running elsewhere; a cluster of
## machines, 50 replicas over 5 joined nodes Running with IPs in < 20 s and
## pod-to-pod HTTP across nodes); then the store and the
## REST layer's own benchmarks, creates on a real etcd against bbolt among
## them (issue 14: etcd >= 0.5x bbolt); the largest legal image config
## (issue 15: pull vs go-containerregistry, its env merge vs containerd's;
## podlab-runc run vs bare runc run and vs containerd's ctr run --rm; 125
## layers into snapshots vs tar -xzf); then the snapshotter's (issue 15:
## unpack into snapshots <= 0.8x tar -xzf, a second rootfs <= 50 ms, an empty
## layer < 1 ms). Each prints ns/op and its custom metrics
## (creates/s, p99-ms, pods/s...); a missed target fails the run, after
## every package ran. BENCH=Network narrows to matching names.
BENCH ?= .
bench: deps build kube-apiserver
	@st=0; \
	$(GO) test -count=1 -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 30m ./internal/bench/ || st=1; \
	$(GO) test -count=1 -run '^$$' -bench '$(BENCH)' -benchtime 3000x -timeout 30m ./steps/apiserver/rest/ || st=1; \
	$(GO) test -count=1 -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 10m ./steps/pull/ ./steps/spec/ || st=1; \
	$(GO) test -count=1 -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 30m ./steps/unpack/ || st=1; \
	exit $$st

clean:
	rm -rf $(BIN)
