#!/usr/bin/env bash
# Builds starting corpora for the fuzz targets from the tests' plans, into
# ${1:-fuzz/seeds}/<target>/ (not committed: `cargo fuzz cmin` folds what matters into
# fuzz/corpus/). Needs `planc` on PATH or PLANC=/path/to/planc.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/fuzz/seeds}"
planc="${PLANC:-planc}"
mkdir -p "$out"/{reader,bytecode,template,roundtrip,vm_outputs}
mapfile -t plans < <(cd "$root" && find tests/corpus crates/*/tests examples -type f \
  \( -name '*.json' -o -name '*.jsonc' -o -name '*.txt' -o -name '*.md' \) \
  -not -path '*/snapshots/*' -not -path '*/data/*' 2>/dev/null | sort)
i=0
for p in "${plans[@]}"; do
  i=$((i + 1))
  name="$(printf '%03d' "$i")_$(basename "$p")"
  cp "$root/$p" "$out/reader/$name"
  # Structured targets read any bytes; plan text is as good a start as any.
  for t in template roundtrip vm_outputs; do cp "$root/$p" "$out/$t/$name"; done
  "$planc" compile -q "$root/$p" -o "$out/bytecode/$name.pbc" 2>/dev/null || true
  "$planc" compile -q --strip "$root/$p" -o "$out/bytecode/$name.stripped.pbc" 2>/dev/null || true
done
echo "seeded from ${#plans[@]} plans into $out"
