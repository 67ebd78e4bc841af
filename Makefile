# flywheel — the one build entry.
#
#   make              build every tool into bin/
#   make deps         install missing Debian packages (apt-get; needs root)
#   make test         deps + build + C unit tests + bats suite
#   make check        test + ASan/UBSan unit tests + man lint + fuzz run
#   make demo         the main job on the embedded samples
#   make judge        a small judge distilled from a top judge (pipelines/judge.sh)
#   make judge-reward the judge as the reward of one pg iteration (pipelines/judge-reward.sh)
#   make learn-ablate the inner loop with and without teach, 3 seeds each
#   make teach-sweep  teach's weight chosen on the training split
#   make CUDA=1       also build kernels/cuda/ (needs nvcc, not a GPU)
#   make install PREFIX=/usr/local DESTDIR=
#   V=1               show the commands

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
DESTDIR    ?=
CC         ?= cc
CFLAGS     ?= -O2 -g
NVCC       ?= /usr/local/cuda/bin/nvcc
# Hopper code, plus PTX that the driver compiles for any other GPU from sm_75.
NVCCFLAGS  ?= -O2 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
CUDA_HOME  ?= /usr/local/cuda
PYTHON     ?= /usr/bin/python3
# the build's jobs in `make test` (the cores)
NPROC      := $(shell nproc 2>/dev/null || echo 1)
VERSION    := 0.1.0

# Debian packages the build, tests and demo need.  `make deps` installs the
# missing ones; keep this list the single place they are named.
DEB_PKGS := build-essential pkg-config libmsgpack-dev libzstd-dev zstd \
	libjansson-dev libgit2-dev libopenblas-dev libpcre2-dev libcurl4-openssl-dev \
	zlib1g-dev libssl-dev bubblewrap git universal-ctags bats bats-support bats-assert jq groff \
	clang libclang-rt-14-dev python3-torch python3-pytest python3-numpy gnuplot-nox \
	nodejs curl socat python3-scipy bc time
# bats runs the test files side by side through GNU parallel (tests/run)
DEB_PKGS += parallel
# train-step's data-parallel test (Open MPI's mpirun; the library is loaded at run time)
DEB_PKGS += mpi-default-bin
# serve's HTTP server (libmicrohttpd; the library is loaded at run time)
DEB_PKGS += libmicrohttpd-dev
# serve.bats drives serve with OpenAI's client for Node, which it installs
# from the npm registry into a cache folder with the npm that comes with
# nodejs (skipped when npm or the registry is missing; Debian's own npm
# package conflicts with a nodejs that bundles npm, so it is not named here)
# the loops beyond one machine: a single-node Slurm cluster in the tests
DEB_PKGS += slurm-wlm munge
# srun --mpi=pmix: Slurm's pmix plugin loads libpmix.so
DEB_PKGS += libpmix-dev

PC_PKGS := msgpack libzstd jansson libgit2 libpcre2-8 openblas libcurl zlib libcrypto
PC_CFLAGS := $(shell pkg-config --cflags $(PC_PKGS) 2>/dev/null)
PC_LIBS   := $(shell pkg-config --libs $(PC_PKGS) 2>/dev/null)
ifeq ($(strip $(PC_LIBS)),)
PC_LIBS := -lmsgpackc -lzstd -ljansson -lgit2 -lpcre2-8 -lopenblas -lcurl -lz -lcrypto
endif

FW_CPPFLAGS := -Ilib -Ikernels -D_GNU_SOURCE -DFW_VERSION='"$(VERSION)"' $(PC_CFLAGS)
FW_CFLAGS   := -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wshadow -pthread -MMD -MP
FW_LDLIBS   := $(PC_LIBS) -lm -lpthread

ifeq ($(CUDA),1)
FW_CPPFLAGS += -DFW_CUDA=1 -I$(CUDA_HOME)/include
FW_LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lnccl -lcublas -lcudart -lstdc++
endif

ifneq ($(V),1)
Q := @
msg = @printf '  %-6s %s\n' $(1) $(2);
else
Q :=
msg :=
endif

