//! ringbench: the tokio peers of weft's benchmarks, one binary (a machine
//! the benchmarks are staged on gets every tokio peer with it): the ring (one
//! contract for weft and all its peers: bench/README.md), and as subcommands
//! the HTTP section's hyper server (`ringbench httpd`, src/httpd.rs) and the
//! memory-per-idle-thread program (`ringbench idlemem`, src/idlemem.rs).
//!
//!     ringbench [ring] --runtime current|multi --n N --threads T --rounds M [--workers W]
//!     ringbench httpd --root DIR [--port P] [--workers K]
//!     ringbench idlemem --threads T
//!
//! T tasks form T/N rings of N. Each task owns the receiving end of an
//! `mpsc::channel(1)` (its inbox) and a sender to its right neighbour's inbox.
//! In round r the task with index r % N in its ring sends 1 and waits for the
//! token to come back; the others add 1 and pass it on, so the originator must
//! get N back. Rings run independently; a ring can hold several tokens at
//! once (the next round's originator sends right after relaying).
//!
//! `--runtime current` runs every task on tokio's current-thread scheduler
//! (impl `tokio-current-thread`); `--runtime multi` on the multi-thread,
//! work-stealing one with W workers (impl `tokio-multi-thread`; W defaults to
//! `std::thread::available_parallelism`). `--workers` is refused with
//! `current`, which has no workers to choose.
//!
//! Timing (the one boundary of bench/README.md's ring contract): every task
//! is spawned into a `JoinSet` first; each counts itself in (an atomic count
//! whose last decrement wakes main through a `Notify`) and blocks in its first
//! wait: the originator of round 0 of each ring on a start gate, a `watch`
//! channel flipped to `true`, the others on their inboxes. Main waits until
//! all T are in, starts the clock and opens the gate. The task that receives
//! a ring's last message counts the ring done; the one that counts the last
//! ring takes the end time and wakes main (another `Notify`). Every task then
//! waits on a second `watch` channel (the release) instead of returning, so no
//! task ends inside the timed span: joining the tasks and dropping them and
//! their channels are untimed. Afterwards every originator must have seen N
//! in every round, every task must have sent M messages and the total must
//! be T*M. No warm-up: each task has been polled once, up to its first wait,
//! before the clock starts.
//!
//! Output follows bench/common/bench.h:
//!
//!     RESULT bench=ring impl=<impl> param=n=<N>,threads=<T> value=<msg/s> unit=msg/s
//!     NOTE impl=<impl> n=<N> threads=<T> rounds=<M> seconds=<s> messages=<T*M>
//!
//! Exit status: 0 measured and checked; 1 "FAIL ..." on stderr, the work was
//! wrong; 2 bad command line; 75 "LIMIT ..." on stderr, the runtime's threads
//! could not be started. (Spawning a task only allocates; when the allocator
//! fails Rust aborts the process, which cannot be caught here.)

mod httpd;
mod idlemem;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Runtime};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;

const USAGE: &str = "\
usage: ringbench --runtime current|multi --n N --threads T --rounds M [--workers W]
  --runtime  tokio scheduler: current (current-thread) or multi (multi-thread)
  --n        tasks per ring, >= 2
  --threads  tasks in all, a positive multiple of --n
  --rounds   rounds, >= 1
  --workers  worker threads, >= 1 (only with --runtime multi;
             default: the available parallelism)";

/// The scheduler a run uses.
#[derive(Clone, Copy)]
enum Flavor {
    CurrentThread,
    MultiThread { workers: usize },
}

/// A checked command line.
struct Config {
    flavor: Flavor,
    n: usize,
    threads: usize,
    rounds: u64,
}

impl Config {
    /// The name in the RESULT and NOTE lines.
    fn impl_name(&self) -> &'static str {
        match self.flavor {
            Flavor::CurrentThread => "tokio-current-thread",
            Flavor::MultiThread { .. } => "tokio-multi-thread",
        }
    }

    fn messages(&self) -> u64 {
        self.threads as u64 * self.rounds
    }
}

