# mk/fuzz.mk - libFuzzer harnesses (fuzz/fuzz_NAME.c), built with clang and sanitizers.
#   make fuzz                      every harness into build/fuzz/NAME, and build/fuzz-driver
#   make fuzz-run T=NAME SECS=N    run one with its dictionary, corpus and crash directory
#   make fuzz-real-seeds           seeds cut from the real snapshots, which fuzz-run then reads
# The library and the harnesses are compiled once with -fsanitize=fuzzer-no-link; each
# target links fuzz/libfuzzer_main.c built with -DAS_FUZZ_TARGET=NAME. The working corpus
# (build/fuzz/corpus-NAME) starts from the committed seeds (fuzz/corpus/NAME) and is not
# committed; crashes land in build/fuzz/crash-NAME/.

FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_TARGETS := native text pickle rmm policy patho cli
FUZZ_MUTATED := policy patho
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := $(CSTD) $(WARN) $(INC) -O1 -g -pthread $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_HELPERS := fuzz/fuzz_common.c fuzz/fuzz_ops.c
FUZZ_LIB     := $(call objs,$(FUZZ_DIR),$(LIB_SRC) $(FUZZ_HELPERS))
FUZZ_BINS    := $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))
# Per-target run settings: -max_len (bytes) and extra libFuzzer flags.
FUZZ_MAXLEN_native := 4096
FUZZ_MAXLEN_text   := 4096
FUZZ_MAXLEN_pickle := 16384
FUZZ_MAXLEN_rmm    := 4096
FUZZ_MAXLEN_policy := 8192
FUZZ_MAXLEN_patho  := 65536
FUZZ_MAXLEN_cli    := 4096
SECS ?= 60

.PHONY: fuzz fuzz-run fuzz-real-seeds fuzz-driver fuzz-patho patho-min

