#!/usr/bin/env bash
# Measures what ships to browsers and to Cloudflare, and writes docs/sizes.md:
# - the browser package of kya-core (core/pkg/: wasm, JS glue, types), raw and gzip -9;
# - the Worker's total upload as wrangler reports it (`wrangler deploy --dry-run`, offline).
# Rerun after a change: bash scripts/measure-sizes.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build-core-wasm.sh
bash scripts/build-worker.sh

size() { wc -c < "$1" | tr -d ' '; }
gz() { gzip -9 -c "$1" | wc -c | tr -d ' '; }
kib() { awk -v bytes="$1" 'BEGIN { printf "%.1f KiB", bytes / 1024 }'; }

rows=""
total=0
total_gz=0
for file in core/pkg/kya_core_bg.wasm core/pkg/kya_core.js core/pkg/kya_core.d.ts; do
  raw=$(size "$file"); zipped=$(gz "$file")
  total=$((total + raw)); total_gz=$((total_gz + zipped))
  rows+="| \`$file\` | $raw ($(kib "$raw")) | $zipped ($(kib "$zipped")) |"$'\n'
done
rows+="| **package total** | $total ($(kib "$total")) | $total_gz ($(kib "$total_gz")) |"

dry_run_dir=$(mktemp -d)
trap 'rm -rf "$dry_run_dir"' EXIT
upload=$(WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false \
  node_modules/.bin/wrangler deploy --dry-run --outdir "$dry_run_dir" 2>&1 | grep -o 'Total Upload: .*')
worker_wasm=$(size edge-api/build/kya_edge_api_bg.wasm)
asset_files=0; asset_bytes=0; asset_gz=0
while IFS= read -r file; do
  asset_files=$((asset_files + 1))
  asset_bytes=$((asset_bytes + $(size "$file"))); asset_gz=$((asset_gz + $(gz "$file")))
done < <(find edge-api/public -type f | sort)

cat > docs/sizes.md <<MD
# Sizes

Measured by \`bash scripts/measure-sizes.sh\` (it rebuilds first), on $(date -u +%Y-%m-%d), at commit
$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- core edge-api || echo ' plus uncommitted changes').

## Browser package of kya-core (\`core/pkg/\`, feature \`browser\`)

Built size first (opt-level z but Ed25519's field arithmetic at 3, LTO: \`scripts/build-core-wasm.sh\`) and binaryen's \`wasm-opt -Oz\`.

| file | bytes | gzip -9 bytes |
|---|---|---|
$rows

## Worker

| what | size |
|---|---|
| \`wrangler deploy --dry-run\` | $upload |
| of which \`edge-api/build/kya_edge_api_bg.wasm\` (after \`wasm-opt -O1\`) | $worker_wasm bytes ($(kib "$worker_wasm")) |
| explorer's static assets (\`edge-api/public/\`, uploaded beside the Worker, not in it) | $asset_files files, $asset_bytes bytes ($(kib "$asset_bytes")), gzip -9 $asset_gz bytes ($(kib "$asset_gz")) |

Cloudflare's limit for a Worker is 3 MiB gzip on the Free plan and 10 MiB on paid plans.
MD
cat docs/sizes.md
