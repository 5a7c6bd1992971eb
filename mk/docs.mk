# docs.mk - `make docs`: regenerate, in place, every program output quoted in the
# repository's Markdown (the blocks between <!-- docs: CMD --> and <!-- /docs -->, see
# tests/docs.py). `make test` checks them (tests/test_report.c) and fails on a stale one.

.PHONY: docs

## docs: regenerate the outputs quoted in README.md and the folders' *.md (tests/docs.py)
docs: $(BUILD)/allocsim
	$(Q)AS_ALLOCSIM=$(CURDIR)/$(BUILD)/allocsim python3 tests/docs.py
