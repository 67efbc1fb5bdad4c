"""build.py — builds weft and every peer for the benchmark driver, keeping
going past failures, and says for each program where it is or why it is
missing (a missing peer is reported, never dropped).

    C and C++ (weft programs, kernel and Boost peers, C++20 coroutines):
        cmake -S . -B <build> -G Ninja -DCMAKE_BUILD_TYPE=Release
              -DWEFT_BUILD_BENCH=ON -DWEFT_SANITIZE= ; cmake --build <build> -- -k 0
        If the whole tree does not configure, bench/ is configured on its own
        so that the peers can still be measured.
    Go:   go build -o <build>/bench/peers/gobench   (in bench/peers/go)
    Rust: cargo build --release --locked --target-dir <build>/bench/peers/rust-target
          (in bench/peers/rust; crates come from the Rust package registry on the first
          build): one binary, ringbench, the ring and the `httpd` and `idlemem`
          subcommands (a machine the benchmarks are staged on needs only it)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from benchlib import ROOT, first_line, tail


def first_errors(text: str, limit: int = 3) -> str:
    """The first error lines of a build log (CMake Error, compiler error:, FAILED:), joined."""
    lines = text.splitlines()
    picked = []
    for i, line in enumerate(lines):
        if line.startswith("CMake Error"):
            nxt = " ".join(x.strip() for x in lines[i + 1:i + 5] if x.strip())
            picked.append(f"{line.strip()} {nxt}")
        elif "error:" in line or "error[" in line or line.startswith("FAILED:"):
            picked.append(line.strip())
        if len(picked) >= limit:
            break
    return " | ".join(picked) if picked else tail(text, 3).replace("\n", " | ")


def run_logged(cmd: list[str], log: Path, cwd: Path = ROOT,
               env: dict | None = None) -> tuple[int, str]:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n{p.stdout}\n[exit {p.returncode}]\n")
    return p.returncode, p.stdout


def find_cargo() -> str | None:
    """cargo on PATH, or rustup's default place."""
    return shutil.which("cargo") or next(
        (p for p in (os.path.expanduser("~/.cargo/bin/cargo"),) if os.access(p, os.X_OK)), None)


class Binaries:
    """Where each program is, or why it is missing."""

    def __init__(self) -> None:
        self.paths: dict[tuple[str, str], Path] = {}
        self.missing: dict[tuple[str, str], str] = {}
        self.info: dict = {"steps": []}

    def lookup(self, kind: str, program: str) -> tuple[Path | None, str]:
        key = (kind, program)
        if key in self.paths:
            return self.paths[key], ""
        return None, self.missing.get(key, "not built")


