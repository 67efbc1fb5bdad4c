"""sections.py — what the report measures: every section, the programs that
feed it, how they are pinned, and which rows are compared with which.

A Section lists Jobs (one program invocation each, printing one RESULT line per
row it names). bench/run.py runs the jobs of a section interleaved (A B C, A B
C, ...) for the warm-up and kept rounds. The ring section is different: its
runs are generated per (N, thread count, implementation) from ring_impls()
and ring_sizes() by run.py, which sizes each run's round count itself;
ring_not_run() and ring_rounds() say which implementations the quick set
runs at its largest size, and how often.

group(impl, param) puts rows that may be compared in one group: the report
gives weft's ratio to the best peer of each group that has a weft row. Rows of
a section's `floors` are shown but never count as "the best peer" (Boost.Context
switches stacks without any scheduler: it is the floor, not a competitor).

preempt_sections(): fixed-work fairness and wake-up latency
under load, sized by the set (quick or full) since their programs take the
amount of work on the command line instead of sizing themselves.

prio_sections(): the prio scheduler's cost against ws (the yield, spawn
and ring programs under WEFT_SCHED=ws and =prio, every uthread at one
level, interleaved) and the cross-process board (weft_board2's three
modes); the priority classes over HTTP are bench/prio_bench.py's.

yieldpass_section(): the yield pass on the seed's two programs
and a sort (bench/README.md, "The yield pass"); a section with min_rounds
runs at least that many kept rounds whatever the set, and a job with
last_round_only runs in the last kept round only (the intervals between
yields, the machine's timer lateness).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Job:
    """One program invocation; it prints one RESULT line per (impl, param) in rows."""
    name: str                         # label in logs and result files
    kind: str                         # "weft" | "peer" | "go" | "rust": where the binary lives
    program: str                      # binary name
    rows: list[tuple[str, str]]       # (impl, param) it is expected to print
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cpus: set[int] | None = None      # process affinity set by the driver, if any
    label: str = ""                   # the impl name the rows get, whatever the program prints
                                      # (the ring, idle memory, and run_section's jobs)
    timeout_s: float | None = None    # a run's time limit, if not run.py's RUN_TIMEOUT_S
    last_round_only: bool = False     # run in the last kept round only (no warm-up, no repeats)
    param_suffix: str = ""            # appended to the params it prints (the scaling section's
                                      # ",k=K"); then only the rows in `rows` are kept
    param_prefix: str = ""            # put before the params it prints (as param_suffix)
    better: str = ""                  # "lower" | "higher" for its rows, if not the section's
    bench: str = ""                   # the bench= its program prints, if not the section's name


@dataclass
class Section:
    name: str
    title: str
    unit_note: str
    better: str                       # "lower" or "higher"
    how: str                          # one line: how the numbers were produced
    pinning: str
    jobs: list[Job]
    group: Callable[[str, str], str] = lambda impl, param: param
    floors: tuple[str, ...] = ()
    min_rounds: int = 0               # kept rounds at least (else the set's)
    meta: dict = field(default_factory=dict)   # section-specific facts for the report


TWO = "0,1"


def _pingpong_group(impl: str, param: str) -> str:
    """Rows that wait the same way (bench/README.md, "Ping-pong")."""
    if param in ("cpus=0", "vcores=1"):
        return "one CPU"
    if impl == "go" or impl == "weft-park-free":
        return "one core in effect"     # two CPUs, but the runtime keeps the pair on one
    if impl in ("kernel-futex", "kernel-pipe"):
        return "two CPUs, one thread each, waiters sleep"
    return "two CPUs, one thread each, waiters spin"


def _netpingpong_group(impl: str, param: str) -> str:
    return "one CPU" if param == "cpus=0" else "two CPUs"


def micro_sections(ncpu: int) -> list[Section]:
    return [
        Section(
            "baseline", "Kernel baselines: ns per switch between two kernel threads",
            "ns per switch (lower is better); a round trip is two switches", "lower",
            "Two kernel threads hand a token back and forth through a pipe (read/write), a futex "
            "(FUTEX_WAKE + FUTEX_WAIT, nobody spins), or take turns calling sched_yield(); the "
            "time of a run ÷ the number of switches.",
            "cpus=0: both threads pinned to CPU 0 (every hand-off is a context switch on one "
            "CPU). unpinned: the kernel places the two threads (normally one per CPU: every "
            "hand-off is a cross-CPU wake-up). sched_yield: both threads pinned to CPU 0.",
            [
                Job("kernel_baseline_pingpong", "peer", "kernel_pingpong",
                    [("kernel-futex", "cpus=0"), ("kernel-futex", "unpinned"),
                     ("kernel-pipe", "cpus=0"), ("kernel-pipe", "unpinned")],
                    args=["--bench=baseline", "--layout=cpus=0", "--layout=unpinned",
                          "futex", "pipe"]),
                Job("kernel_baseline_yield", "peer", "kernel_yield",
                    [("kernel-sched_yield", "cpus=0")], args=["--bench=baseline"]),
            ],
            group=lambda impl, param: "kernel"),
        Section(
            "yield", "Yield: ns per yield, all threads on one core",
            "ns per yield (lower is better)", "lower",
            "k threads on one core each yield in a loop; run time ÷ total yields. Each program "
            "checks that (nearly) every yield handed the core to another thread.",
            "weft: one vcore (weft_config.vcores = 1) and the process pinned to CPU 0 (as "
            "`taskset -c 0`). "
            "Boost.Fiber, Boost.Context and the C++20 coroutines: the one thread pinned to CPU 0. "
            "Go: GOMAXPROCS=1 and the process pinned to CPU 0 (as `taskset -c 0`). "
            "sched_yield: every pthread pinned to CPU 0.",
            [
                Job("weft_yield", "weft", "weft_yield",
                    [("weft", "threads=2"), ("weft", "threads=100"), ("weft", "threads=10000")],
                    cpus={0}),
                Job("boost_fiber_yield", "peer", "boost_fiber_yield",
                    [("boost.fiber", "threads=2"), ("boost.fiber", "threads=100"),
                     ("boost.fiber", "threads=10000")]),
                Job("boost_context_yield", "peer", "boost_context_yield",
                    [("boost.context", "threads=2"), ("boost.context", "threads=100"),
                     ("boost.context", "threads=10000")]),
                Job("coro_yield", "peer", "coro_bench",
                    [("c++20-coro", "threads=2"), ("c++20-coro", "threads=100"),
                     ("c++20-coro", "threads=10000")], args=["yield"], cpus={0}),
                Job("go_yield", "go", "gobench",
                    [("go", "threads=2"), ("go", "threads=100"), ("go", "threads=10000")],
                    args=["yield"], env={"GOMAXPROCS": "1"}, cpus={0}),
                Job("kernel_yield", "peer", "kernel_yield",
                    [("kernel-sched_yield", "threads=2"), ("kernel-sched_yield", "threads=100"),
                     ("kernel-sched_yield", "threads=10000")]),
            ],
            floors=("boost.context",)),
        Section(
            "spawn", "Spawn: ns per spawn + join of an empty thread",
            "ns per spawn+join (lower is better)", "lower",
            "A parent creates an empty thread and waits for it, one at a time (join=each) or "
            "in batches of 1000; run time ÷ threads. weft-stackcopy: the same program with "
            "every child spawned WEFT_STACK_COPY (`weft_spawn --child-stack-copy`), the spawner "
            "an ordinary uthread: a stack-copy uthread that returns without blocking copies no "
            "stack (and one joined before it started runs on its joiner's stack).",
            f"No pinning. weft: all vcores ({ncpu} here); the spawner is an ordinary uthread, "
            "except from=main (main is an ordinary kernel thread). pthread: default attributes. Go: "
            "default GOMAXPROCS, go func + WaitGroup.Wait per spawn or per 1000. Boost.Fiber: one "
            "thread, round_robin, from the main fiber. C++20: the parent coroutine co_awaits each "
            "child task.",
            [
                Job("weft_spawn", "weft", "weft_spawn",
                    [("weft", "join=each"), ("weft", "join=batch1000"),
                     ("weft", "join=each,from=main")]),
                # right after the ordinary one: targets.toml pairs their rounds
                Job("weft_spawn_stackcopy", "weft", "weft_spawn",
                    [("weft-stackcopy", "join=each"), ("weft-stackcopy", "join=batch1000")],
                    args=["--child-stack-copy"]),
                Job("kernel_spawn", "peer", "kernel_spawn", [("pthread", "join=each")]),
                Job("go_spawn", "go", "gobench", [("go", "join=each"), ("go", "join=batch1000")],
                    args=["spawn"]),
                Job("boost_fiber_spawn", "peer", "boost_fiber_spawn",
                    [("boost.fiber", "join=each")]),
                Job("coro_spawn", "peer", "coro_bench", [("c++20-coro", "join=each")],
                    args=["spawn"], cpus={0}),
            ],
            group=lambda impl, param: param.replace(",from=main", "")),
        Section(
            "pingpong", "Ping-pong: round trip between two threads",
            "ns per round trip (lower is better); a round trip is two hand-offs", "lower",
            "Two threads hand a token back and forth; run time ÷ round trips. Which waiters "
            "spin and which sleep decides this benchmark, so rows are compared only with rows "
            "that wait the same way: on two CPUs with one thread per CPU, weft's idle vcore "
            "spins (up to 50 µs, then parks; a hand-off always comes sooner here) and so does "
            "kernel-futex-spin (up to 4000 pauses, then FUTEX_WAIT); kernel-futex and "
            "kernel-pipe sleep in the kernel at every hand-off (shown for reference, no weft "
            "row waits that way). With two CPUs and free placement a runtime may keep the "
            "pair on one CPU: Go does (the woken goroutine goes to its P's runnext slot) and "
            "so does weft (the waker's next slot), so both are compared with the one-CPU rows' "
            "cost, not with a cross-CPU hand-off.",
            "weft-park and weft-condvar: A WEFT_PINNED to vcore 0, B to vcore 1 (every "
            "hand-off crosses CPUs). weft-park-free: both spawned with default attributes, "
            "WEFT_VCORES=1 under taskset -c 0 (vcores=1) or all vcores (vcores=2). kernel: A "
            "pinned to CPU 0, B to CPU 1 (cpus=0,1) or both to CPU 0 (cpus=0). Go: "
            "GOMAXPROCS=2, two goroutines on two unbuffered channels, unpinned (they stay on "
            "one P).",
            [
                Job("weft_pingpong", "weft", "weft_pingpong",
                    [("weft-park", "cpus=0,1"), ("weft-condvar", "cpus=0,1"),
                     ("weft-park-free", f"vcores={ncpu}")]),
                Job("weft_pingpong_1", "weft", "weft_pingpong",
                    [("weft-park-free", "vcores=1")], env={"WEFT_VCORES": "1"}, cpus={0}),
                Job("kernel_pingpong", "peer", "kernel_pingpong",
                    [("kernel-futex", "cpus=0,1"), ("kernel-pipe", "cpus=0,1"),
                     ("kernel-futex-spin", "cpus=0,1"),
                     ("kernel-futex", "cpus=0"), ("kernel-pipe", "cpus=0")]),
                Job("go_pingpong", "go", "gobench", [("go", "gomaxprocs=2")],
                    args=["pingpong"], env={"GOMAXPROCS": "2"}),
            ],
            group=_pingpong_group),
        Section(
            "mutex", "Mutex: contended lock/unlock, 4 threads, short critical section",
            "ns per acquisition = wall time ÷ total acquisitions (lower is better)", "lower",
            "4 threads each take a lock, bump a shared counter and release it in a loop.",
            "weft: 4 uthreads started on vcore i % vcores (WEFT_ON_VCORE), with the library's "
            "default spin and with WEFT_MUTEX_SPIN=0. pthread: 4 unpinned pthreads, "
            "PTHREAD_MUTEX_NORMAL and PTHREAD_MUTEX_ADAPTIVE_NP.",
            [
                Job("weft_mutex", "weft", "weft_mutex", [("weft", "threads=4,spin=default")]),
                Job("weft_mutex_nospin", "weft", "weft_mutex", [("weft", "threads=4,spin=0")],
                    env={"WEFT_MUTEX_SPIN": "0"}),
                Job("kernel_mutex", "peer", "kernel_mutex",
                    [("pthread", "threads=4,kind=normal"), ("pthread", "threads=4,kind=adaptive")]),
            ],
            group=lambda impl, param: "threads=4"),
        Section(
            "netpingpong", "Netpoller: 1-byte pipe ping-pong, round trip",
            "ns per round trip (lower is better); each hand-off wakes a reader parked on an "
            "empty pipe", "lower",
            "Two threads bounce one byte over two pipes; weft's readers park in the netpoller.",
            "weft: WEFT_VCORES=1 (cpus=0) and WEFT_VCORES=2 (A WEFT_PINNED to vcore 0, B to vcore "
            "1: cpus=0,1), under WEFT_POLLER=epoll and uring. kernel-pipe: blocking read/write, "
            "both pinned to CPU 0, pinned to CPUs 0 and 1, and unpinned.",
            [
                Job("weft_netpingpong_epoll_1", "weft", "weft_netpingpong",
                    [("weft-epoll", "cpus=0")], env={"WEFT_POLLER": "epoll", "WEFT_VCORES": "1"}),
                Job("weft_netpingpong_epoll_2", "weft", "weft_netpingpong",
                    [("weft-epoll", "cpus=0,1")], env={"WEFT_POLLER": "epoll", "WEFT_VCORES": "2"}),
                Job("weft_netpingpong_uring_1", "weft", "weft_netpingpong",
                    [("weft-io_uring", "cpus=0")], env={"WEFT_POLLER": "uring", "WEFT_VCORES": "1"}),
                Job("weft_netpingpong_uring_2", "weft", "weft_netpingpong",
                    [("weft-io_uring", "cpus=0,1")],
                    env={"WEFT_POLLER": "uring", "WEFT_VCORES": "2"}),
                Job("kernel_pipe_pingpong", "peer", "kernel_pingpong",
                    [("kernel-pipe", "cpus=0"), ("kernel-pipe", "cpus=0,1"),
                     ("kernel-pipe", "unpinned")],
                    args=["--bench=netpingpong", "--layout=cpus=0", "--layout=cpus=0,1",
                          "--layout=unpinned", "pipe"]),
            ],
            group=_netpingpong_group),
    ]


def pthread_sections() -> list[Section]:
    """Issue 19: unmodified pthread programs on weft (bench/README.md, "pthreads on
    weft"): the thesis's switch table, the thread-pointer switch, sysbench."""
    pre = "weft_pthread_preload"        # runs a peer with libweft-pthread.so preloaded
    weft_env = {"BENCH_IMPL": "weft-pthread"}

    def tls_job(name: str, impl: str, env: dict[str, str]) -> Job:
        return Job(name, "weft", "weft_pingpong", [(impl, "vcores=1")],
                   env={"WEFT_VCORES": "1", **env}, cpus={0}, label=impl, bench="pingpong")

    return [
        Section(
            "pthread", "pthreads on weft: the parlib thesis's switch table",
            "ns per switch (lower is better)", "lower",
            "One unmodified pthread program (peers/kernel/pthread_switch.c): two threads take "
            "turns with sched_yield() (yield: run time ÷ yields that switched, at least 90 % of "
            "them must) or hand a token through one mutex and one condition variable (condvar: "
            "run time ÷ hand-offs). The same binary on the C library's threads (nptl) and with "
            "libweft-pthread.so preloaded (weft-pthread: every pthread a uthread, per-uthread "
            "TLS, the layer's default).",
            "Both pinned to CPU 0 (the process, as `taskset -c 0`); weft-pthread with "
            "WEFT_VCORES=1.",
            [
                Job("nptl_switch", "peer", "pthread_switch", [("nptl", "yield"), ("nptl", "condvar")],
                    cpus={0}),
                Job("weft_pthread_switch", "weft", pre,
                    [("weft-pthread", "yield"), ("weft-pthread", "condvar")],
                    args=["pthread_switch"], env={**weft_env, "WEFT_VCORES": "1"}, cpus={0}),
            ]),
        Section(
            "tls", "Per-uthread TLS: the price of switching the thread pointer",
            "ns per round trip (lower is better); a round trip is two hand-offs", "lower",
            "The park/unpark ping-pong of the ping-pong section (weft_pingpong, weft-park-free: "
            "two uthreads on one vcore, every round trip two direct hand-offs) with shared TLS "
            "(the default: no thread-pointer switch), and with per-uthread TLS loading the "
            "thread pointer with wrfsbase or with arch_prctl(ARCH_SET_FS) "
            "(WEFT_TLS_ARCH_PRCTL=1): the thesis's Table 2.1 (8 ns against 395 ns there).",
            "WEFT_VCORES=1, the process pinned to CPU 0.",
            [
                tls_job("tls_shared", "weft-tls-shared", {"WEFT_TLS": "shared"}),
                tls_job("tls_wrfsbase", "weft-tls-wrfsbase", {"WEFT_TLS": "uthread"}),
                tls_job("tls_arch_prctl", "weft-tls-arch_prctl",
                        {"WEFT_TLS": "uthread", "WEFT_TLS_ARCH_PRCTL": "1"}),
            ],
            group=lambda impl, param: "one vcore"),
        Section(
            "sysbench", "sysbench, unmodified, on NPTL and under LD_PRELOAD",
            "threads: events/s; mutex: locks/s (higher is better)", "higher",
            "Debian's sysbench, a threaded program nobody here wrote (peers/kernel/"
            "sysbench_run.sh): `sysbench threads` (8 threads, each locking one of 4 mutexes "
            "and yielding 100 times per event, 2 s: events/s as sysbench counts them) and "
            "`sysbench mutex` (8 threads, 1 000 000 locks each of a random one of 4096 "
            "mutexes: locks per second of sysbench's own time). sysbench's exit status and "
            "event count are checked (mutex: exactly one event per thread: with shared TLS "
            "sysbench, which keeps its thread id in a __thread variable, counts 1 or 2). On "
            "NPTL and with libweft-pthread.so preloaded (per-uthread TLS).",
            "No pinning; weft-pthread: all vcores.",
            [
                Job("sysbench_nptl", "peer", "sysbench_run.sh",
                    [("nptl", "threads")], args=["threads"]),
                Job("sysbench_weft", "weft", pre, [("weft-pthread", "threads")],
                    args=["sysbench_run.sh", "threads"], env=weft_env),
                Job("sysbench_nptl_mutex", "peer", "sysbench_run.sh",
                    [("nptl", "mutex")], args=["mutex"]),
                Job("sysbench_weft_mutex", "weft", pre, [("weft-pthread", "mutex")],
                    args=["sysbench_run.sh", "mutex"], env=weft_env),
            ]),
    ]


# ---------------------------------------------------------------------------
# Preemption (bench/README.md, "Fairness" and "Wake-up latency")
# ---------------------------------------------------------------------------

FAIR_THREADS = 1024
# Mixing steps per thread: about 1.4 ns each on the 2-CPU EPYC the report was
# made on, so 1024 threads take ~1.7 s (quick) and ~15 s (full) on two CPUs.
FAIR_WORK = {"quick": 2_400_000, "full": 20_000_000}
FAIR_YIELD_EVERY = 700_000      # steps between two weft_yield() calls: ~1 ms
FAIR_PERIODS_US = (100_000, 10_000, 1_000)
FAIR_TIMEOUT_S = 180            # a full run is ~15 s; more on a loaded machine
FAIR_TICK_PAIRS = 9             # kernel_tickcost: pairs of ~0.3 s runs
WAKELAT_SECONDS = {"quick": 2, "full": 5}
WAKELAT_PERIODS_US = (0, 10_000, 1_000)


def preempt_label(period_us: int) -> str:
    """The impl name weft_fairness and weft_wakelat print for a period."""
    if period_us == 0:
        return "weft-nopreempt"
    if period_us % 1000 == 0:
        return f"weft-preempt-{period_us // 1000}ms"
    return f"weft-preempt-{period_us}us"


def preempt_sections(ncpu: int, full: bool) -> list[Section]:
    size = "full" if full else "quick"
    work = ["--threads", str(FAIR_THREADS), "--work", str(FAIR_WORK[size])]
    param = f"threads={FAIR_THREADS}"
    vcores = {"WEFT_VCORES": str(ncpu)}
    fair_jobs = [Job("weft_fairness_nopreempt", "weft", "weft_fairness",
                     [(preempt_label(0), param)], args=work, env=vcores,
                     timeout_s=FAIR_TIMEOUT_S)]
    fair_jobs += [Job(f"weft_fairness_{preempt_label(us)[5:].replace('-', '_')}", "weft", "weft_fairness",
                      [(preempt_label(us), param)], args=work + ["--preempt-us", str(us)],
                      env=vcores, timeout_s=FAIR_TIMEOUT_S) for us in FAIR_PERIODS_US]
    fair_jobs += [
        Job("weft_fairness_1ms_ticker", "weft", "weft_fairness",
            [(preempt_label(1000) + "-ticker", param)], args=work + ["--preempt-us", "1000"],
            env={**vcores, "WEFT_PREEMPT_TICKER": "1"}, timeout_s=FAIR_TIMEOUT_S),
        Job("weft_fairness_yield", "weft", "weft_fairness",
            [(f"weft-yield-{FAIR_YIELD_EVERY}", param)],
            args=work + ["--yield-every", str(FAIR_YIELD_EVERY)], env=vcores,
            timeout_s=FAIR_TIMEOUT_S),
        Job("kernel_fairness", "peer", "kernel_fairness", [("pthread", param)], args=work,
            timeout_s=FAIR_TIMEOUT_S),
        # Not a variant: what a 1 ms timer signal costs on this machine (the
        # floor under weft-preempt-1ms), once, in the last round.
        Job("kernel_tickcost", "peer", "kernel_tickcost", [("kernel-tick", "tick,period=1000us")],
            args=["--period-us", "1000", "--pairs", str(FAIR_TICK_PAIRS)], last_round_only=True),
    ]
    spin = f"spinners={4 * ncpu}"
    seconds = WAKELAT_SECONDS[size]
    return [
        Section(
            "fairness", f"Fairness: {FAIR_THREADS} threads, the same fixed work each",
            "seconds from opening the start gate until the last thread finished (lower is "
            "better)", "lower",
            f"After the fixed-work experiment of Klues's parlib thesis (Berkeley, 2015): {FAIR_THREADS} threads each run "
            f"{FAIR_WORK[size]:,} steps of a mixing loop that calls nothing (the programs print "
            "how long one thread's work takes alone) from the same seed; every thread's result "
            "is checked. All threads are created and wait at a gate; the clock starts "
            "when it opens, and each thread's finish time is recorded. weft-nopreempt: "
            "cooperative, so each vcore runs its threads one after another; weft-preempt-P: "
            "preemption period P (weft_set_preempt_period), ticked by a timer per vcore; "
            "weft-preempt-1ms-ticker: the same with one ticker thread (WEFT_PREEMPT_TICKER=1), "
            "the alternative the runtime measured against; "
            f"weft-yield-{FAIR_YIELD_EVERY}: cooperative, weft_yield() every "
            f"{FAIR_YIELD_EVERY:,} steps (~1 ms); pthread: one kernel thread per thread, "
            "time-sliced by the kernel. The plot: threads completed against time, pointwise "
            "median of the kept runs.",
            f"weft: WEFT_VCORES={ncpu} (one vcore pinned per CPU), thread i spawned on vcore "
            f"i % {ncpu} (WEFT_ON_VCORE; work stealing may move it). pthread: default "
            f"attributes, unpinned across the same {ncpu} CPUs.",
            fair_jobs),
        Section(
            "wakelat", "Wake-up latency under load: a 1 ms sleeper among CPU-bound threads",
            "ms by which the probe's 1 ms sleep overran, p99 of each run (lower is better); "
            "the other columns are medians over the runs", "lower",
            f"A probe uthread sleeps 1 ms (weft_sleep_ns) in a loop while {4 * ncpu} spinners "
            f"(4 × vcores; tight loops that call nothing) keep every vcore busy; main, a kernel "
            f"thread outside the runtime, stops everything after {seconds} s. Lateness of a "
            "wake-up = its time − (sleep start + 1 ms); nearest-rank p50/p99/max of a run. "
            "Without preemption nothing takes a vcore from a spinner: the probe wakes once, "
            "when they stop (max ≈ the whole run).",
            f"weft: WEFT_VCORES={ncpu}, probe spawned on vcore 0, spinner i on vcore i % {ncpu} "
            "(WEFT_ON_VCORE; work stealing may move them; the programs print where they "
            "started and how evenly they ran). The -default row spawns them all with default "
            "attributes instead (no vcore hint, as a user writes it: they start on the "
            "spawner's side and spread by stealing).",
            [Job(f"weft_wakelat_{preempt_label(us)[5:].replace('-', '_')}", "weft", "weft_wakelat",
                 [(preempt_label(us), spin)],
                 args=["--seconds", str(seconds), "--preempt-us", str(us)], env=vcores)
             for us in WAKELAT_PERIODS_US]
            + [Job("weft_wakelat_preempt_1ms_default", "weft", "weft_wakelat",
                   [(preempt_label(1000) + "-default", spin)],
                   args=["--seconds", str(seconds), "--preempt-us", "1000", "--placed", "0"],
                   env=vcores)]),
    ]


# ---------------------------------------------------------------------------
# The prio scheduler (bench/README.md, "Priorities")
# ---------------------------------------------------------------------------

PRIO_RING_ROUNDS = 40          # ring N=8, 10 000 threads: 400 000 messages a run
BOARD_SECONDS = {"quick": 3, "full": 6}
BOARD_PERIOD_MS, BOARD_WORK_K = 20, 1000


def prio_sections(ncpu: int, full: bool) -> list[Section]:
    cost: list[Job] = []
    for sched in ("ws", "prio"):
        env, label = {"WEFT_SCHED": sched}, f"weft-{sched}"
        cost += [
            Job(f"prio_yield_{sched}", "weft", "weft_yield",
                [(label, "yield,threads=2"), (label, "yield,threads=100"),
                 (label, "yield,threads=10000")], env=env, cpus={0}, label=label,
                bench="yield", param_prefix="yield,"),
            Job(f"prio_spawn_{sched}", "weft", "weft_spawn",
                [(label, "spawn,join=each"), (label, "spawn,join=batch1000")], env=env,
                label=label, bench="spawn", param_prefix="spawn,"),
        ]
        for n in (8, 2):
            rounds = str(PRIO_RING_ROUNDS * 8 // n)  # the same messages a run
            cost += [
                Job(f"prio_ring1n{n}_{sched}", "weft", "weft_ring",
                    [(label, f"ring,n={n},threads=10000,vcores=1")],
                    args=["--n", str(n), "--threads", "10000", "--rounds", rounds],
                    env={**env, "WEFT_VCORES": "1"}, cpus={0}, label=label, bench="ring",
                    param_prefix="ring,", param_suffix=",vcores=1", better="higher"),
                Job(f"prio_ring{ncpu}n{n}_{sched}", "weft", "weft_ring",
                    [(label, f"ring,n={n},threads=10000,vcores={ncpu}")],
                    args=["--n", str(n), "--threads", "10000", "--rounds", rounds],
                    env={**env, "WEFT_VCORES": str(ncpu)}, label=label, bench="ring",
                    param_prefix="ring,", param_suffix=f",vcores={ncpu}", better="higher"),
            ]
    # ws and prio alternate job by job within a round (A B, A B): paired ratios
    cost.sort(key=lambda j: (j.name.split("_")[1], j.name.endswith("_prio")))
    size = "full" if full else "quick"
    bparam = f"period={BOARD_PERIOD_MS}ms,work={BOARD_WORK_K}k"
    bargs = ["--seconds", str(BOARD_SECONDS[size]), "--period-ms", str(BOARD_PERIOD_MS),
             "--work-k", str(BOARD_WORK_K)]
    board = [Job(f"board_{m}", "weft", "weft_board2", [(f"weft-probe-{m}", bparam)],
                 args=["--mode", m] + bargs, cpus={0}, timeout_s=60)
             for m in ("alone", "noboard", "board")]
    return [
        Section(
            "priocost", "The prio scheduler's cost: prio against ws, every uthread at one level",
            "the benchmark's own unit (ns per yield or spawn, lower is better; messages/s, "
            "higher is better); the ratio is prio's time ÷ ws's (for the ring: ws's rate ÷ "
            "prio's), the median of the per-round ratios", "lower",
            "The yield, spawn and ring programs of the sections above, unchanged, run once "
            "under WEFT_SCHED=ws and once under WEFT_SCHED=prio, back to back in every round, "
            "every uthread at the default priority (one level). What prio adds on these "
            "paths: reading the uthread's level, a find-first-set over its vcore's 64-bit "
            "level bitmap, a ring of pointers per level that also keeps each queued "
            "uthread's slot (so a priority change can take it out); with one vcore no lock "
            "(ws needs none either); with several, its vcore's lock around each queue "
            f"operation (ws: a CAS per pop; prio's front slot spares a displaced wake-up "
            f"the lock). Ring: N = 8 and N = 2, 10 000 threads, {PRIO_RING_ROUNDS} rounds "
            f"at N = 8 ({PRIO_RING_ROUNDS * 4} at N = 2: the same messages).",
            f"yield and ring at one vcore: as their sections (one vcore, the process pinned to "
            f"CPU 0). spawn and ring at {ncpu} vcores: no pinning, all vcores.",
            cost, group=lambda impl, param: param),
        Section(
            "board", "The priority board: two processes, one CPU",
            "ms by which the probe finished after it was due, p99 of each run (lower is "
            "better); the other columns are medians over the runs", "lower",
            f"Process A runs a latency probe: a uthread at priority 30 wakes every "
            f"{BOARD_PERIOD_MS} ms on a fixed schedule (weft_sleep_until_ns), does "
            f"{BOARD_WORK_K}k rounds of a mixing function (about 5 ms here) and records "
            "how late it finished. Process B (forked by A before either starts weft) runs 2 "
            "CPU-bound uthreads at priority -30 with a 1 ms preemption period. Both use the "
            "prio scheduler on one vcore, on the same CPU. alone: A without B; noboard: A and "
            "B, the kernel shares the CPU between them; board: both attached to one board "
            "(WEFT_BOARD), B's vcore cedes the CPU while A has more urgent work ready (A's "
            "publication also signals B's vcore, which cedes as soon as it next runs), and "
            "while A's level is recent on the board B's vcore thread runs under SCHED_IDLE, "
            "so that A's vcore gets the CPU the moment its timer wakes it (where the process "
            "may leave SCHED_IDLE again; as root here). "
            "b_units_per_s: B's work while A ran (it must go on while A sleeps). "
            f"{BOARD_SECONDS[size]} s of probes a run.",
            "The driver pins the process (A and B, its child) to CPU 0 (`taskset -c 0`); "
            "each has one vcore, on that CPU.",
            board, group=lambda impl, param: param),
    ]


# ---------------------------------------------------------------------------
# The yield pass (bench/README.md, "The yield pass")
# ---------------------------------------------------------------------------

# Total iterations of a run (split between the threads): ~0.3 s at -O2
# uninstrumented on the 2-CPU EPYC VM the report was made on (count ~0.24 ns,
# chase ~2.7 ns, sort ~35 ns an iteration: an element sorted, 4096-key arrays).
YW_WORK = {"count": 1_300_000_000, "chase": 110_000_000, "sort": 9_000_000}
YW_THRESHOLDS = (5, 10, 100, 1000, 10**4, 10**5, 10**6, 10**7, 10**8, 10**9)
YW_QUICK_THRESHOLDS = (10, 1000, 10**6)
YW_QUANTA_US = (10, 100, 1000)
YW_YIELD_EVERY = 10_000           # manual weft_yield(): every 10^4 iterations
YW_THREADS = {"quick": (2, 100), "full": (2, 10, 50, 100)}
YW_ROUNDS = 5                     # kept rounds, quick set included (the 2 % target)
# sort, the small real program, runs fewer variants to keep the section short:
# no weft-flag-10us, no signal preemption, one counter threshold, and only
# flag 100 us records its intervals.
YW_SORT_QUANTA_US = (100, 1000)
YW_SORT_THRESHOLDS = (10**4,)
# kernel_timerlat, once in the last round: this machine's timer lateness for
# the ticker's sleep at a 100 us quantum (it looks twice a quantum).
YW_TIMER_SLEEP_US = 50
YW_TIMER_SLEEPS = 20_000


def yw_work(prog: str, opt: str, threshold: int | None = None) -> int:
    """The work of one run: less where an iteration costs more, so that every
    run lasts ~0.3-0.4 s (the value is per iteration, so runs compare).
    Counting pays for counter mode's check (an RMW on TLS) at every
    iteration, and -O0 doubles its loop; sorting pays ~1.35x for counter
    mode (about a dozen checks an element) and ~1.45x at -O0."""
    w = YW_WORK[prog]
    if prog == "count":
        if threshold is not None:
            w //= 8 if threshold <= 5 else 4 if threshold <= 10 else 2
        if opt == "O0":
            w //= 2
    elif prog == "sort":
        if threshold is not None:
            w = w * 3 // 4
        if opt == "O0":
            w = w * 2 // 3
    elif threshold is not None and threshold <= 10:
        w //= 2
    return w


def yw_fmt_n(n: int) -> str:
    """10, 1000, 10^4 ... 10^9."""
    e = len(str(n)) - 1
    return str(n) if n < 10**4 or n != 10**e else f"10^{e}"


def yw_label_us(us: int) -> str:
    return f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def yw_group(impl: str, param: str) -> str:
    """The summary compares weft in flag mode at 100 us with the pinned
    pthreads, per program, thread count and -O level; the other variants
    are compared with uninstrumented weft by the section's own tables; the
    timer's lateness is a fact about the machine, compared with nothing."""
    if param.endswith(",intervals"):
        return "intervals"
    if impl == "kernel-timer":
        return "timer"
    if impl in ("pthread", "weft-flag-100us"):
        return param
    return param + " (variants)"


def yieldpass_section(full: bool) -> Section:
    size = "full" if full else "quick"
    threads = YW_THREADS[size]
    thresholds = YW_THRESHOLDS if full else YW_QUICK_THRESHOLDS
    quiet = {"WEFT_PREEMPT_SIGNALS": "0"}
    jobs: list[Job] = []
    intervals = [Job("yw_timerlat", "peer", "kernel_timerlat",
                     [("kernel-timer", f"timer,sleep={YW_TIMER_SLEEP_US}us")],
                     args=["--sleeps", str(YW_TIMER_SLEEPS), "--sleep-us", str(YW_TIMER_SLEEP_US)],
                     last_round_only=True)]
    for opt in ("O2", "O0"):
        sfx = "_O0" if opt == "O0" else ""
        for prog in ("count", "chase", "sort"):
            sort = prog == "sort"
            for t in threads:
                if opt == "O0" and not full and t != threads[0]:
                    continue              # quick: -O0 at the smallest thread count only
                param = f"{prog},threads={t},{opt}"
                base = [prog, "--threads", str(t)]
                name = f"yw_{prog}_{t}_{opt}"

                def job(tag: str, program: str, impl: str, args: list[str], env: dict,
                        threshold: int | None = None, kind: str = "weft",
                        record: bool = False) -> None:
                    work = ["--work", str(yw_work(prog, opt, threshold))]
                    jobs.append(Job(f"{name}_{tag}", kind, program + sfx, [(impl, param)],
                                    args=base + work + args, env=env))
                    if record:
                        intervals.append(Job(f"{name}_{tag}_intervals", kind, program + sfx,
                                             [(impl, param + ",intervals")],
                                             args=base + work + args + ["--intervals", "1"],
                                             env=env, last_round_only=True))

                in_quick_o0 = full or opt == "O2"
                job("plain", "weft_yieldwork", "weft-uninstrumented", [], quiet)
                for us in sorted(YW_QUANTA_US, key=lambda q: q != 100):   # 100 us next to plain
                    if (us == 100 or in_quick_o0) and (not sort or us in YW_SORT_QUANTA_US):
                        job(f"flag{us}", "weft_yieldwork_flag", f"weft-flag-{yw_label_us(us)}",
                            ["--preempt-us", str(us)], quiet, record=not sort or us == 100)
                if not in_quick_o0:
                    continue
                job("yield", "weft_yieldwork", f"weft-yield-{YW_YIELD_EVERY}",
                    ["--yield-every", str(YW_YIELD_EVERY)], quiet)
                if not sort:
                    job("signal100", "weft_yieldwork", "weft-signal-100us",
                        ["--preempt-us", "100"], {})
                for n in YW_SORT_THRESHOLDS if sort else thresholds:
                    job(f"counter{n}", f"weft_yieldwork_counter{n}", f"weft-counter-{n}", [],
                        quiet, threshold=n, record=not sort)
                job("pthread", "kernel_yieldwork", "pthread", ["--cpu", "0"], {}, kind="peer")
    sort_set = (f"uninstrumented, flag {' and '.join(yw_label_us(q) for q in YW_SORT_QUANTA_US)}, "
                f"counter {', '.join(yw_fmt_n(n) for n in YW_SORT_THRESHOLDS)}, yield and pthread")
    sets = (f"Ran: the {size} set: threads {', '.join(map(str, threads))}; counter thresholds "
            f"{', '.join(yw_fmt_n(n) for n in thresholds)}; "
            + ("every variant at -O2 and -O0" if full else
               f"-O2, and at -O0 uninstrumented and flag 100 us with {threads[0]} threads")
            + f"; sort: only {sort_set}" + ("" if full else " at -O2"))
    return Section(
        "yieldpass", "The yield pass: counting, pointer chasing and a sort on one core",
        "ns per iteration = the run's total time (start gate to the last thread's finish) ÷ "
        "the iterations of all threads (lower is better)", "lower",
        "The two programs of Weber's EPFL report on an LLVM pass that inserts yields "
        "(\"Introducing scheduling decisions in cooperative multitasking\"), rebuilt (bench/common/yieldwork.h): count, each thread "
        "increments its own counter (a 64-byte struct of its own, through a volatile pointer: "
        "one load, add and store an iteration); chase, each thread walks one shared, randomly "
        "linked doubly linked list of 4096 32-byte nodes (128 KiB, in L2) from its own start "
        "node, next for a lap, prev for the next. And a small real program: "
        "sort, each thread fills an array of its own with 4096 random 32-bit keys and sorts "
        "it with a hand-written quicksort (median-of-three pivot, insertion sort at 16 keys "
        "or fewer, recursion on the smaller part: the pass instruments its entry as well as "
        "its loops), again and again; an iteration is one element sorted, filling and "
        "checking included. The total work is fixed and split between the threads; every "
        "thread's result is checked (sort: every array in order, its keys' sum and xor "
        "unchanged, every thread's share sorted). One binary per compile-time variant, "
        "all from one source compiled by clang-19 (bench/CMakeLists.txt): "
        "weft-uninstrumented (no yields: each uthread runs to completion); "
        f"weft-yield-{YW_YIELD_EVERY} (weft_yield() by hand every {YW_YIELD_EVERY:,} "
        f"iterations; sort: between two arrays once {YW_YIELD_EVERY:,} elements or more were "
        "sorted since the last yield); weft-flag-Q (the pass in flag mode, quantum Q = the "
        "preemption period: the runtime's ticker sets the flag, WEFT_PREEMPT_SIGNALS=0 so no "
        "signal preempts anything); weft-counter-N (the pass in counter mode, a yield every N "
        "checks); weft-signal-100us (uninstrumented, signal preemption every 100 us: what "
        "flag mode replaces); pthread (one kernel thread per thread). kernel-timer "
        f"(peers/kernel_timerlat, once, in the last round): {YW_TIMER_SLEEPS:,} sleeps of "
        f"{YW_TIMER_SLEEP_US} us as the ticker sleeps at a 100 us quantum (absolute "
        "FUTEX_WAIT_BITSET deadline, timer slack 1 ns) while another thread spins: how late "
        "this machine's timer wakes a thread. " + sets + ".",
        "weft: weft_config.vcores = 1 (weft pins its one vcore to a CPU); the ticker thread "
        "pins itself to the CPUs with no vcore. pthread: the process pins itself to CPU 0 "
        "(sched_setaffinity) before creating its threads, so the kernel time-slices them on "
        "one CPU. kernel-timer: the sleeper pinned to the second CPU of the affinity mask, "
        "the spinner to the first, as the ticker and the busy vcore are.",
        jobs + intervals, group=yw_group, min_rounds=YW_ROUNDS,
        meta={"set": size, "threads": list(threads), "thresholds": list(thresholds),
              "quanta_us": list(YW_QUANTA_US), "yield_every": YW_YIELD_EVERY,
              "sort_quanta_us": list(YW_SORT_QUANTA_US),
              "sort_thresholds": list(YW_SORT_THRESHOLDS),
              "timer_sleep_us": YW_TIMER_SLEEP_US,
              "work": {p: yw_work(p, "O2") for p in YW_WORK}})


# ---------------------------------------------------------------------------
# Memory per idle thread (bench/README.md, "Memory per idle thread")
# ---------------------------------------------------------------------------

# Thread counts. A run at 10^6 takes ~2 s (tokio) to ~30 s (weft, Boost.Fiber)
# on the 2-CPU VM, so from IDLEMEM_BIG threads on there is no warm-up run and
# at most IDLEMEM_BIG_ROUNDS[set] kept ones (the resident set per thread
# varies by well under 1 % from run to run; creation times are then one run's).
IDLEMEM_COUNTS = (10_000, 100_000, 1_000_000, 10_000_000)
IDLEMEM_BIG = 1_000_000
IDLEMEM_BIG_ROUNDS = {"quick": 1, "full": 2}
IDLEMEM_TIMEOUT_S = {10_000: 60, 100_000: 90, 1_000_000: 240, 10_000_000: 300}
# Counts at which only some implementations run: 10^7 stack-copy uthreads take
# ~6.5 GB and 20-30 s on the 2-CPU VM; at 10^7 the others would need 4 GB
# (tokio) to 90 GB (weft's ordinary uthreads, Boost.Fiber), or cannot (pthreads).
IDLEMEM_ONLY = {10_000_000: ("weft-stackcopy",)}
# Memory a count needs free (MemAvailable) before it is run, in bytes: short of
# it, its rows say so instead of running a program the kernel would kill (or
# that would push a shared machine's other work out).
IDLEMEM_MEM_NEEDED = {10_000_000: 8 << 30}


def idlemem_section(full: bool) -> Section:
    """T threads each blocked, resident-set growth per thread. run.py runs it
    with run_idlemem(): the counts in order, the implementations interleaved
    per count, and an implementation that hits a limit (exit 75), hangs or is
    killed at some count is recorded as stopping there and not run at larger
    counts (job.label names the implementation)."""
    counts = IDLEMEM_COUNTS
    impls = [   # label, kind, program, args, env, cpus
        ("weft", "weft", "weft_idlemem", [], {"WEFT_VCORES": "1"}, {0}),
        ("weft-stackcopy", "weft", "weft_idlemem", [],
         {"WEFT_VCORES": "1", "WEFT_STACK_COPY": "1"}, {0}),
        ("go", "go", "gobench", ["idlemem"], {"GOMAXPROCS": "1"}, {0}),
        ("tokio-current-thread", "rust", "ringbench", ["idlemem"], {}, {0}),
        ("boost.fiber", "peer", "cpp_idlemem", ["fiber"], {}, {0}),
        ("boost.fiber-pooled", "peer", "cpp_idlemem", ["fiber-pooled"], {}, {0}),
        ("c++20-coro", "peer", "cpp_idlemem", ["coro"], {}, {0}),
        ("pthread", "peer", "kernel_idlemem", [], {}, None),
    ]
    jobs = [Job(f"idlemem_{label.replace('.', '_').replace('-', '_')}_{t}", kind, program,
                [(label, f"threads={t}")], args=args + ["--threads", str(t)], env=env, cpus=cpus,
                label=label, timeout_s=IDLEMEM_TIMEOUT_S.get(t, 240))
            for t in counts for label, kind, program, args, env, cpus in impls
            if label in IDLEMEM_ONLY.get(t, (label,))]
    return Section(
        "idlemem", "Memory per idle thread: T threads, each blocked",
        "bytes of resident memory per thread = (resident set with all T blocked − resident "
        "set before the first create) ÷ T (lower is better); creation = ns from the first "
        "create to the last thread blocked ÷ T", "lower",
        "Each program allocates and touches its bookkeeping (handles, a counter per thread), "
        "reads its resident set (/proc/self/statm), creates T threads with the runtime's "
        "defaults, each of which counts its arrival and blocks: weft, weft_park() (default "
        "attributes: a 256 KiB stack mapped lazily, a guard page while vm.max_map_count "
        "allows, a canary after; weft-stackcopy, the same program with WEFT_STACK_COPY=1 in "
        "its environment: every uthread a stack-copy uthread, which keeps only a copy of the "
        "stack it used, in a per-vcore pool, while it is parked); Go, a receive on one "
        "shared unbuffered channel (the default 2 KiB growable stack); tokio, an async task awaiting one shared Notify (no stack); "
        "Boost.Fiber, a fiber waiting on a fiber condition variable, with the default "
        "fixedsize_stack (128 KiB, malloc'd) and with pooled_fixedsize_stack; C++20, a "
        "stackless coroutine awaiting an event (coro.hpp; a floor, not a peer); pthreads, a "
        "thread with default attributes (8 MiB stack, only reserved) in sem_wait() on one "
        "semaphore. The last thread to arrive records the time. With all T blocked the "
        "program reads the resident set again, wakes every thread, joins them all and checks "
        "that each ran to completion exactly once. Details: create_ns, rss_before/rss_after "
        "(bytes), vsz_per_thread (virtual size growth), the driver's max RSS (wait4, KiB); "
        "pthread: kstack_per_thread (/proc/meminfo KernelStack growth: the kernel's side, "
        "not in the resident set); Go: stack_inuse_per_thread (runtime.MemStats); "
        "weft-stackcopy: stack_copies and copy_bytes_per_thread (the copies held while "
        "parked). " + "; ".join(f"{t:,} threads: only {', '.join(only)}"
                                 for t, only in IDLEMEM_ONLY.items()) + ".",
        "weft and weft-stackcopy: WEFT_VCORES=1 and the process pinned to CPU 0; a spawner "
        "uthread creates the T. Go "
        "(GOMAXPROCS=1), tokio (current-thread), Boost.Fiber (one thread, round_robin) and "
        "the C++20 coroutines: the process pinned to CPU 0. pthreads: unpinned.",
        jobs, floors=("c++20-coro",),
        meta={"counts": list(counts), "big_threads": IDLEMEM_BIG,
              "only": {str(t): list(only) for t, only in IDLEMEM_ONLY.items()},
              "mem_needed": {str(t): b for t, b in IDLEMEM_MEM_NEEDED.items()},
              "big_rounds": IDLEMEM_BIG_ROUNDS["full" if full else "quick"]})


# ---------------------------------------------------------------------------
# The ring benchmark (bench/README.md: the contract every implementation follows)
# ---------------------------------------------------------------------------

ONE_CPU = "one CPU"
ALL_CPUS = "all CPUs"


@dataclass
class RingImpl:
    label: str          # impl name in the report
    cls: str            # ONE_CPU or ALL_CPUS: compared within its class
    kind: str
    program: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cpus: set[int] | None = None
    idiom: str = ""     # one line for the report
    quick_big: bool = False   # also run at RING_QUICK_BIG threads in the quick set


def ring_impls(ncpu: int) -> list[RingImpl]:
    copy = {"WEFT_STACK_COPY": "1"}
    return [
        RingImpl("weft-1vcore", ONE_CPU, "weft", "weft_ring", env={"WEFT_VCORES": "1"},
                 cpus={0},
                 idiom="weft_park/weft_unpark on a one-slot mailbox per uthread (a full "
                       "slot parks the sender); uthreads spawned with default attributes"),
        RingImpl(f"weft-{ncpu}vcores", ALL_CPUS, "weft", "weft_ring",
                 env={"WEFT_VCORES": str(ncpu)},
                 idiom="as weft-1vcore, all vcores: main spawns every uthread with default "
                       "attributes, the vcores take shares of them, wake-ups gather each ring "
                       "on its waker's vcore and stealing spreads the rest"),
        RingImpl("weft-stackcopy-1vcore", ONE_CPU, "weft", "weft_ring",
                 env={"WEFT_VCORES": "1", **copy}, cpus={0}, quick_big=True,
                 idiom="as weft-1vcore, every uthread a stack-copy uthread (WEFT_STACK_COPY=1: "
                       "the part of the shared run stack a uthread uses is copied out when it "
                       "parks and back when it runs)"),
        RingImpl(f"weft-stackcopy-{ncpu}vcores", ALL_CPUS, "weft", "weft_ring",
                 env={"WEFT_VCORES": str(ncpu), **copy}, quick_big=True,
                 idiom=f"as weft-{ncpu}vcores, every uthread a stack-copy uthread "
                       "(WEFT_STACK_COPY=1)"),
        RingImpl(f"weft-{ncpu}vcores-placed", ALL_CPUS, "weft", "weft_ring",
                 args=["--placement", "placed"], env={"WEFT_VCORES": str(ncpu)},
                 idiom="as weft-1vcore, all vcores, ring r spawned on vcore r % vcores "
                       "(WEFT_ON_VCORE: a placement no peer can express; not in the summary)"),
        RingImpl("go-gomaxprocs1", ONE_CPU, "go", "gobench", args=["ring"],
                 env={"GOMAXPROCS": "1"}, cpus={0}, quick_big=True,
                 idiom="goroutines joined by chan int of capacity 1 (a one-slot mailbox)"),
        RingImpl(f"go-gomaxprocs{ncpu}", ALL_CPUS, "go", "gobench", args=["ring"],
                 env={"GOMAXPROCS": str(ncpu)}, quick_big=True, idiom="as go-gomaxprocs1"),
        RingImpl("boost.fiber-1thread", ONE_CPU, "peer", "boost_fiber_ring",
                 args=["--workers", "1"], cpus={0},
                 idiom="fibers joined by Boost.Fiber buffered_channel (capacity 2: one "
                       "value), round_robin scheduler, pooled_fixedsize_stack (the "
                       "program's default: Boost's best here)"),
        RingImpl(f"boost.fiber-ws{ncpu}", ALL_CPUS, "peer", "boost_fiber_ring",
                 args=["--workers", str(ncpu)],
                 idiom=f"the same on {ncpu} threads with the work_stealing algorithm "
                       "(better than shared_work here)"),
        RingImpl("c++20-coro", ONE_CPU, "peer", "coro_bench", args=["ring"], cpus={0},
                 quick_big=True,
                 idiom="stackless coroutines, one-slot mailbox, symmetric transfer "
                       "(bench/peers/cpp/coro.hpp)"),
        RingImpl("tokio-current-thread", ONE_CPU, "rust", "ringbench",
                 args=["--runtime", "current"], cpus={0}, quick_big=True,
                 idiom="async tasks joined by tokio mpsc channels of capacity 1"),
        RingImpl("tokio-multi-thread-1worker", ONE_CPU, "rust", "ringbench",
                 args=["--runtime", "multi", "--workers", "1"], cpus={0},
                 idiom="the same on tokio's multi-thread runtime with one worker, pinned "
                       "with its caller to CPU 0: its LIFO slot runs a woken task next, "
                       "which current-thread's queue does not"),
        RingImpl("tokio-multi-thread", ALL_CPUS, "rust", "ringbench",
                 args=["--runtime", "multi", "--workers", str(ncpu)], quick_big=True,
                 idiom=f"the same on tokio's multi-thread runtime, {ncpu} workers"),
        RingImpl("pthread", ALL_CPUS, "peer", "kernel_ring",
                 idiom="one pthread per ring member (default attributes), a one-slot "
                       "mailbox guarded by two semaphores (full, empty)"),
    ]


def ring_sizes(full: bool) -> list[int]:
    """Total thread counts N×R (multiples of 8, so both N = 2 and N = 8 divide them)."""
    return ([16, 128, 1000, 10000, 100000, 1000000] if full
            else [16, 1000, 10000, 100000, RING_QUICK_BIG])


# The quick set's largest size: only the implementations with quick_big run
# there (a Go run takes 10-30 s at 10^6 threads on the 2-CPU VM, ordinary weft
# uthreads 20-35 s to create), without a warm-up and with RING_QUICK_BIG_ROUNDS
# kept runs (M is then the sizing rule's first guess, see run.py).
RING_QUICK_BIG = 1_000_000
RING_QUICK_BIG_ROUNDS = 1


def ring_not_run(im: RingImpl, threads: int, full: bool) -> str:
    """Why im is left out at this size in this set ("" if it runs)."""
    if not full and threads >= RING_QUICK_BIG and not im.quick_big:
        return f"not run at {threads:,} threads in the quick set, only in the full set"
    return ""


def ring_rounds(threads: int, full: bool, warmup: int, rounds: int) -> tuple[int, int]:
    """(warm-up, kept) rounds of the ring at this size."""
    if not full and threads >= RING_QUICK_BIG:
        return 0, min(rounds, RING_QUICK_BIG_ROUNDS)
    return warmup, rounds


RING_NS = (2, 8)


# ---------------------------------------------------------------------------
# Scaling: throughput against cores (bench/README.md, "Scaling")
# ---------------------------------------------------------------------------

SCALING_RING_THREADS = 10_000
SCALING_RING_NS = (8, 2)


def scaling_ks(ncpu: int) -> list[int]:
    """K = 1, 2, 4, 8, ... and the machine's CPU count."""
    ks = [1]
    while ks[-1] * 2 < ncpu:
        ks.append(ks[-1] * 2)
    if ncpu > 1:
        ks.append(ncpu)
    return ks


def scaling_ring_impls(k: int) -> list[RingImpl]:
    """The ring at K CPUs: every implementation limited to CPUs 0..K-1, one
    configuration for every K (so its curve is one runtime's speed-up)."""
    cpus = set(range(k))
    cls = f"{k} CPUs"
    return [
        RingImpl("weft", cls, "weft", "weft_ring", env={"WEFT_VCORES": str(k)}, cpus=cpus,
                 idiom="default placement, WEFT_VCORES=K"),
        RingImpl("go", cls, "go", "gobench", args=["ring"], env={"GOMAXPROCS": str(k)},
                 cpus=cpus, idiom="GOMAXPROCS=K"),
        RingImpl("tokio", cls, "rust", "ringbench",
                 args=["--runtime", "multi", "--workers", str(k)], cpus=cpus,
                 idiom="multi-thread runtime, K workers"),
        RingImpl("boost.fiber", cls, "peer", "boost_fiber_ring", args=["--workers", str(k)],
                 cpus=cpus, idiom="K threads"),
        RingImpl("pthread", cls, "peer", "kernel_ring", cpus=cpus,
                 idiom="a kernel thread per ring member, on K CPUs"),
    ]


def _scaling_group(impl: str, param: str) -> str:
    k = param.rsplit(",k=", 1)[1]
    return f"{'spawn-batch1000' if param.startswith('join=') else 'mutex'},k={k}"


def scaling_section(ncpu: int) -> Section:
    """Spawn+join in batches and the contended mutex at K CPUs (the ring's
    runs are generated by run.py from scaling_ring_impls)."""
    jobs: list[Job] = []
    for k in scaling_ks(ncpu):
        cpus, sfx = set(range(k)), f",k={k}"
        jobs += [
            Job(f"scaling_weft_spawn_{k}", "weft", "weft_spawn", [("weft", "join=batch1000" + sfx)],
                env={"WEFT_VCORES": str(k)}, cpus=cpus, param_suffix=sfx, bench="spawn"),
            Job(f"scaling_go_spawn_{k}", "go", "gobench", [("go", "join=batch1000" + sfx)],
                args=["spawn"], env={"GOMAXPROCS": str(k)}, cpus=cpus, param_suffix=sfx,
                bench="spawn"),
            Job(f"scaling_weft_mutex_{k}", "weft", "weft_mutex",
                [("weft", "threads=4,spin=default" + sfx)], env={"WEFT_VCORES": str(k)},
                cpus=cpus, param_suffix=sfx, bench="mutex"),
            Job(f"scaling_pthread_mutex_{k}", "peer", "kernel_mutex",
                [("pthread", "threads=4,kind=normal" + sfx),
                 ("pthread", "threads=4,kind=adaptive" + sfx)], cpus=cpus, param_suffix=sfx,
                bench="mutex"),
        ]
    ks = ", ".join(map(str, scaling_ks(ncpu)))
    return Section(
        "scaling", "Scaling: throughput against cores",
        "messages/s (ring), spawns/s and lock acquisitions/s, higher is better; the tables "
        "also give the speed-up over one CPU", "lower",
        f"Each benchmark at K = {ks} CPUs: the ring (N = 8 and N = 2, "
        f"{SCALING_RING_THREADS:,} threads, default placement), spawn + join in batches of "
        "1000, the contended mutex (4 threads whatever K: how a lock's hand-off behaves "
        "as the threads spread over more cores), and HTTP (the HTTP section's file and "
        "checks, 100 keep-alive connections per server CPU, wrk with one thread per CPU of "
        "the machine's upper half, so only at K ≤ half the CPUs: weft `httpd -v K`, nginx "
        "with K worker processes, Go with GOMAXPROCS=K, hyper on tokio's multi-thread "
        "runtime with K workers, and the thread-per-connection build on K CPUs). One "
        "configuration per runtime at every K (tokio's ring: the multi-thread runtime even at "
        "K = 1), so a curve is that runtime's own speed-up.",
        "Every implementation limited to CPUs 0..K-1 (`taskset -c 0-(K-1)`, set by the "
        "driver), WEFT_VCORES=K, GOMAXPROCS=K, tokio's multi-thread runtime with K workers, "
        "Boost.Fiber on K threads, kernel threads on K CPUs.",
        jobs, group=_scaling_group, meta={"ks": scaling_ks(ncpu),
                                          "ring_threads": SCALING_RING_THREADS,
                                          "ring_ns": list(SCALING_RING_NS)})
