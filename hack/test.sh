#!/usr/bin/env bash
# Runs every test of the repository and prints one summary line at the end: go vet, the Go
# tests (unit, fuzz seeds, end-to-end with the real kubectl and etcd), then the conformance
# smoke (a fixed list of upstream [Conformance] specs that pass today, against a lab).
set -uo pipefail
export PATH=/usr/local/go/bin:$PATH
cd "$(dirname "$0")/.."
start=$(date +%s)
log=$(mktemp)
# phase NAME records how long the phase that just ended took (since the last call), so a slow
# run says where its time went: "TIMES: vet 40s, unit 610s, …" before the summary.
times=""
mark=$start
phase() {
  local now
  now=$(date +%s)
  times="${times:+$times, }$1 $((now - mark))s"
  mark=$now
}
go vet ./... || { echo "SUMMARY: FAIL (go vet)"; exit 1; }
phase vet
# Unit and privileged package tests two at a time; the end-to-end packages one at a time: each
# brings up API servers or a whole lab with BFD at 4 x 300 ms, and two beside each other on 2
# cores starved the BFD sessions through an agent restart (TestLabMesh lost 109 of 176 pings).
go test -count=1 -timeout 45m $(go list ./... | grep -v -e '/tests/e2e/' -e '/tests/scale') 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
phase unit
# The scale harness's 100-node smoke (kwok, 3,000 pods, skiff alone) runs among them.
go test -count=1 -timeout 45m -p 1 ./tests/e2e/... ./tests/scale/... 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
phase e2e
pkgs_ok=$(grep -c '^ok ' "$log")
pkgs_fail=$(grep -c '^FAIL\s' "$log")
grep -E '^ok ' "$log" > "$log.pkgs"
rm -f "$log"
# The smoke's prerequisites first, timed on their own (upstream's e2e.test and BusyBox are
# compiled once per checkout).
make --no-print-directory deps build conformance-bin
phase smoke-build
if make --no-print-directory conformance-smoke; then
  smoke="passed ($(wc -l < <(grep -v '^#' tests/conformance/smoke.txt | grep -v '^\s*$')) specs)"
else
  smoke="FAILED"
  rc=1
fi
phase smoke
secs=$(( $(date +%s) - start ))
# The slowest test packages, from go test's ok lines.
echo "TIMES: $times; slowest packages: $(grep -hE '^ok ' "$log.pkgs" 2>/dev/null | awk '{print $NF, $2}' | sort -rn | head -5 | awk '{printf "%s%s %s", (NR>1?", ":""), $2, $1}' | sed 's#github.com/skiff-sh/skiff/##g')"
rm -f "$log.pkgs"
if [ "$rc" -eq 0 ]; then
  echo "SUMMARY: PASS — $pkgs_ok packages ok, 0 failed, conformance smoke $smoke, ${secs}s"
else
  echo "SUMMARY: FAIL — $pkgs_ok packages ok, $pkgs_fail failed, conformance smoke $smoke, ${secs}s"
fi
exit "$rc"
