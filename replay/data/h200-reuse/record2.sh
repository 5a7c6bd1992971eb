#!/bin/sh
# record2.sh - the second device call (README.md): the llama key's two tie configs replayed
# with PyTorch's default memory history, then the wider `make validate`.
set -u
R=$OUT/rec2; mkdir -p $R/val $R/keep
L=tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst
CAPS=$(python3 -c 'import json; k=json.load(open("tests/data/torch-2.11-h200-llama/key.json"))["llama_accum_ckpt"]; print(" ".join("--cap %d" % c["allowed_bytes"] for c in k["configs"]["default"]["caps"]))')
t0=$(date +%s)
i=0
for conf in garbage_collection_threshold:0.6,max_split_size_mb:256 max_split_size_mb:128; do
  timeout 150 python3 replay/torch_replay.py $L --key-protocol --history pytorch --conf "$conf" \
    --cap none $CAPS --json $R/llama_hist_$i.json --segments $R/llama_hist_$i.csv 2> $R/llama_hist_$i.log &
  i=$((i+1))
done
timeout 410 python3 replay/validate.py --out $R/val --budget 390 --async-budget 0 --jobs 4 > $R/validate.log 2>&1
wait
echo "all $(( $(date +%s) - t0 )) s" >> $R/timing.txt
# keep the summary and, for every item with a differing run, its event logs
python3 - $R <<'PY'
import json, os, shutil, sys
r = sys.argv[1]
res = json.load(open(os.path.join(r, "val", "summary.json")))
for i, p in enumerate(res):
    for side, v in p.get("measured", {}).items():
        rows = v.get("rows") or []
        if any(x["oom_match"] != "1" or not x["segments"].startswith("same") for x in rows):
            tag = "%02d_%s_%s" % (i, p["trace"], p["spec"].replace(":", "-").replace(",", "-"))
            for ext in ("pred.csv", side + ".csv", side + ".json", side + ".log"):
                f = os.path.join(r, "val", tag + "." + ext)
                if os.path.exists(f):
                    shutil.copy(f, os.path.join(r, "keep"))
PY
cp $R/val/summary.json $R/val/summary.md $R/keep/
cd $OUT && tar czf rec2.tar.gz rec2/*.json rec2/*.csv rec2/*.log rec2/*.txt rec2/keep && ls -la $OUT
