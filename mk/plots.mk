# plots.mk - `make plots`: the README's example charts, drawn by `allocsim plot` from the
# real H200 snapshots (tests/data/torch-2.11-h200*) into plots/examples/, with the CSV
# behind each chart kept in $(BUILD)/plots/NAME/ (redraw one by hand with gnuplot from
# there). `make plots-clean` removes the charts so that they are drawn again.

SNAP        := tests/data/torch-2.11-h200
SNAP_STR    := tests/data/torch-2.11-h200-streams
EX          := plots/examples
PLOT_TMP    := $(BUILD)/plots
ALLOCSIM    := $(BUILD)/allocsim
PLOT_DEPS   := $(ALLOCSIM) plots/common.gp plots/readcol.gp

RESNET := $(SNAP)/resnet_varbatch.pickle.zst
MOE    := $(SNAP)/moe_like.pickle.zst
STR2   := $(SNAP_STR)/streams2_default.pickle.zst

# The three settings the key measured with every cap, and the key's own caps (bytes).
TORCH_SPECS := -p torch -p expandable_segments:True -p max_split_size_mb:128
# A cap from the key at which default torch fails late (alloc 7631 of 11460),
# max_split_size_mb:128 early (3473) and expandable segments fits.
RESNET_CAP  := 8851683926
KEY_CAPS    := replay/data/key_caps.txt
MEASURED    := replay/data/torch-key-replay

PLOT_CHARTS := $(EX)/timeline_resnet.png $(EX)/segments_resnet_oom.png $(EX)/segments_streams_peak.png \
               $(EX)/capacity_resnet.png $(EX)/capacity_moe.png $(EX)/compare_corpus.png \
               $(EX)/validation_h200.png

## plots: draw the README's example charts from the real snapshots into plots/examples/
plots: $(PLOT_CHARTS)

plots-clean:
	rm -f $(PLOT_CHARTS)

$(EX)/timeline_resnet.png: $(PLOT_DEPS) plots/timeline.gp $(RESNET)
	@mkdir -p $(EX)
	$(ALLOCSIM) plot timeline $(TORCH_SPECS) -c $(RESNET_CAP) --every 20 \
	  --title "ResNet-50, variable batch (H200): three PyTorch settings at the key's $(RESNET_CAP)-byte cap" \
	  --keep $(PLOT_TMP)/timeline_resnet -o $@ $(RESNET)

$(EX)/segments_resnet_oom.png: $(PLOT_DEPS) plots/segments.gp $(RESNET)
	@mkdir -p $(EX)
	$(ALLOCSIM) plot segments -p torch -c $(RESNET_CAP) --when oom \
	  --keep $(PLOT_TMP)/segments_resnet_oom -o $@ $(RESNET)

$(EX)/segments_streams_peak.png: $(PLOT_DEPS) plots/segments.gp $(STR2)
	@mkdir -p $(EX)
	$(ALLOCSIM) plot segments -p torch --when peak \
	  --title "GPT-style training on 3 streams (record_stream), default settings: segments at the reserved peak" \
	  --keep $(PLOT_TMP)/segments_streams_peak -o $@ $(STR2)

$(EX)/capacity_resnet.png: $(PLOT_DEPS) plots/capacity.gp $(RESNET)
	@mkdir -p $(EX)
	$(ALLOCSIM) plot capacity -p torch -p expandable_segments:True \
	  -p roundup_power2_divisions:4 -p garbage_collection_threshold:0.6,max_split_size_mb:256 \
	  --title "ResNet-50, variable batch: how far the trace gets at each capacity (every 2 MiB)" \
	  --keep $(PLOT_TMP)/capacity_resnet -o $@ $(RESNET)

$(EX)/capacity_moe.png: $(PLOT_DEPS) plots/capacity.gp $(MOE)
	@mkdir -p $(EX)
	$(ALLOCSIM) plot capacity -p torch -p expandable_segments:True \
	  -p max_split_size_mb:128,expandable_segments:True \
	  --title "Mixture-of-experts layer: how far the trace gets at each capacity (every 2 MiB)" \
	  --keep $(PLOT_TMP)/capacity_moe -o $@ $(MOE)

$(EX)/compare_corpus.png: $(PLOT_DEPS) plots/compare.gp $(RESNET) $(MOE) $(STR2)
	@mkdir -p $(EX)
	$(ALLOCSIM) plot compare $(TORCH_SPECS) -p bestfit -p bfc -p segfit -p buddy \
	  --title "Peak reserved and waste, uncapped, on the recorded H200 workloads" \
	  --keep $(PLOT_TMP)/compare_corpus -o $@ $(RESNET) $(MOE) $(STR2)

# Validation: the same settings and caps as the real replays (uncapped, then the key's caps
# in its order), predicted by allocsim and compared run by run with the measured JSON.
$(PLOT_TMP)/validation/%.csv: $(ALLOCSIM) $(KEY_CAPS) $(MEASURED)/torch_%_main.json $(SNAP)/%.pickle.zst
	@mkdir -p $(dir $@)
	$(ALLOCSIM) run -q $(TORCH_SPECS) -c none \
	  $(addprefix -c ,$(wordlist 2,100,$(shell grep '^$* ' $(KEY_CAPS)))) \
	  -f json -o $(PLOT_TMP)/validation/$*.pred.json $(SNAP)/$*.pickle.zst
	$(ALLOCSIM) compare -f csv $(PLOT_TMP)/validation/$*.pred.json \
	  $(MEASURED)/torch_$*_main.json > $@

$(PLOT_TMP)/validation/all.csv: $(PLOT_TMP)/validation/resnet_varbatch.csv \
                                $(PLOT_TMP)/validation/moe_like.csv
	head -n 1 $< > $@
	for f in $^; do tail -n +2 $$f; done >> $@

$(EX)/validation_h200.png: $(PLOT_DEPS) plots/validation.gp $(PLOT_TMP)/validation/all.csv
	@mkdir -p $(EX)
	$(ALLOCSIM) plot validation --csv $(PLOT_TMP)/validation/all.csv -o $@

.PHONY: plots-clean
