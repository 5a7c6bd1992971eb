# replay.mk - the real-GPU side: build/allocsim-replay (policies over the CUDA device),
# build/allocsim-calib (the device model's calibration) and `make validate`.
#
# C is compiled with $(CC) against the CUDA headers and linked with the static CUDA runtime,
# so the programs need no CUDA library path when they run. The driver is not linked: the
# runtime loads libcuda.so.1 itself, and the driver calls the programs make go through
# replay/cuda_driver.c (dlopen + cuGetProcAddress), so on a machine without the driver they
# start and say so. Needs nvcc's toolkit, not a GPU.

CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(firstword $(wildcard /usr/local/cuda/bin/nvcc)))
CUDA_INC   := -I$(CUDA_HOME)/include
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/targets/x86_64-linux/lib \
              -lcudart_static -ldl -lrt -pthread
REPLAY_DIR := $(BUILD)/replay

REPLAY_CU_SRC := replay/cuda_device.c replay/cuda_driver.c replay/async_pool.c
REPLAY_CU_OBJ := $(patsubst replay/%.c,$(REPLAY_DIR)/%.o,$(REPLAY_CU_SRC))

$(REPLAY_DIR)/%.o: replay/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<  (cuda)"
	$(Q)$(CC) $(ALL_CFLAGS) -Ireplay $(CUDA_INC) -Werror -c -o $@ $<

$(BUILD)/allocsim-calib: $(REPLAY_DIR)/calib_main.o $(REPLAY_CU_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(CUDA_LIBS) $(LDLIBS)

$(BUILD)/allocsim-replay: $(REPLAY_DIR)/replay_main.o $(REPLAY_CU_OBJ) $(REL_LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(CUDA_LIBS) $(LDLIBS)

# the stream-ordered pool's probe (replay/data/async-probe-h200): CUDA runtime only
$(BUILD)/allocsim-asyncprobe: $(REPLAY_DIR)/async_probe.o
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(CUDA_LIBS) $(LDLIBS)

REPLAY_BINS := $(BUILD)/allocsim-replay $(BUILD)/allocsim-calib $(BUILD)/allocsim-asyncprobe

## replay: build the real-GPU programs (needs the CUDA toolkit, not a GPU)
replay: $(REPLAY_BINS)

## validate: on a GPU machine, simulate, replay for real (allocsim-replay, torch_replay.py)
## and compare, for the shared snapshots and generated traces (replay/RESULTS.md); the
## whole plan takes about 13 minutes on an H200, so VALIDATE_ARGS="--part 1/2", then
## "--part 2/2", measure it in two calls (validate_table.py merges their summaries)
VALIDATE_ARGS ?=
validate: $(BUILD)/allocsim $(REPLAY_BINS)
	$(Q)python3 replay/validate.py --out $(BUILD)/validate $(VALIDATE_ARGS)

# Where the CUDA toolkit is present, `make test` builds allocsim-replay too and checks it
# ($AS_REPLAY, tests/test_install.c): it must start, and say so, without the driver.
ifneq ($(CUDA_HOME),)
test asan: $(BUILD)/allocsim-replay
TEST_ENV += AS_REPLAY=$(CURDIR)/$(BUILD)/allocsim-replay
endif
