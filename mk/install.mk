# install.mk - `make install` and `make uninstall`, both under $(DESTDIR)$(PREFIX):
#   bin/allocsim, and bin/allocsim-replay when `make replay` built it
#   libexec/allocsim-dynamic               what a static allocsim runs for -p plugin:
#                                          (Makefile, STATIC; found as ../libexec from bin)
#   share/allocsim/plots/*.gp              the scripts of `allocsim plot`
#   share/man/man1/allocsim.1 (allocsim-replay.1 with the program)
#   share/bash-completion/completions/allocsim (and allocsim-replay, a link to it)
#   include/allocsim/{policy,device,error,units}.h  the policy ABI, for plug-ins
#   lib/pkgconfig/allocsim-policy.pc       `pkg-config --cflags allocsim-policy`
# uninstall removes exactly these and allocsim's own folders; the shared folders (bin,
# man1, completions) stay. tests/test_install.c installs into a temporary prefix and
# checks that uninstall leaves no file there.

BINDIR      ?= $(PREFIX)/bin
LIBEXECDIR  := $(BINDIR)/../libexec
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
PLOTSDIR    := $(DATADIR)/allocsim/plots
INCLUDEDIR  ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(PREFIX)/lib/pkgconfig
# The policy ABI: policy.h, device.h and the two sim/base headers they include.
ABI_HEADERS := policies/policy.h policies/device.h sim/base/error.h sim/base/units.h
ABI_VERSION := $(shell sed -n 's/^\#define AS_POLICY_ABI \([0-9]*\).*/\1/p' policies/policy.h)
INSTALL     ?= install
AS_VERSION_TEXT := $(shell sed -n 's/^\#define AS_VERSION "\(.*\)"/\1/p' sim/report.h)

# tests/test_install.c runs `make install` with the same build folder.
TEST_ENV += AS_BUILD=$(BUILD)

# Decided when make starts: install does not build the CUDA programs.
REPLAY_BUILT := $(wildcard $(BUILD)/allocsim-replay)
PLOT_SCRIPTS := $(wildcard plots/*.gp)

## install: allocsim (and allocsim-replay if built), man pages, bash completion, plot scripts
install: $(ALLOCSIM_PROGS)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PLOTSDIR) $(DESTDIR)$(MANDIR)/man1 \
	  $(DESTDIR)$(BASHCOMPDIR)
	$(INSTALL) -m 755 $(BUILD)/allocsim $(DESTDIR)$(BINDIR)/allocsim
	$(if $(filter %/allocsim-dynamic,$(ALLOCSIM_PROGS)),$(INSTALL) -d $(DESTDIR)$(LIBEXECDIR) && \
	  $(INSTALL) -m 755 $(BUILD)/allocsim-dynamic $(DESTDIR)$(LIBEXECDIR)/allocsim-dynamic)
	$(if $(PLOT_SCRIPTS),$(INSTALL) -m 644 $(PLOT_SCRIPTS) $(DESTDIR)$(PLOTSDIR)/)
	$(INSTALL) -m 644 sim/man/allocsim.1 $(DESTDIR)$(MANDIR)/man1/allocsim.1
	$(INSTALL) -m 644 sim/completion/allocsim.bash $(DESTDIR)$(BASHCOMPDIR)/allocsim
	$(INSTALL) -d $(DESTDIR)$(INCLUDEDIR)/allocsim $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 644 $(ABI_HEADERS) $(DESTDIR)$(INCLUDEDIR)/allocsim/
	printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$${prefix}/include' '' \
	  'Name: allocsim-policy' \
	  'Description: allocsim policy ABI $(ABI_VERSION): build a policy plug-in (-p plugin:PATH)' \
	  'Version: $(AS_VERSION_TEXT)' 'Cflags: -I$${includedir}/allocsim' \
	  > $(DESTDIR)$(PKGCONFIGDIR)/allocsim-policy.pc
ifneq ($(REPLAY_BUILT),)
	$(INSTALL) -m 755 $(BUILD)/allocsim-replay $(DESTDIR)$(BINDIR)/allocsim-replay
	$(INSTALL) -m 644 sim/man/allocsim-replay.1 $(DESTDIR)$(MANDIR)/man1/allocsim-replay.1
	ln -sf allocsim $(DESTDIR)$(BASHCOMPDIR)/allocsim-replay
endif

## uninstall: remove everything install put under $(DESTDIR)$(PREFIX)
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/allocsim $(DESTDIR)$(BINDIR)/allocsim-replay \
	  $(DESTDIR)$(LIBEXECDIR)/allocsim-dynamic \
	  $(DESTDIR)$(MANDIR)/man1/allocsim.1 $(DESTDIR)$(MANDIR)/man1/allocsim-replay.1 \
	  $(DESTDIR)$(BASHCOMPDIR)/allocsim $(DESTDIR)$(BASHCOMPDIR)/allocsim-replay \
	  $(addprefix $(DESTDIR)$(PLOTSDIR)/,$(notdir $(PLOT_SCRIPTS)))
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/allocsim/,$(notdir $(ABI_HEADERS))) \
	  $(DESTDIR)$(PKGCONFIGDIR)/allocsim-policy.pc
	rmdir $(DESTDIR)$(PLOTSDIR) $(DESTDIR)$(DATADIR)/allocsim $(DESTDIR)$(INCLUDEDIR)/allocsim \
	  2>/dev/null || true
