//! ringbench idlemem: the tokio peer of the "memory per idle thread" benchmark
//! (bench/README.md; the C programs' side is bench/common/idlemem.h).
//!
//!     ringbench idlemem --threads T
//!
//! T async tasks on tokio's current-thread runtime (the driver pins the
//! process to CPU 0), each blocked awaiting one shared `tokio::sync::Notify`.
//! A task is its future, allocated once by `tokio::spawn` (no stack). Main
//! (the future given to `block_on`) allocates and touches its bookkeeping (a
//! join handle and a counter per task), reads the resident set from
//! /proc/self/statm, starts the clock and spawns the T tasks; each registers
//! its `Notified` future, counts its arrival and awaits it; the last to
//! arrive records the time and wakes main. Main reads the resident set again,
//! calls `notify_waiters()` (which wakes every registered task), joins every
//! task and checks that each ran to completion exactly once.
//!
//!     RESULT bench=idlemem impl=tokio-current-thread param=threads=<T>
//!            value=<B/thread> unit=B/thread create_ns=<ns/thread>
//!            rss_before=<B> rss_after=<B> vsz_per_thread=<B>
//!
//! Exit status: 0 measured and checked; 1 "FAIL ..." on stderr; 2 bad command
//! line. (Spawning a task only allocates; when the allocator fails Rust
//! aborts the process, which cannot be caught here: there is no LIMIT exit.)

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::runtime::Builder;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

const USAGE: &str = "usage: ringbench idlemem --threads T   (1 <= T <= 10^8)";

struct Shared {
    threads: usize,
    arrived: AtomicUsize,
    create_ns: AtomicU64,
    ran: Vec<AtomicU32>,
    wake: Notify,
    all_arrived: Notify,
    t0: Instant,
}

#[derive(Clone, Copy)]
struct Mem {
    vsz: u64,
    rss: u64,
}

fn read_statm() -> Result<Mem, String> {
    let text = std::fs::read_to_string("/proc/self/statm")
        .map_err(|e| format!("cannot read /proc/self/statm: {e}"))?;
    let mut f = text.split_whitespace().map(|x| x.parse::<u64>());
    match (f.next(), f.next()) {
        (Some(Ok(size)), Some(Ok(res))) => {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { sysconf(SC_PAGESIZE) } as u64;
            Ok(Mem { vsz: size * page, rss: res * page })
        }
        _ => Err(format!("bad /proc/self/statm: {text:?}")),
    }
}

extern "C" {
    fn sysconf(name: i32) -> i64;
}
const SC_PAGESIZE: i32 = 30; // _SC_PAGESIZE on Linux

/// touch() writes one byte of every page of a slice's memory (a zero over a
/// zero), so that the bookkeeping is resident before the first reading even
/// if the allocator handed out fresh zero pages.
fn touch<T>(v: &mut [T]) {
    let bytes = std::mem::size_of_val(v);
    let p = v.as_mut_ptr() as *mut u8;
    let mut off = 0;
    while off < bytes {
        // SAFETY: off < bytes, inside the slice; every byte written is read
        // back first, so the values do not change.
        unsafe { std::ptr::write_volatile(p.add(off), std::ptr::read_volatile(p.add(off))) };
        off += 4096;
    }
}

fn parse(args: &[String]) -> Result<usize, String> {
    let mut threads = None;
    let mut i = 0;
    while i < args.len() {
        let val = if args[i] == "--threads" && i + 1 < args.len() {
            i += 1;
            args[i].as_str()
        } else if let Some(v) = args[i].strip_prefix("--threads=") {
            v
        } else {
            return Err(format!("unexpected argument {:?}", args[i]));
        };
        match val.parse::<usize>() {
            Ok(t) if (1..=100_000_000).contains(&t) => threads = Some(t),
            _ => return Err(format!("bad value for --threads: {val:?}")),
        }
        i += 1;
    }
    threads.ok_or_else(|| "--threads: missing".to_string())
}

async fn idle_task(sh: Arc<Shared>, i: usize) {
    let woken = std::pin::pin!(sh.wake.notified());
    let mut woken = woken;
    woken.as_mut().enable(); // registered: notify_waiters() will wake it
    if sh.arrived.fetch_add(1, Ordering::Relaxed) + 1 == sh.threads {
        sh.create_ns.store(sh.t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        sh.all_arrived.notify_one(); // a permit if main is not waiting yet
    }
    woken.await;
    sh.ran[i].fetch_add(1, Ordering::Relaxed);
}

fn run(threads: usize) -> Result<String, String> {
    let impl_name = "tokio-current-thread";
    let rt = Builder::new_current_thread()
        .build()
        .map_err(|e| format!("cannot build the runtime: {e}"))?;
    rt.block_on(async move {
        let mut ran: Vec<AtomicU32> = (0..threads).map(|_| AtomicU32::new(0)).collect();
        touch(&mut ran);
        let mut handles: Vec<Option<JoinHandle<()>>> = (0..threads).map(|_| None).collect();
        touch(&mut handles);
        let before = read_statm()?;
        let sh = Arc::new(Shared {
            threads,
            arrived: AtomicUsize::new(0),
            create_ns: AtomicU64::new(0),
            ran,
            wake: Notify::new(),
            all_arrived: Notify::new(),
            t0: Instant::now(),
        });
        for (i, h) in handles.iter_mut().enumerate() {
            *h = Some(tokio::spawn(idle_task(sh.clone(), i)));
        }
        sh.all_arrived.notified().await; // the tasks run meanwhile
        let after = read_statm()?;
        let create_ns = sh.create_ns.load(Ordering::Relaxed);

        if let Some(i) = sh.ran.iter().position(|r| r.load(Ordering::Relaxed) != 0) {
            return Err(format!("{impl_name} idlemem: task {i} went past its wait before it was woken"));
        }
        sh.wake.notify_waiters();
        for (i, h) in handles.iter_mut().enumerate() {
            if let Err(e) = h.take().expect("spawned").await {
                return Err(format!("{impl_name} idlemem: task {i} failed: {e}"));
            }
        }
        let wrong: Vec<usize> =
            (0..threads).filter(|&i| sh.ran[i].load(Ordering::Relaxed) != 1).collect();
        if let Some(&first) = wrong.first() {
            return Err(format!(
                "{impl_name} idlemem: {} of {threads} tasks did not run to completion exactly \
                 once (task {first} ran {} times)",
                wrong.len(),
                sh.ran[first].load(Ordering::Relaxed)
            ));
        }
        let t = threads as f64;
        Ok(format!(
            "RESULT bench=idlemem impl={impl_name} param=threads={threads} value={:.1} \
             unit=B/thread create_ns={:.1} rss_before={} rss_after={} vsz_per_thread={:.0}",
            (after.rss as f64 - before.rss as f64) / t,
            create_ns as f64 / t,
            before.rss,
            after.rss,
            (after.vsz as f64 - before.vsz as f64) / t
        ))
    })
}

/// The `idlemem` subcommand: args are what follows it.
pub fn main(args: Vec<String>) -> ExitCode {
    let threads = match parse(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ringbench idlemem: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(threads) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("FAIL {e}");
            ExitCode::from(1)
        }
    }
}
