#!/usr/bin/env bash
# Runs every test of the repository and prints one summary line at the end.
set -uo pipefail
export PATH=/usr/local/go/bin:$PATH
cd "$(dirname "$0")/.."
start=$(date +%s)
log=$(mktemp)
go vet ./... || { echo "SUMMARY: FAIL (go vet)"; exit 1; }
go test -count=1 -timeout 45m ./... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
pkgs_ok=$(grep -c '^ok ' "$log")
pkgs_fail=$(grep -c '^FAIL\s' "$log")
secs=$(( $(date +%s) - start ))
if [ "$rc" -eq 0 ]; then
  echo "SUMMARY: PASS — $pkgs_ok packages ok, 0 failed, ${secs}s"
else
  echo "SUMMARY: FAIL — $pkgs_ok packages ok, $pkgs_fail failed, ${secs}s"
fi
rm -f "$log"
exit "$rc"