O ?= build
B ?= bin
# A CUDA build differs from a CPU one in kernels/dev.c (the device switch)
# and the kernels/cuda objects: those and the archive are named per
# flavour, and $(O)/.flavour (rewritten when it changes) relinks the tools.
FLAVOUR     := $(if $(filter 1,$(CUDA)),cuda,cpu)
FL_SUFFIX   := $(if $(filter 1,$(CUDA)),-cuda)
$(shell mkdir -p $(O); [ "$$(cat $(O)/.flavour 2>/dev/null)" = $(FLAVOUR) ] || echo $(FLAVOUR) > $(O)/.flavour)
LIB_SRCS    := $(wildcard lib/*/*.c) $(wildcard kernels/cpu/*.c)
CUDA_SRCS   := $(if $(filter 1,$(CUDA)),$(wildcard kernels/cuda/*.cu))
LIB_OBJS    := $(LIB_SRCS:%.c=$(O)/%.o) $(O)/kernels/dev$(FL_SUFFIX).o \
	       $(CUDA_SRCS:%.cu=$(O)/%.cu.o)
TOOL_SRCS   := $(wildcard tools/*.c)
TOOLS       := $(TOOL_SRCS:tools/%.c=$(B)/%)
UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
UNITS       := $(UNIT_SRCS:tests/unit/%.c=$(O)/tests/%)
FUZZ_SRCS   := $(wildcard tests/fuzz/fuzz_*.c)
GPU_SRCS    := $(wildcard tests/gpu/*.c)
LIBFW       := $(O)/libflywheel$(FL_SUFFIX).a
MANS        := $(wildcard man/*.[157])

.PHONY: all deps test check learn learn-ablate teach-sweep unit bats demo judge judge-reward install uninstall clean fuzz asan manlint \
	bench gpu-check outer-loop inner-loop eval status
.DEFAULT_GOAL := all

all: $(TOOLS)

$(O)/%.o: %.c
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(FW_CPPFLAGS) $(CPPFLAGS) $(FW_CFLAGS) $(CFLAGS) -c -o $@ $<

$(O)/kernels/dev-cuda.o: kernels/dev.c
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(FW_CPPFLAGS) $(CPPFLAGS) $(FW_CFLAGS) $(CFLAGS) -c -o $@ $<

$(O)/%.cu.o: %.cu
	$(call msg,NVCC,$<)
	@mkdir -p $(@D)
	$(Q)$(NVCC) $(NVCCFLAGS) -MMD -MP -Ilib -Ikernels -DFW_CUDA=1 -c -o $@ $<

$(LIBFW): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B)/%: $(O)/tools/%.o $(LIBFW) $(O)/.flavour
	$(call msg,LD,$@)
	@mkdir -p $(B)
	$(Q)$(CC) $(FW_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBFW) $(FW_LDLIBS) $(LDLIBS)

$(O)/tests/%: $(O)/tests/unit/%.o $(LIBFW) $(O)/.flavour
	$(call msg,LD,$@)
	$(Q)$(CC) $(FW_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBFW) $(FW_LDLIBS) $(LDLIBS)

$(O)/gpu/%: $(O)/tests/gpu/%.o $(LIBFW) $(O)/.flavour
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(FW_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBFW) $(FW_LDLIBS) $(LDLIBS)

unit: $(UNITS)

# ---- dependencies -------------------------------------------------------
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "deps: installing:$$missing"; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "deps: not root: run 'sudo apt-get install$$missing' (or 'sudo make deps')" >&2; exit 1; fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing

# ---- tests ---------------------------------------------------------------
# `make test` re-enters make after deps so pkg-config sees fresh packages.
test: deps
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) all unit
	$(Q)BIN_DIR=$(B) UNIT_DIR=$(O)/tests tests/run

check: deps
	$(Q)$(MAKE) --no-print-directory test
	$(Q)$(MAKE) --no-print-directory asan manlint gpu-emu fuzz learn learn-ablate teach-sweep judge-reward

# The demo's learning criterion (tests/slow/learning.bats,
# 5-7 minutes on 2 cores): too long for `make test`, which checks the
# criterion at reduced size (tests/demo.bats); and a model taught to call a
# tool, through serve and in process (tests/slow/agent-tools.bats, minutes).
learn: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BIN_DIR=$(B) tests/run tests/slow/learning.bats tests/slow/agent-tools.bats

# Does teach speed learning?  The demo's bootstrap, then its inner loop
# with and without teach, three training seeds each, at the demo's size
# (pipelines/ablate.sh): a table, $(LOOP)/ablate/ablate.json and
# ablate.png, after tests/slow/ablate.bats checks the script at a tiny
# size.  Part of `make check`, not of `make test`.
learn-ablate: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BIN_DIR=$(B) tests/run tests/slow/ablate.bats
	$(Q)FW_BIN=$(abspath $(B)) pipelines/ablate.sh $(LOOP)/ablate

# The weight of teach's term chosen on the training split alone: the
# demo's bootstrap, three iterations of its inner loop for each weight and
# for GRPO alone, each evaluated on training tasks (pipelines/teach-sweep.sh;
# $(LOOP)/teach-sweep/sweep.json).  Part of `make check`, not of `make test`.
teach-sweep: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)FW_BIN=$(abspath $(B)) pipelines/teach-sweep.sh $(LOOP)/teach-sweep

# Unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
asan: deps
	$(Q)$(MAKE) --no-print-directory O=build-asan CC=clang \
	  CFLAGS='-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined' \
	  LDFLAGS='-fsanitize=address,undefined' unit
	$(Q)ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 UNIT_DIR=build-asan/tests tests/run --unit-only

manlint:
	$(Q)fail=0; for m in $(MANS); do \
	  out=$$(groff -mdoc -ww -z $$m 2>&1); \
	  if [ -n "$$out" ]; then echo "$$m:"; echo "$$out"; fail=1; fi; \
	done; test $$fail = 0 && echo "manlint: $(words $(MANS)) pages clean"

FUZZ_TIME ?= 60
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build-fuzz/%)
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
# The library is built once with coverage instrumentation; each target links
# only the objects it needs from the archive.
# (Only the outer make has this rule: inside, $(LIBFW) is that archive.)
ifneq ($(O),build-fuzz/obj)
build-fuzz/obj/libflywheel.a: FORCE
	$(Q)$(MAKE) --no-print-directory O=build-fuzz/obj CC=clang CFLAGS='$(FUZZ_CFLAGS)' $@
endif
build-fuzz/%: tests/fuzz/%.c build-fuzz/obj/libflywheel.a
	$(call msg,FUZZ,$@)
	$(Q)clang $(FW_CPPFLAGS) -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
	  -o $@ $< build-fuzz/obj/libflywheel.a $(FW_LDLIBS)
.PHONY: FORCE
FORCE:
fuzz: $(FUZZ_BINS)
	$(Q)for f in $(FUZZ_BINS); do \
	  n=$$(basename $$f); mkdir -p build-fuzz/corpus-$$n; \
	  seeds=tests/fuzz/seeds/$$n; [ -d $$seeds ] || seeds=; \
	  echo "fuzz: $$n for $(FUZZ_TIME)s"; \
	  $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=0 -artifact_prefix=build-fuzz/$$n- \
	    build-fuzz/corpus-$$n $$seeds 2>build-fuzz/$$n.log || { tail -40 build-fuzz/$$n.log; exit 1; }; \
	done

bench: all
	$(Q)for b in tests/bench/*; do case $$b in *.py) continue ;; esac; \
	  [ -x $$b ] || continue; echo "== $$b"; $$b || exit 1; done

GPU_BINS := $(GPU_SRCS:tests/gpu/%.c=$(O)/gpu/%)
gpu-check:
	$(Q)$(MAKE) --no-print-directory CUDA=1 all $(GPU_BINS)
	$(Q)O=$(O) tests/gpu/check

# The CUDA kernels compiled as C++ and run on the CPU (kernels/cuda/emu.cuh):
# checks them against the C kernels where there is no GPU and no nvcc.
EMU_OBJS := $(patsubst kernels/cuda/%.cu,$(O)/emu/%.o,$(wildcard kernels/cuda/*.cu))
EMU_BINS := $(GPU_SRCS:tests/gpu/%.c=$(O)/emu/%)
$(O)/emu/%.o: kernels/cuda/%.cu
	$(call msg,CXX,$<)
	@mkdir -p $(@D)
	$(Q)$(CXX) -x c++ -std=c++17 -O2 -g -pthread -MMD -MP -Ilib -Ikernels \
	  -DFW_CUDA_EMU=1 $(PC_CFLAGS) -c -o $@ $<
# kernels/dev.c again with FW_CUDA, so the model reaches the emulated
# kernels: linked before the library, it stands in for the archive's.
EMU_OBJS += $(O)/emu/dev.o
$(O)/emu/dev.o: kernels/dev.c
	$(call msg,CC,$<)
	@mkdir -p $(@D)
	$(Q)$(CC) $(FW_CPPFLAGS) -DFW_CUDA=1 -DFW_CUDA_EMU=1 $(CPPFLAGS) $(FW_CFLAGS) $(CFLAGS) -c -o $@ $<
$(O)/emu/%: $(O)/tests/gpu/%.o $(EMU_OBJS) $(LIBFW)
	$(call msg,LD,$@)
	$(Q)$(CC) $(FW_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(EMU_OBJS) $(LIBFW) $(FW_LDLIBS) -lstdc++ $(LDLIBS)
# The tools linked with the emulated kernels, for tests/gpu/tools --emu.
EMU_TOOLS := $(TOOL_SRCS:tools/%.c=$(O)/emu/bin/%)
$(O)/emu/bin/%: $(O)/tools/%.o $(EMU_OBJS) $(LIBFW)
	$(call msg,LD,$@)
	@mkdir -p $(@D)
	$(Q)$(CC) $(FW_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(EMU_OBJS) $(LIBFW) $(FW_LDLIBS) -lstdc++ $(LDLIBS)
# Kept between runs (make would delete them as intermediate files).
.SECONDARY: $(EMU_OBJS) $(GPU_SRCS:%.c=$(O)/%.o)
.PHONY: gpu-emu
gpu-emu: $(EMU_BINS) $(EMU_TOOLS) all
	$(Q)O=$(O) tests/gpu/check --emu

# ---- the loops -------------------------------------------------------------
# make demo [ABLATE=teach] [LOOP=out]: the whole flywheel on the samples
# (pipelines/demo.sh); with ABLATE=teach the same without teach, in
# $(LOOP)/ablate-teach, drawn beside the main run in $(LOOP)/eval.png.
LOOP ?= out
# A small judge distilled from the teacher judge's verdicts, and its agreement
# with it on held-out items against the cost of each (out/judge/judge.json).
judge: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)FW_BIN=$(abspath $(B)) pipelines/judge.sh out/judge

# The judge's verdict as the reward of one inner-loop iteration on tasks
# that want a clarifying question and tasks that want the work started
# (the pg step's setting chosen by a sweep on the training tasks), and the
# rate of clarifying questions before, after and in a null arm (the
# rewards rotated within each group) on held-out ones
# (out/judge-reward/reward.json).  Part of `make check`, not of `make test`
# (tests/judge-reward.bats runs it at reduced size).
judge-reward: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)FW_BIN=$(abspath $(B)) nice -n 10 pipelines/judge-reward.sh out/judge-reward

demo: deps
	$(Q)$(MAKE) --no-print-directory all
ifeq ($(ABLATE),teach)
	$(Q)FW_BIN=$(abspath $(B)) DEMO_ABLATE=teach pipelines/demo.sh $(LOOP)/ablate-teach
	$(Q)if [ -s $(LOOP)/curve.tsv ] && command -v gnuplot >/dev/null; then pipelines/plot.sh $(LOOP); fi
else ifneq ($(ABLATE),)
	$(error ABLATE can be teach)
else
	$(Q)FW_BIN=$(abspath $(B)) pipelines/demo.sh $(LOOP)
endif

# make inner-loop ITER=n: iteration n of the demo's inner loop in
# $(LOOP)/iter-n, from iteration n-1's checkpoint (the bootstrap's for 1),
# then its eval; every file is a target, so a failed stage reruns alone.
# make eval CKPT=DIR: the held-out eval of any checkpoint.
ITER ?= 1
RETIRE_AT ?= 0.9
LOOP_TASKS = $(LOOP)/drills/tasks.msgpack
LOOP_STORE = $(LOOP)/drills/store.git
LOOP_ENV = FW_BIN=$(abspath $(B))
loop_prev = $(if $(filter 1,$(1)),$(LOOP)/boot/ckpt,$(LOOP)/iter-$(shell expr $(1) - 1)/ckpt)
$(LOOP)/boot/ckpt $(LOOP_TASKS):
	@echo "no $@: make demo (or make demo LOOP=$(LOOP)) makes the tasks and the bootstrap" >&2; exit 1
# one rule per iteration up to ITER (a pattern rule cannot chain to itself)
define loop_iter
$(LOOP)/iter-$(1)/ckpt: $(call loop_prev,$(1)) $(LOOP_TASKS) | all
	$$(Q)$$(LOOP_ENV) pipelines/inner-loop.sh -c "$$$$(cat $$<)" -t $$(LOOP_TASKS) -s $$(LOOP_STORE) \
	  -o $(LOOP)/iter-$(1) --seed $(1) --tasks 80 --steps 8 --context 80 --objective pg,distill:0.1
$(LOOP)/iter-$(1)/eval/pass.json: $(LOOP)/iter-$(1)/ckpt
	$$(Q)touch $(LOOP)/retired.msgpack
	$$(Q)$$(LOOP_ENV) pipelines/eval.sh -c "$$$$(cat $$<)" -t $$(LOOP_TASKS) -s $$(LOOP_STORE) \
	  -o $(LOOP)/iter-$(1)/eval --context 80 --samples 1 --retire-at $$(RETIRE_AT) --retired $(LOOP)/retired.msgpack \
	  --history $(LOOP)/eval-history.msgpack \
	  --harder 'task-mutate --test-cmd "python3 -S run_tests.py" --store $$(abspath $$(LOOP_STORE)) --strategy delete-feature --max 20 --seed $(1) $$(abspath $(LOOP))/drills/repo'
	$$(Q)cat $(LOOP)/iter-$(1)/eval/graded.msgpack >> $(LOOP)/eval-history.msgpack
endef
$(foreach i,$(shell seq 1 $(ITER)),$(eval $(call loop_iter,$(i))))
inner-loop: $(LOOP)/iter-$(ITER)/eval/pass.json
eval: all
	$(Q)test -n "$(CKPT)" || { echo "make eval CKPT=DIR" >&2; exit 2; }
	$(Q)$(LOOP_ENV) pipelines/eval.sh -c $(CKPT) -t $(LOOP_TASKS) -s $(LOOP_STORE) \
	  -o $(LOOP)/eval-$$(basename $(CKPT))

# The outer loop on the samples: feedback logs to SFT data, eval candidates
# and a report in $(O)/outer-loop (see pipelines/outer-loop.sh).
outer-loop: all
	$(Q)FW_BIN=$(abspath $(B)) pipelines/outer-loop.sh -o $(O)/outer-loop \
	  --private-eval samples/evals/private-eval.jsonl --paired-by .meta.item samples/feedback

# Recent pipeline runs (the cron wrapper's runs log): figures and failures.
status:
	$(Q)pipelines/status.sh

# ---- install -----------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7
	install -m 755 $(TOOLS) $(DESTDIR)$(BINDIR)/
	for m in $(MANS); do s=$${m##*.}; install -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done

uninstall:
	for t in $(TOOLS); do rm -f $(DESTDIR)$(BINDIR)/$${t##*/}; done
	for m in $(MANS); do s=$${m##*.}; rm -f $(DESTDIR)$(MANDIR)/man$$s/$${m#man/}; done

clean:
	rm -rf build build-asan build-fuzz bin

-include $(shell find $(O) -name '*.d' 2>/dev/null)
