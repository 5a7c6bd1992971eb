# deps.mk - `make check-deps` (run by `make test`): the folder rules of the Makefile's
# include table hold. Each row below compiles a one-line file `#include "HEADER"` with the
# include path of FOLDER: a `no` row must fail to compile (the design forbids it), a `yes`
# row must compile (so that a failure means the path, not a broken compiler). The file lies
# in $(BUILD)/check-deps, where no header is, as a folder's own directory is searched first
# for quote includes and that directory is on the folder's path anyway. Then two
# greps: library folders include bare names only (a path would step around -I), and no file
# includes another folder's *_internal.h; and README.md's folder table names, for every
# library folder, exactly the folders its include path holds.
#
#   FOLDER:HEADER:yes|no
DEPS_TABLE := \
  base:error.h:yes          base:units.h:yes          base:grow.h:yes \
  base:trace.h:no           base:policy.h:no \
  base:device.h:no          base:engine.h:no \
  traces:trace.h:yes        traces:error.h:yes        traces:policy.h:no \
  traces:device.h:no        traces:engine.h:no        traces:simdev.h:no \
  policies:policy.h:yes     policies:error.h:yes      policies:trace.h:no \
  policies:engine.h:no      policies:simdev.h:no      policies:report.h:no \
  sim:engine.h:yes          sim:trace.h:yes           sim:policy.h:yes \
  sim:driver.h:yes          sim:cuda_device.h:no      sim:util.h:no \
  sim:cli.h:no              sim:progress.h:no         sim:outfile.h:no \
  traces:driver.h:no        policies:driver.h:no \
  cli:cli.h:yes             cli:engine.h:yes          cli:report.h:yes \
  cli:driver.h:yes          cli:cuda_device.h:no      cli:util.h:no \
  replay:engine.h:yes       replay:driver.h:yes       replay:cuda_device.h:yes \
  replay:cli.h:no           replay:outfile.h:no       replay:progress.h:no \
  replay:util.h:no          replay:fuzz/fuzz.h:no
DEPS_LIBDIRS := sim/base traces policies sim sim/cli replay
# README.md's layout table must say for these what their INC_* paths allow.
DEPS_DOCDIRS := $(DEPS_LIBDIRS)

.PHONY: check-deps

## check-deps: forbidden includes fail to compile, allowed ones compile; no path or foreign *_internal.h includes
check-deps:
	$(Q)mkdir -p $(BUILD)/check-deps; probe=$(BUILD)/check-deps/probe.c; \
	bad=0; for row in $(DEPS_TABLE); do \
	  dir=$${row%%:*}; rest=$${row#*:}; hdr=$${rest%%:*}; want=$${rest#*:}; \
	  case $$dir in base) inc="$(INC_base)";; traces) inc="$(INC_traces)";; \
	    policies) inc="$(INC_policies)";; sim) inc="$(INC_sim)";; cli) inc="$(INC_cli)";; \
	    replay) inc="$(INC_replay)";; esac; \
	  printf '#include "%s"\n' "$$hdr" > $$probe; \
	  if $(CC) $(CSTD) $$inc -fsyntax-only $$probe >/dev/null 2>&1; then got=yes; else got=no; fi; \
	  if [ "$$got" != "$$want" ]; then \
	    echo "check-deps: $$dir including $$hdr: compiles=$$got, the design says $$want"; bad=1; fi; \
	done; \
	paths=$$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*/' \
	  $(foreach d,$(DEPS_LIBDIRS),$(wildcard $(d)/*.c $(d)/*.h))); \
	if [ -n "$$paths" ]; then echo "check-deps: a library file includes a path:"; \
	  echo "$$paths"; bad=1; fi; \
	for f in $$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]'); do \
	  for h in $$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*_internal\.h\)".*/\1/p' $$f); do \
	    [ -f "$$(dirname $$f)/$$(basename $$h)" ] || \
	      { echo "check-deps: $$f includes another folder's $$h"; bad=1; }; \
	  done; \
	done; \
	tinc=$$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"tests/' fuzz/*.c fuzz/*.h); \
	if [ -n "$$tinc" ]; then echo "check-deps: fuzz/ includes tests/ (the shared models live in fuzz/):"; \
	  echo "$$tinc"; bad=1; fi; \
	for d in $(DEPS_DOCDIRS); do \
	  case $$d in sim/base) inc="$(INC_base)";; traces) inc="$(INC_traces)";; \
	    policies) inc="$(INC_policies)";; sim) inc="$(INC_sim)";; sim/cli) inc="$(INC_cli)";; \
	    replay) inc="$(INC_replay)";; esac; \
	  make_says=$$(for i in $$inc; do f=$${i#-I}; [ "$$f" = "$$d" ] || echo "$$f"; done | sort | tr '\n' ' '); \
	  readme_says=$$(grep "^| \`$$d/\` |" README.md | awk -F'|' '{print $$(NF-1)}' | \
	    sed 's/nothing else//; s/[`,]/ /g' | tr ' ' '\n' | grep . | sort | tr '\n' ' '); \
	  [ "$$make_says" = "$$readme_says" ] || { bad=1; \
	    echo "check-deps: README.md says $$d/ may include '$$readme_says', the Makefile '$$make_says'"; }; \
	done; \
	[ $$bad = 0 ] && echo "check-deps: $(words $(DEPS_TABLE)) include rules, README.md's folder table and the path/internal-header greps hold"

test: check-deps