## fuzz: build every libFuzzer harness (clang, ASan+UBSan) into build/fuzz/, and build/fuzz-driver
fuzz: $(FUZZ_BINS) $(BUILD)/fuzz-driver

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<  (fuzz)"
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_DIR)/obj/main-%.o: fuzz/libfuzzer_main.c
	@mkdir -p $(dir $@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -DAS_FUZZ_TARGET=$* \
	  $(if $(filter $*,$(FUZZ_MUTATED)),-DAS_FUZZ_MUTATOR) -MMD -MP -c -o $@ $<

$(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/main-%.o $(FUZZ_DIR)/obj/fuzz/fuzz_%.o $(FUZZ_LIB)
	@echo "  LD      $@"
	$(Q)$(CLANG) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

# The plain driver: every harness, no libFuzzer, the release compiler.
FUZZ_DRIVER_SRC := $(filter-out %_main.c,$(sort $(wildcard fuzz/*.c))) fuzz/driver_main.c
$(BUILD)/fuzz-driver: $(call objs,$(BUILD),$(FUZZ_DRIVER_SRC)) $(REL_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

fuzz-driver: $(BUILD)/fuzz-driver

## fuzz-run: T=NAME SECS=N: run one harness (dictionary, -max_len, crashes in build/fuzz/crash-NAME/)
fuzz-run: $(FUZZ_DIR)/$(T)
	@test -n "$(T)" || { echo "usage: make fuzz-run T=NAME SECS=N" >&2; exit 2; }
	@mkdir -p $(FUZZ_DIR)/corpus-$(T) $(FUZZ_DIR)/crash-$(T)
	$(FUZZ_DIR)/$(T) -max_total_time=$(SECS) -max_len=$(FUZZ_MAXLEN_$(T)) -timeout=10 \
	  -rss_limit_mb=2048 -malloc_limit_mb=2560 -print_final_stats=1 \
	  -artifact_prefix=$(abspath $(FUZZ_DIR))/crash-$(T)/ \
	  $(if $(wildcard fuzz/dict/$(T).dict),-dict=fuzz/dict/$(T).dict) $(FUZZ_ARGS) \
	  $(FUZZ_DIR)/corpus-$(T) fuzz/corpus/$(T) $(wildcard $(FUZZ_DIR)/seeds-real/$(T))

## fuzz-real-seeds: seeds cut from the real snapshots of tests/data (build/fuzz/seeds-real/NAME), read by fuzz-run
fuzz-real-seeds: $(BUILD)/allocsim
	$(Q)rm -rf $(FUZZ_DIR)/seeds-real
	$(Q)python3 fuzz/real_seeds.py $(BUILD)/allocsim $(FUZZ_DIR)/seeds-real

# Keep the objects of the pattern-rule chain (otherwise make deletes them after linking).
.PRECIOUS: $(FUZZ_DIR)/obj/%.o $(FUZZ_DIR)/obj/main-%.o

# The pathological search is a long optimisation, not a bug hunt: build/fuzz-search/patho
# is the same harness without ASan/UBSan at -O2 (several times the runs per second).
#   make fuzz-patho P=SPEC SECS=N [M=256 N=16 UNIT=1048576] OUT=DIR
FUZZ_SDIR    := $(BUILD)/fuzz-search
FUZZ_SCFLAGS := $(CSTD) $(WARN) $(INC) -O2 -g -pthread -fsanitize=fuzzer-no-link
FUZZ_SLIB    := $(call objs,$(FUZZ_SDIR),$(LIB_SRC) $(FUZZ_HELPERS))

$(FUZZ_SDIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<  (fuzz-search)"
	$(Q)$(CLANG) $(FUZZ_SCFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_SDIR)/obj/main-patho.o: fuzz/libfuzzer_main.c
	@mkdir -p $(dir $@)
	$(Q)$(CLANG) $(FUZZ_SCFLAGS) -DAS_FUZZ_TARGET=patho -DAS_FUZZ_MUTATOR -c -o $@ $<

$(FUZZ_SDIR)/patho: $(FUZZ_SDIR)/obj/main-patho.o $(FUZZ_SDIR)/obj/fuzz/fuzz_patho.o $(FUZZ_SLIB)
	@echo "  LD      $@"
	$(Q)$(CLANG) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

.PRECIOUS: $(FUZZ_SDIR)/obj/%.o $(FUZZ_SDIR)/obj/main-patho.o

## fuzz-patho: P=SPEC SECS=N OUT=DIR [M= N= UNIT=]: search for sequences that maximise peak_reserved/M
# Seeded with the constructions (allocsim gen robson, every target that the setting allows,
# in OUT/seeds).
fuzz-patho: $(FUZZ_SDIR)/patho $(BUILD)/allocsim
	@test -n "$(P)" -a -n "$(OUT)" || { echo "usage: make fuzz-patho P=SPEC SECS=N OUT=DIR" >&2; exit 2; }
	@mkdir -p $(OUT)/corpus $(OUT)/crash $(OUT)/seeds
	$(Q)for t in bestfit firstfit buddy torch bfc; do \
	  $(BUILD)/allocsim gen robson target=$$t M=$(or $(M),256) n=$(or $(N),16) \
	    unit=$(or $(UNIT),1048576) -o $(OUT)/seeds/robson-$$t.txt 2>/dev/null || \
	    echo "fuzz-patho: no $$t construction at M=$(or $(M),256) n=$(or $(N),16) unit=$(or $(UNIT),1048576)"; done
	AS_PATHO_POLICY='$(P)' AS_PATHO_M=$(or $(M),256) AS_PATHO_N=$(or $(N),16) \
	  AS_PATHO_UNIT=$(or $(UNIT),1048576) AS_PATHO_OUT=$(OUT) \
	  $(FUZZ_SDIR)/patho -max_total_time=$(SECS) -max_len=$(FUZZ_MAXLEN_patho) -timeout=10 \
	  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(OUT)/crash/ $(FUZZ_ARGS) \
	  $(OUT)/corpus $(OUT)/seeds fuzz/corpus/patho

# The minimiser (fuzz/patho_min_main.c): the shortest sequence with the same ratios.
PATHO_MIN_SRC := $(filter-out %_main.c,$(sort $(wildcard fuzz/*.c))) fuzz/patho_min_main.c
$(BUILD)/patho-min: $(call objs,$(BUILD),$(PATHO_MIN_SRC)) $(REL_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

## patho-min: IN=TRACE OUT=FILE[.zst] [P=SPEC M= N= UNIT=]: minimise a pathological trace
patho-min: $(BUILD)/patho-min
	@test -n "$(IN)" -a -n "$(OUT)" || { echo "usage: make patho-min IN=TRACE OUT=FILE" >&2; exit 2; }
	$(BUILD)/patho-min $(if $(P),-p '$(P)') $(if $(M),-M $(M)) $(if $(N),-n $(N)) \
	  $(if $(UNIT),-u $(UNIT)) $(IN) $(OUT)
