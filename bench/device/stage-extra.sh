#!/usr/bin/env bash
# stage-extra.sh: after ../shared/tools/stage-bench, adds what a bare many-core
# machine lacks for the report's HTTP rows (nginx, wrk and their libraries,
# into .bench-stage/bin and .bench-stage/lib) and a runner for the device
# tool (.bench-stage/dev.sh). Run it in the project root; then, with the
# device tool: run  carry [".bench-stage"]  command ".bench-stage/dev.sh"
# (ONLY=sections, default yield,pingpong,scaling; T=seconds for run.py,
# default 430). What comes back: machine.txt, run.log and res.tgz (the
# results file: render it with bench/report.py FILE --out DIR).
set -euo pipefail
S=.bench-stage
[ -d "$S" ] || { echo "stage-extra: run ../shared/tools/stage-bench first" >&2; exit 2; }
mkdir -p "$S/bin" "$S/lib"
for p in nginx wrk; do
  f=$(command -v "$p" || true)
  [ -z "$f" ] && [ -x "/usr/sbin/$p" ] && f=/usr/sbin/$p
  [ -n "$f" ] || { echo "stage-extra: $p not installed (scripts/deps.sh bench)" >&2; exit 2; }
  cp "$f" "$S/bin/"
  ldd "$f" | awk '/=> \//{print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|librt|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$S/lib/"; done
done
cat > "$S/dev.sh" <<'RUN'
#!/usr/bin/env bash
# Runs bench/run.py on the device machine (see bench/device/stage-extra.sh).
cd "$(dirname "$0")"
export PATH=$PWD/bin:$PATH LD_LIBRARY_PATH=$PWD/lib PYTHONUNBUFFERED=1
{ lscpu | head -20; nproc; uname -r; nginx -v; wrk -v | head -1; } > "$OUT/machine.txt" 2>&1
timeout "${T:-430}" python3 bench/run.py --no-build --build-dir build \
  --only "${ONLY:-yield,pingpong,scaling}" --no-report > "$OUT/run.log" 2>&1
echo "run.py rc=$?" >> "$OUT/run.log"
tar czf "$OUT/res.tgz" -C bench results
RUN
chmod +x "$S/dev.sh"
rm -rf "$S/bench/results"; mkdir -p "$S/bench/results"
du -sh "$S" | awk '{print "staged " $1 " in .bench-stage (with nginx, wrk and dev.sh)"}'
