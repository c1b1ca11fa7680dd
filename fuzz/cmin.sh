#!/usr/bin/env bash
# Minimises fuzz/corpus/<target>/ in place to at most MAX_FILES files (default 400):
# a libFuzzer merge on edge coverage (no hit counters) records which edges each input
# covers, then a greedy set cover keeps the inputs that add the most edges, smallest
# first on ties, until every edge is covered or MAX_FILES is reached. (`cargo fuzz cmin`
# alone keeps every input with a new hit-count feature: thousands of files.)
# Needs the target built: RUSTC_BOOTSTRAP=1 cargo fuzz build -O <target>.
set -euo pipefail
cd "$(dirname "$0")"
t="$1"
max="${MAX_FILES:-400}"
bin="target/x86_64-unknown-linux-gnu/release/$t"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/empty" "$work/out"
"$bin" -merge=1 -use_counters=0 -merge_control_file="$work/ctl" "$work/empty" "corpus/$t" \
  >"$work/merge.log" 2>&1 || { tail -20 "$work/merge.log"; exit 1; }
python3 - "$work/ctl" "$work/out" "$max" <<'PY'
import os, shutil, sys
ctl, out, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(ctl).read().split("\n")
n = int(lines[0]); files = lines[2:2 + n]
cov = {}
for l in lines[2 + n:]:
    p = l.split()
    if len(p) >= 2 and p[0] == "COV":
        cov[int(p[1])] = set(map(int, p[2:]))
every = set().union(*cov.values()) if cov else set()
size = {i: os.path.getsize(files[i]) for i in cov}
covered, chosen = set(), []
while len(chosen) < cap:
    best = max(cov, key=lambda i: (len(cov[i] - covered), -size[i]), default=None)
    if best is None or not cov[best] - covered:
        break
    covered |= cov.pop(best)
    chosen.append(best)
for i in chosen:
    shutil.copy(files[i], out)
print(f"kept {len(chosen)} of {n} inputs, {sum(size[i] for i in chosen)} bytes, "
      f"covering {len(covered)} of {len(every)} edges")
PY
rm -rf "corpus/$t"
mv "$work/out" "corpus/$t"