/// Parses the command line. Options take their value as the next argument
/// or after `=`; every one but --workers is required, none may repeat.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Config, String> {
    let (mut runtime, mut n, mut threads, mut rounds, mut workers) = (None, None, None, None, None);
    while let Some(arg) = args.next() {
        let Some(opt) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument '{arg}'"));
        };
        let (name, value) = match opt.split_once('=') {
            Some((name, value)) => (name, value.to_string()),
            None => {
                let value = args
                    .next()
                    .ok_or_else(|| format!("--{opt} needs a value"))?;
                (opt, value)
            }
        };
        let slot = match name {
            "runtime" => &mut runtime,
            "n" => &mut n,
            "threads" => &mut threads,
            "rounds" => &mut rounds,
            "workers" => &mut workers,
            _ => return Err(format!("unknown option --{name}")),
        };
        if slot.replace(value).is_some() {
            return Err(format!("--{name} given twice"));
        }
    }

    let number = |name: &str, value: Option<String>| -> Result<u64, String> {
        let value = value.ok_or_else(|| format!("--{name} is required"))?;
        value
            .parse::<u64>()
            .map_err(|_| format!("--{name}: '{value}' is not a non-negative integer"))
    };
    let n = number("n", n)?;
    let threads = number("threads", threads)?;
    let rounds = number("rounds", rounds)?;
    if n < 2 {
        return Err(format!("--n must be >= 2, got {n}"));
    }
    if threads == 0 || threads % n != 0 {
        return Err(format!(
            "--threads must be a positive multiple of --n ({n}), got {threads}"
        ));
    }
    if rounds == 0 {
        return Err("--rounds must be >= 1, got 0".to_string());
    }
    let (Ok(n), Ok(threads), Some(_)) = (
        usize::try_from(n),
        usize::try_from(threads),
        threads.checked_mul(rounds),
    ) else {
        return Err(format!(
            "--threads {threads} times --rounds {rounds} is too large"
        ));
    };

    let flavor = match runtime.as_deref() {
        Some("current") => match workers {
            None => Flavor::CurrentThread,
            Some(_) => return Err("--workers only applies to --runtime multi".to_string()),
        },
        Some("multi") => {
            let workers = match workers {
                Some(w) => match w.parse::<usize>() {
                    Ok(w) if w >= 1 => w,
                    _ => return Err(format!("--workers must be an integer >= 1, got '{w}'")),
                },
                None => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            };
            Flavor::MultiThread { workers }
        }
        Some(other) => return Err(format!("--runtime must be current or multi, got '{other}'")),
        None => return Err("--runtime is required".to_string()),
    };
    Ok(Config {
        flavor,
        n,
        threads,
        rounds,
    })
}

/// What one task did.
#[derive(Default)]
struct Tally {
    sends: u64,
    /// Rounds this task originated whose token came back other than N.
    wrong: u64,
    /// One such token, for the message.
    wrong_token: usize,
}

/// What main and every task share: the ready count, the end of the run.
struct Shared {
    /// Tasks not yet at their first wait; the last one to arrive notifies `ready`.
    not_ready: AtomicUsize,
    ready: Notify,
    /// Rings whose last message has not yet arrived.
    rings_left: AtomicUsize,
    /// Taken by the task that finished the last ring.
    end: OnceLock<Instant>,
    /// Set when a task stopped with an error (the run will not finish).
    broken: AtomicBool,
    /// Notified when `end` is set or `broken`.
    finished: Notify,
}

