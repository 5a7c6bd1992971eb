# allocsim - GNU Make build. `make help` lists the targets.
# One build directory per flavour (build/ release, build/debug for tests, build/asan,
# build/tsan), so sanitizer and release builds never need a clean between them.

CC       ?= cc
CLANG    ?= clang
NVCC     ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) nvcc)
PREFIX   ?= /usr/local
BUILD    ?= build
CSTD     := -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith \
            -Wcast-qual -Wvla -Wno-missing-field-initializers
# Tests and fuzz harnesses see everything; each library folder gets its own path below.
INC      := -I. -Isim/cli -Isim -Itraces -Ipolicies -Isim/base
CFLAGS   ?= -O2 -g
ALL_CFLAGS = $(CSTD) $(WARN) $(INC) $(CFLAGS) -pthread -MMD -MP
LDLIBS   := -ljansson -lzstd -lm -pthread -ldl
TEST_LDLIBS := -lcunit $(LDLIBS) -ldl

ifeq ($(V),1)
Q :=
else
Q := @
endif

# Library sources: everything in sim/base/, traces/, policies/ and sim/ (CORE_SRC), and the
# command layer in sim/cli/ (CLI_SRC) except programs (main.c, *_main.c). LIB_SRC is what
# allocsim, the tests and the fuzzers link: both.
CORE_SRC := $(sort $(wildcard sim/base/*.c traces/*.c policies/*.c sim/*.c))
CLI_SRC  := $(filter-out %_main.c sim/cli/main.c,$(sort $(wildcard sim/cli/*.c)))
LIB_SRC  := $(CORE_SRC) $(CLI_SRC)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
# Test-only sources: helpers in tests/ and fuzz harnesses (linked so that `make test`
# replays the committed corpora). Programs (*_main.c) are excluded.
TEST_EXTRA := $(filter-out %_main.c,$(sort $(wildcard tests/util.c fuzz/*.c)))

define objs
$(patsubst %.c,$(1)/obj/%.o,$(2))
endef

REL_LIB   := $(call objs,$(BUILD),$(LIB_SRC))
DBG_DIR   := $(BUILD)/debug
ASAN_DIR  := $(BUILD)/asan
TSAN_DIR  := $(BUILD)/tsan
DBG_LIB   := $(call objs,$(DBG_DIR),$(LIB_SRC))
ASAN_LIB  := $(call objs,$(ASAN_DIR),$(LIB_SRC))
TSAN_LIB  := $(call objs,$(TSAN_DIR),$(LIB_SRC))

# Who may include whom (README.md, Layout). Each folder compiles with only the paths it may
# use, so an include the design forbids fails to compile; `make check-deps` (mk/deps.mk,
# run by `make test`) proves it. Quote includes name bare headers, never a path.
#   folder     may include
#   sim/base   nothing in the project
#   traces     traces, sim/base
#   policies   policies, sim/base
#   sim        sim, traces, policies, sim/base (the library: never sim/cli)
#   sim/cli    sim/cli, sim, traces, policies, sim/base (the commands)
#   replay     replay, sim, traces, policies, sim/base (allocsim-replay is the library's
#              run driver, sim/driver.h, over the CUDA device; never sim/cli)
#   tests fuzz everything (INC above)
INC_base     := -Isim/base
INC_traces   := -Itraces $(INC_base)
INC_policies := -Ipolicies $(INC_base)
INC_sim      := -Isim -Itraces -Ipolicies $(INC_base)
INC_cli      := -Isim/cli $(INC_sim)
INC_replay   := -Ireplay $(INC_sim)
OBJ_DIRS     := $(BUILD)/obj $(DBG_DIR)/obj $(ASAN_DIR)/obj $(TSAN_DIR)/obj
# Pattern-specific: the shorter stem wins, so sim/base/ is not compiled as sim/.
$(foreach d,$(OBJ_DIRS),$(d)/sim/%.o): INC := $(INC_sim)
$(foreach d,$(OBJ_DIRS),$(d)/sim/base/%.o): INC := $(INC_base)
$(foreach d,$(OBJ_DIRS),$(d)/sim/cli/%.o): INC := $(INC_cli)
$(foreach d,$(OBJ_DIRS),$(d)/traces/%.o): INC := $(INC_traces)
$(foreach d,$(OBJ_DIRS),$(d)/policies/%.o): INC := $(INC_policies)
$(BUILD)/replay/%.o: INC := $(INC_replay)

.PHONY: check-policy check-long all test asan tsan bench heap-replay fuzz fuzz-run replay validate plots install uninstall clean help
.DEFAULT_GOAL := all

## all: build build/allocsim (release, -O2)
all: $(BUILD)/allocsim

# allocsim is linked statically where the toolchain has every archive (Debian's libc6-dev,
# libzstd-dev and libjansson-dev ship them; -static-pie keeps address randomisation): with
# no dynamic loader, no shared C library to map and bind and no libm, a short command
# starts in fewer instructions and page faults than /bin/true (sim/README.md, Performance).
# A static program cannot load a policy plug-in (-p plugin:) with its own C library, so
# the same objects are also linked with glibc dynamic as allocsim-dynamic, installed in
# libexec/; allocsim hands any command that names a plug-in to it with one exec
# (sim/cli/main.c), and in allocsim the loader refuses instead of calling dlopen
# (policies/plugin.c, AS_NO_DLOPEN). allocsim-dynamic links libzstd and libjansson from
# their archives too. STATIC=0, or a missing archive, links allocsim like allocsim-dynamic
# (and builds no allocsim-dynamic); the sanitizer builds are always dynamic.
STATIC ?= 1
STATIC_FILES := rcrt1.o libc.a libm.a libzstd.a libjansson.a
ifeq ($(STATIC),1)
ifneq ($(strip $(foreach a,$(STATIC_FILES),$(if $(filter $(a),$(shell $(CC) -print-file-name=$(a))),$(a)))),)
STATIC := 0
endif
endif
ALLOCSIM_DYN_LDLIBS := $(LDLIBS)
ifeq ($(strip $(foreach a,libzstd.a libjansson.a,$(if $(filter $(a),$(shell $(CC) -print-file-name=$(a))),$(a)))),)
ALLOCSIM_DYN_LDLIBS := -Wl,-Bstatic -ljansson -lzstd -Wl,-Bdynamic $(filter-out -ljansson -lzstd,$(LDLIBS))
endif

# Start-up locality: the objects that a short `allocsim run` executes (callgrind of a 2-event
# trace through torch, in call order, then a snapshot pickle's reader) come first in
# allocsim's link, so that their code shares the kernel's 64 KiB fault-around windows
# (sim/README.md, Performance). Only the order changes; a file not listed links after them.
STARTUP_SRC := sim/cli/main.c sim/cli/commands.c sim/cli/cli.c sim/cli/options.c \
               sim/cli/outfile.c sim/cli/progress.c sim/cli/cmd_run.c policies/registry.c \
               policies/spec.c policies/torch.c policies/torch_fset.c sim/driver.c \
               sim/engine.c sim/simdev.c sim/placement_chunked.c sim/caught.c \
               sim/addr_treap.c sim/report.c sim/siterep.c sim/snapout.c traces/reader.c \
               traces/instream.c traces/native.c traces/live.c traces/sites.c traces/meta.c \
               sim/base/grow.c sim/base/units.c sim/base/text.c traces/torch_snapshot.c \
               traces/pickle.c traces/pickle_entry.c traces/snap_events.c traces/snap_pools.c \
               sim/check.c
# Inside those objects the functions a short command runs are placed together by name
# (mk/startup.ld): each release function is a section of its own for that. The stamp makes
# a build directory of objects compiled before that flag compile them again, once.
$(BUILD)/obj/%.o: CFLAGS += -ffunction-sections
$(REL_LIB) $(BUILD)/obj/policies/plugin-nodl.o $(BUILD)/obj/sim/cli/main.o: $(BUILD)/obj/.function-sections
$(BUILD)/obj/.function-sections:
	@mkdir -p $(dir $@)
	@touch $@
ALLOCSIM_SRC := $(filter sim/cli/main.c $(LIB_SRC),$(STARTUP_SRC)) \
                $(filter-out $(STARTUP_SRC),$(LIB_SRC))
ALLOCSIM_OBJ := $(call objs,$(BUILD),$(ALLOCSIM_SRC))

ifeq ($(STATIC),1)
# The static link's plug-in loader: the same source without dlopen.
STATIC_OBJ := $(patsubst $(BUILD)/obj/policies/plugin.o,$(BUILD)/obj/policies/plugin-nodl.o,$(ALLOCSIM_OBJ))
$(BUILD)/obj/policies/plugin-nodl.o: policies/plugin.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<  (no dlopen)"
	$(Q)$(CC) $(ALL_CFLAGS) -DAS_NO_DLOPEN -c -o $@ $<

# The library code a short command runs is linked in front of the rest, as the objects
# above are: mk/startup.ld (generated by mk/startup_ld.py, which says why and how).
# Its 2,683 relative relocations are packed (DT_RELR, glibc 2.36 and binutils 2.38 on):
# 704 bytes of bitmaps that _dl_relocate_static_pie walks, where 64 KiB of 24-byte RELA
# entries were read at every start (6,255 instructions and a page fault fewer a command).
$(BUILD)/allocsim: $(STATIC_OBJ) mk/startup.ld
	@echo "  LD      $@  (static)"
	$(Q)$(CC) $(ALL_CFLAGS) -ffunction-sections -static-pie -Wl,-z,pack-relative-relocs \
	  -Wl,-T,mk/startup.ld -o $@ $(STATIC_OBJ) $(LDLIBS)

$(BUILD)/allocsim-dynamic: $(ALLOCSIM_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALLOCSIM_DYN_LDLIBS)

all: $(BUILD)/allocsim-dynamic
ALLOCSIM_PROGS := $(BUILD)/allocsim $(BUILD)/allocsim-dynamic
else
$(BUILD)/allocsim: $(ALLOCSIM_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALLOCSIM_DYN_LDLIBS)

ALLOCSIM_PROGS := $(BUILD)/allocsim
endif

$(BUILD)/allocsim-bench: $(BUILD)/obj/sim/cli/bench_main.o $(REL_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

## heap-replay: build/heap-replay, the chunked heap alone over a --segments log (sim/README.md)
HEAP_REPLAY_OBJ := $(addprefix $(BUILD)/obj/sim/,bench/heap_replay.o placement_chunked.o base/grow.o)
$(BUILD)/heap-replay: $(HEAP_REPLAY_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

# Link-time optimisation of the objects whose calls cross files on every event (fat
# objects: a link without the LTO plugin still works). Release build only; the results
# are the same (tests/same_results.sh). The simulated device calls its placement engine
# on every reserve and release; since the engines are files of their own
# (sim/placement_*.c) the calls cost nocache 2% more instructions (pushes, pops and spills
# around as_chunked_take/give): optimised together, the engines are inlined into the
# device again. The engine's loop copies for the built-in policies (policies/builtin.h)
# call their alloc and free by name: optimised together, those are inlined into the loop
# (4-12 % of a run's instructions, sim/README.md, Session 8).
HOT_LTO := $(addprefix $(BUILD)/obj/sim/,simdev.o placement_chunked.o placement_space.o engine.o) \
	$(addprefix $(BUILD)/obj/policies/,common.o torch.o torch_fset.o bestfit.o firstfit.o \
	segfit.o buddy.o bfc.o nocache.o cudamallocasync.o gmlake.o)
$(HOT_LTO): CFLAGS += -flto=auto -ffat-lto-objects
$(HOT_LTO): Makefile # their flags are set here: a change to the list rebuilds them

# ---- tests ---------------------------------------------------------------------------
# The runner's suite table is generated from the `CU_TestInfo test_NAME[]` arrays that
# each tests/test_*.c defines, so adding a test file needs no edit here.

TEST_CFLAGS = -O1 -g -DAS_TEST_ROOT='"$(CURDIR)"'

$(DBG_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<  (debug)"
	$(Q)$(CC) $(CSTD) $(WARN) $(INC) $(TEST_CFLAGS) -Werror -pthread -MMD -MP -c -o $@ $<

$(ASAN_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<  (asan)"
	$(Q)$(CC) $(CSTD) $(WARN) $(INC) $(TEST_CFLAGS) $(SAN_FLAGS) -pthread -MMD -MP -c -o $@ $<

SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer

$(TSAN_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<  (tsan)"
	$(Q)$(CC) $(CSTD) $(WARN) $(INC) $(TEST_CFLAGS) $(TSAN_FLAGS) -pthread -MMD -MP -c -o $@ $<

$(BUILD)/suites.h: $(TEST_SRC) tests/gen_suites.sh
	@mkdir -p $(dir $@)
	$(Q)sh tests/gen_suites.sh $(TEST_SRC) > $@.tmp && mv $@.tmp $@

RUNNER_OBJS := $(DBG_DIR)/obj/tests/runner.o $(ASAN_DIR)/obj/tests/runner.o \
               $(TSAN_DIR)/obj/tests/runner.o
$(RUNNER_OBJS): $(BUILD)/suites.h
$(RUNNER_OBJS): INC += -I$(BUILD)

TEST_OBJ_DBG  := $(call objs,$(DBG_DIR),$(TEST_SRC) tests/runner.c $(TEST_EXTRA))
TEST_OBJ_ASAN := $(call objs,$(ASAN_DIR),$(TEST_SRC) tests/runner.c $(TEST_EXTRA))
TEST_OBJ_TSAN := $(call objs,$(TSAN_DIR),$(TEST_SRC) tests/runner.c $(TEST_EXTRA))

$(DBG_DIR)/run-tests: $(TEST_OBJ_DBG) $(DBG_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) -o $@ $^ $(TEST_LDLIBS)

$(ASAN_DIR)/run-tests: $(TEST_OBJ_ASAN) $(ASAN_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(SAN_FLAGS) -o $@ $^ $(TEST_LDLIBS)

$(TSAN_DIR)/run-tests: $(TEST_OBJ_TSAN) $(TSAN_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(TSAN_FLAGS) -o $@ $^ $(TEST_LDLIBS)

# The sanitizer suites run the CLI tests against an allocsim built the same way.
$(ASAN_DIR)/allocsim: $(ASAN_DIR)/obj/sim/cli/main.o $(ASAN_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(SAN_FLAGS) -o $@ $^ $(LDLIBS)

$(TSAN_DIR)/allocsim: $(TSAN_DIR)/obj/sim/cli/main.o $(TSAN_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(TSAN_FLAGS) -o $@ $^ $(LDLIBS)

## test: build and run the CUnit suite (ends with "N passed, N failed")
test: $(DBG_DIR)/run-tests $(ALLOCSIM_PROGS)
	$(Q)AS_ALLOCSIM=$(CURDIR)/$(BUILD)/allocsim $(TEST_ENV) $(DBG_DIR)/run-tests

## check-policy: PLUGIN=/path/libmine.so: the conformance suite and the policy fuzzer's corpus against a plug-in
check-policy: $(DBG_DIR)/run-tests $(BUILD)/fuzz-driver
	@test -n "$(PLUGIN)" || { echo "usage: make check-policy PLUGIN=/path/libmine.so[,knob=value...]" >&2; exit 2; }
	$(Q)AS_CHECK_PLUGIN='plugin:$(PLUGIN)' $(TEST_ENV) $(DBG_DIR)/run-tests conformance
	$(Q)AS_FUZZ_POLICY='plugin:$(PLUGIN)' $(BUILD)/fuzz-driver policy fuzz/corpus/policy

## check-long: no function outside tests/ over 120 lines (tests/long_functions.sh)
check-long:
	$(Q)tests/long_functions.sh

test: check-long

## asan: the same suite under AddressSanitizer and UndefinedBehaviorSanitizer, the CLI tests
## against an ASan+UBSan allocsim (build/asan/allocsim)
asan: $(ASAN_DIR)/run-tests $(ASAN_DIR)/allocsim
	$(Q)ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1 \
	  AS_ALLOCSIM=$(CURDIR)/$(ASAN_DIR)/allocsim ALLOCSIM_PLOTS=$(CURDIR)/plots $(TEST_ENV) \
	  $(ASAN_DIR)/run-tests

## tsan: the multi-threaded suites under ThreadSanitizer (build/tsan; allocsim too)
# (the engine runs a reader and workers; fuzz_corpus drives the whole command in-process)
TSAN_SUITES ?= engine budget mincap metrics cli rmm patho limit fuzz_corpus torch_fidelity
tsan: $(TSAN_DIR)/run-tests $(TSAN_DIR)/allocsim
	$(Q)TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:second_deadlock_stack=1 \
	  AS_ALLOCSIM=$(CURDIR)/$(TSAN_DIR)/allocsim ALLOCSIM_PLOTS=$(CURDIR)/plots $(TEST_ENV) \
	  $(TSAN_DIR)/run-tests $(TSAN_SUITES)

## bench: CPU events/s of every policy on long real traces (repeated snapshots) and a generated one,
##   then start-up (BENCH_ARGS=--startup for those rows alone)
bench: $(BUILD)/allocsim-bench $(BUILD)/allocsim $(BUILD)/heap-replay
	$(Q)$(BUILD)/allocsim-bench --commit "$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" $(BENCH_ARGS)

heap-replay: $(BUILD)/heap-replay

## clean: remove build/
clean:
	rm -rf $(BUILD)

## help: list the targets
help:
	@grep -h '^## ' $(MAKEFILE_LIST) | sed 's/^## /  /'

-include $(wildcard mk/*.mk)
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