def build(build_dir: Path, skip_build: bool, programs: set[tuple[str, str]]) -> Binaries:
    """Builds (unless skip_build) and locates every (kind, program) asked for."""
    bins = Binaries()
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / "bench-build.log"
    if not skip_build:
        log.write_text("")
    bench_bin = build_dir / "bench"
    weft_reason = ""
    steps = bins.info["steps"]

    if not skip_build:
        # The bench options are passed explicitly: a cache left by an earlier
        # configure (WEFT_BUILD_BENCH=OFF, a sanitizer) would otherwise win.
        rc, out = run_logged(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
                              "-DCMAKE_BUILD_TYPE=Release", "-DWEFT_BUILD_BENCH=ON",
                              "-DWEFT_SANITIZE="], log)
        steps.append({"step": "configure", "rc": rc})
        if rc == 0:
            rc, out = run_logged(["cmake", "--build", str(build_dir), "--", "-k", "0"], log)
            steps.append({"step": "build", "rc": rc})
            if rc != 0:
                weft_reason = f"build failed (see {log}): " + first_errors(out)
        else:
            weft_reason = f"configure failed (see {log}): " + first_errors(out)
            bench_bin = build_dir / "bench-standalone"
            rc2, _ = run_logged(["cmake", "-S", str(ROOT / "bench"), "-B", str(bench_bin), "-G",
                                 "Ninja", "-DCMAKE_BUILD_TYPE=Release"], log)
            if rc2 == 0:
                rc2, _ = run_logged(["cmake", "--build", str(bench_bin), "--", "-k", "0"], log)
            steps.append({"step": "standalone bench build", "rc": rc2})
    elif not (bench_bin / "peers").is_dir() and (build_dir / "bench-standalone").is_dir():
        bench_bin = build_dir / "bench-standalone"

    skipped: dict[str, str] = {}
    skipped_file = bench_bin / "skipped.txt"
    if skipped_file.exists():
        for line in skipped_file.read_text().splitlines():
            if ": " in line:
                prog, why = line.split(": ", 1)
                skipped[prog] = "not configured: " + why

    peers = bench_bin / "peers"
    reasons = {"go": "", "rust": ""}
    prog_reasons: dict[tuple[str, str], str] = {}   # one program of a kind that failed
    if not skip_build:
        peers.mkdir(parents=True, exist_ok=True)
        go = shutil.which("go")
        if go is None:
            reasons["go"] = "go not found on PATH (scripts/deps.sh bench installs golang-go)"
        else:
            env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=mod")
            rc, out = run_logged([go, "build", "-o", str(peers / "gobench"), "."], log,
                                 cwd=ROOT / "bench" / "peers" / "go", env=env)
            steps.append({"step": "go build", "rc": rc})
            if rc != 0:
                reasons["go"] = f"go build failed (see {log}): " + first_errors(out)
        cargo = find_cargo()
        if cargo is None:
            reasons["rust"] = "cargo not found (PATH, ~/.cargo/bin; scripts/deps.sh bench " \
                              "installs Debian's cargo)"
        else:
            target = peers / "rust-target"
            rc, out = run_logged([cargo, "build", "--release", "--locked", "--bin", "ringbench",
                                  "--target-dir", str(target)], log,
                                 cwd=ROOT / "bench" / "peers" / "rust")
            steps.append({"step": "cargo build ringbench", "rc": rc})
            if rc != 0:
                prog_reasons[("rust", "ringbench")] = f"cargo build failed (see {log}): " + \
                    first_errors(out)
            else:
                shutil.copy2(target / "release" / "ringbench", peers / "ringbench")

    for kind, program in sorted(programs):
        key = (kind, program)
        path = (bench_bin / program) if kind == "weft" else (peers / program)
        if kind in reasons and reasons[kind]:
            bins.missing[key] = reasons[kind]
        elif key in prog_reasons:
            bins.missing[key] = prog_reasons[key]
        elif path.is_file() and os.access(path, os.X_OK):
            bins.paths[key] = path
        elif kind in ("go", "rust") or skip_build:
            bins.missing[key] = f"not built: no {path} (--no-build builds nothing)" if skip_build \
                else "not built"
        elif kind == "weft" and weft_reason:
            bins.missing[key] = weft_reason
        elif program in skipped:
            bins.missing[key] = skipped[program]
        elif not skipped_file.exists():
            bins.missing[key] = f"bench/ was not configured in {bench_bin.parent} (see {log})"
        else:
            bins.missing[key] = f"not built (no {path}; see {log})"
    bins.info["bench_bin"] = str(bench_bin)
    return bins


def toolchain(build_dir: Path) -> dict:
    """Compiler and runtime versions for the machine record."""
    cache = {}
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            for key in ("CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER"):
                if line.startswith(key + ":"):
                    cache[key] = line.split("=", 1)[1]
    except OSError:
        pass
    boost = ""
    try:
        m = re.search(r'#define BOOST_LIB_VERSION "([^"]+)"',
                      Path("/usr/include/boost/version.hpp").read_text())
        boost = m.group(1).replace("_", ".") if m else ""
    except OSError:
        pass
    cargo = find_cargo()
    rustc = str(Path(cargo).with_name("rustc")) if cargo else "rustc"
    return {
        "cc": first_line([cache.get("CMAKE_C_COMPILER", "cc"), "--version"]),
        "cxx": first_line([cache.get("CMAKE_CXX_COMPILER", "c++"), "--version"]),
        "go": first_line(["go", "version"]),
        "rustc": first_line([rustc, "--version"]),
        "cmake": first_line(["cmake", "--version"]),
        "boost": boost,
        "nginx": first_line(["nginx", "-v"]).replace("nginx version: ", ""),
        "wrk": (first_line(["wrk", "--version"], any_status=True).split("Copyright")[0].strip()
                if shutil.which("wrk") else ""),
    }