/// A task of a ring: `member`, then (untimed) the wait for the release. The
/// task that received its ring's last message counts the ring done, and the
/// last ring's stops the clock; a task that fails wakes main, which would
/// otherwise wait for ever.
async fn task(
    index: usize,
    n: usize,
    rounds: u64,
    inbox: mpsc::Receiver<usize>,
    right: mpsc::Sender<usize>,
    gate: Option<watch::Receiver<bool>>,
    shared: Arc<Shared>,
    mut release: watch::Receiver<bool>,
) -> Result<Tally, String> {
    if shared.not_ready.fetch_sub(1, Ordering::AcqRel) == 1 {
        shared.ready.notify_one();
    }
    let result = member(index, n, rounds, inbox, right, gate).await;
    if result.is_err() {
        shared.broken.store(true, Ordering::Release);
        shared.finished.notify_one();
    } else if index as u64 == (rounds - 1) % n as u64
        && shared.rings_left.fetch_sub(1, Ordering::AcqRel) == 1
    {
        let _ = shared.end.set(Instant::now());
        shared.finished.notify_one();
    }
    release
        .wait_for(|&go| go)
        .await
        .map_err(|_| "the release gate was dropped".to_string())?;
    result
}

/// Task `index` (0..n) of one ring: receives from `inbox`, sends to `right`,
/// and originates the token in the rounds r with r % n == index. The
/// originator of round 0 first waits for the start gate. A closed channel
/// means a neighbour has gone (it failed); the task then stops with an error
/// rather than waiting forever.
async fn member(
    index: usize,
    n: usize,
    rounds: u64,
    mut inbox: mpsc::Receiver<usize>,
    right: mpsc::Sender<usize>,
    gate: Option<watch::Receiver<bool>>,
) -> Result<Tally, String> {
    let gone = || format!("task {index} of a ring lost a neighbour");
    if let Some(mut gate) = gate {
        gate.wait_for(|&open| open)
            .await
            .map_err(|_| "the start gate was dropped".to_string())?;
    }
    let mut tally = Tally::default();
    for round in 0..rounds {
        if round % n as u64 == index as u64 {
            right.send(1).await.map_err(|_| gone())?;
            tally.sends += 1;
            let token = inbox.recv().await.ok_or_else(gone)?;
            if token != n {
                tally.wrong += 1;
                tally.wrong_token = token;
            }
        } else {
            let token = inbox.recv().await.ok_or_else(gone)?;
            right.send(token + 1).await.map_err(|_| gone())?;
            tally.sends += 1;
        }
    }
    Ok(tally)
}

/// The sum of every task's tally, plus the tasks that did not finish.
#[derive(Default)]
struct Totals {
    sends: u64,
    wrong: u64,
    wrong_token: usize,
    /// Tasks that did not send exactly `rounds` messages.
    short: usize,
    /// Tasks that stopped with an error or panicked, and the first one's
    /// reason (tasks are joined as they end, so the first is the cause, the
    /// others its neighbours losing their channels).
    broken: usize,
    first_broken: String,
}

impl Totals {
    fn broke(&mut self, why: String) {
        if self.broken == 0 {
            self.first_broken = why;
        }
        self.broken += 1;
    }
}

/// Spawns the rings, waits until every task is at its first wait, opens the
/// gate, waits for the last ring to finish, releases and joins every task;
/// returns the time from opening the gate to the end of the last ring, and
/// the totals to check.
async fn run(cfg: &Config) -> (Duration, Totals) {
    let (open, gate) = watch::channel(false);
    let (let_go, release) = watch::channel(false);
    let shared = Arc::new(Shared {
        not_ready: AtomicUsize::new(cfg.threads),
        ready: Notify::new(),
        rings_left: AtomicUsize::new(cfg.threads / cfg.n),
        end: OnceLock::new(),
        broken: AtomicBool::new(false),
        finished: Notify::new(),
    });
    let mut tasks = JoinSet::new();
    for _ in 0..cfg.threads / cfg.n {
        // Channel i is task i's inbox; task i sends on channel i + 1 (mod n).
        let (mut senders, inboxes): (Vec<_>, Vec<_>) = (0..cfg.n).map(|_| mpsc::channel(1)).unzip();
        senders.rotate_left(1);
        for (index, (inbox, right)) in inboxes.into_iter().zip(senders).enumerate() {
            let gate = (index == 0).then(|| gate.clone());
            tasks.spawn(task(
                index,
                cfg.n,
                cfg.rounds,
                inbox,
                right,
                gate,
                shared.clone(),
                release.clone(),
            ));
        }
    }

    while shared.not_ready.load(Ordering::Acquire) != 0 {
        shared.ready.notified().await; // a permit, if the last task came first
    }
    let start = Instant::now();
    open.send_replace(true);
    while shared.end.get().is_none() && !shared.broken.load(Ordering::Acquire) {
        shared.finished.notified().await;
    }
    let elapsed = shared.end.get().map_or(Duration::ZERO, |end| *end - start);
    let_go.send_replace(true); // untimed from here

    let mut totals = Totals::default();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(tally)) => {
                totals.sends += tally.sends;
                if tally.sends != cfg.rounds {
                    totals.short += 1;
                }
                if tally.wrong != 0 {
                    totals.wrong += tally.wrong;
                    totals.wrong_token = tally.wrong_token;
                }
            }
            Ok(Err(why)) => totals.broke(why),
            Err(join_error) => totals.broke(join_error.to_string()),
        }
    }
    (elapsed, totals)
}

/// Builds the scheduler. Building the multi-thread one starts its workers, and
/// when the OS refuses a thread tokio panics inside `Builder::build` rather
/// than returning an error; unwinding from there can then hang on the workers
/// already started. So while the runtime is built a panic hook reports the
/// limit and exits at once (status 75, nothing measured yet).
fn build_runtime(flavor: Flavor, threads: usize) -> Result<Runtime, String> {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let why = info.payload_as_str().unwrap_or("panic");
        eprintln!("LIMIT tokio runtime: {why} after 0 of {threads} threads");
        std::process::exit(75);
    }));
    let built = match flavor {
        Flavor::CurrentThread => Builder::new_current_thread().build(),
        Flavor::MultiThread { workers } => {
            Builder::new_multi_thread().worker_threads(workers).build()
        }
    };
    std::panic::set_hook(default_hook);
    built.map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    // One binary for every tokio peer (a staged machine copies just this one):
    // `ringbench httpd ...` and `ringbench idlemem ...`; anything else is the ring.
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("httpd") => {
            httpd::main(args.split_off(1));
            return ExitCode::SUCCESS;
        }
        Some("idlemem") => return idlemem::main(args.split_off(1)),
        Some("ring") => {
            args.remove(0);
        }
        _ => {}
    }
    let cfg = match parse_args(args.into_iter()) {
        Ok(cfg) => cfg,
        Err(why) => {
            eprintln!("ringbench: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let name = cfg.impl_name();

    let runtime = match build_runtime(cfg.flavor, cfg.threads) {
        Ok(runtime) => runtime,
        Err(why) => {
            eprintln!(
                "LIMIT tokio runtime: {why} after 0 of {} threads",
                cfg.threads
            );
            return ExitCode::from(75);
        }
    };
    let (elapsed, totals) = runtime.block_on(run(&cfg));

    let fail = |what: String| {
        eprintln!("FAIL {name} ring: {what}");
        ExitCode::from(1)
    };
    if totals.broken != 0 {
        return fail(format!(
            "{} tasks stopped early, first: {}",
            totals.broken, totals.first_broken
        ));
    }
    if totals.wrong != 0 {
        return fail(format!(
            "{} rounds ended with a wrong token at the originator (e.g. {}, want {})",
            totals.wrong, totals.wrong_token, cfg.n
        ));
    }
    if totals.short != 0 {
        return fail(format!(
            "{} of {} tasks did not send {} messages",
            totals.short, cfg.threads, cfg.rounds
        ));
    }
    if totals.sends != cfg.messages() {
        return fail(format!(
            "{} messages sent, want {}",
            totals.sends,
            cfg.messages()
        ));
    }

    let seconds = elapsed.as_secs_f64();
    println!(
        "RESULT bench=ring impl={name} param=n={},threads={} value={:.3} unit=msg/s",
        cfg.n,
        cfg.threads,
        cfg.messages() as f64 / seconds
    );
    println!(
        "NOTE impl={name} n={} threads={} rounds={} seconds={seconds:.6} messages={}",
        cfg.n,
        cfg.threads,
        cfg.rounds,
        cfg.messages()
    );
    ExitCode::SUCCESS
}
