// coro_bench.cpp — the C++20 coroutine peer: the scheduler of coro.hpp (a
// small symmetric-transfer scheduler written here, one thread) measured the
// way the other peers are.
//
//   coro_bench yield   ns per co_await coro::yield() with 2, 100 and 10 000
//                      coroutines, the thread pinned to CPU 0 (as
//                      boost_fiber_yield). Each coroutine yields n times and
//                      counts handovers (another coroutine ran since its last
//                      turn); the total yield count and the handovers are
//                      checked.
//   coro_bench spawn   ns per spawn + join of an empty task from a parent
//                      coroutine, one at a time, not pinned (as
//                      boost_fiber_spawn):
//                        join=each    co_await sched.spawn(child(i)): the
//                                     child goes through the ready queue;
//                        join=inline  co_await child(i): the lazy child runs
//                                     at once, like a call (no queue).
//                      Each child returns i and the parent checks it.
//   coro_bench ring --n N --threads T --rounds M
//                      the ring benchmark (bench/peers/cpp/ring.hpp has the
//                      command line): T coroutines on one thread, each with a
//                      one-slot coro::mailbox<int> it receives from; the start
//                      gate is a coro::event. No --workers: one thread.
//
// Timing (the one boundary of bench/README.md, in yield and ring alike):
// every coroutine is spawned and run once, untimed (sched.run() returns when
// all wait), up to its first wait: the start gate (a coro::event; in the ring
// only the originators of round 0, the others wait on their mailboxes). The
// clock starts when the gate is set; the coroutine that finishes last (yield:
// the last to finish its yields; ring: the one that receives the last ring's
// last message) takes the end time itself. Every coroutine then waits on a
// release event instead of finishing, so no coroutine ends (and frees its
// frame) inside the timed span; main sets it and runs them to their end
// afterwards, untimed. No warm-up in the ring; the yield runs follow
// bench::measure()'s doubling warm-up, as every yield program.
//
// Build (gcc 12 or clang 19): g++ -std=c++20 -O2 -Wall -Wextra coro_bench.cpp
#include "bench.hpp"
#include "coro.hpp"
#include "ring.hpp"

#include <memory>
#include <new>
#include <string_view>

namespace {

// ---- yield ----------------------------------------------------------------------

struct yield_state {
    coro::event gate, release;      // the start gate; the end of the untimed wait
    int running = 0;                // coroutines not yet done with their yields
    bench::clock::time_point end;   // taken by the last of them
    int last = -1;                  // the coroutine that ran last
    std::uint64_t handovers = 0;    // yields after which another coroutine had run
    std::uint64_t done = 0;         // yields done
};

coro::task<> yielder(yield_state &st, int id, std::uint64_t n)
{
    co_await st.gate;
    for (std::uint64_t i = 0; i < n; ++i) {
        co_await coro::yield();
        if (st.last != id) {
            st.last = id;
            ++st.handovers;
        }
        ++st.done;
    }
    if (--st.running == 0)
        st.end = bench::clock::now();
    co_await st.release;   // untimed from here
}

struct yield_run {
    int ncoros;

    bench::nanoseconds operator()(std::uint64_t n) const
    {
        coro::scheduler sched;
        yield_state st;
        st.running = ncoros;
        for (int id = 0; id < ncoros; ++id)
            sched.spawn(yielder(st, id, n));   // detached: each frees itself when done
        sched.run();   // untimed: every coroutine runs up to the gate
        auto t0 = bench::clock::now();
        st.gate.set();
        sched.run();   // until every coroutine waits on the release
        auto t1 = st.end;
        st.release.set();
        sched.run();   // untimed: they finish and free their frames

        const std::uint64_t total = n * std::uint64_t(ncoros);
        if (st.done != total)
            bench::fail("c++20-coro yield: " + std::to_string(st.done) + " yields done, " +
                        std::to_string(total) + " asked");
        if (st.handovers + 2 * std::uint64_t(ncoros) < total)
            bench::fail("c++20-coro yield: only " + std::to_string(st.handovers) + " of " +
                        std::to_string(total) + " yields switched coroutine");
        return t1 - t0;
    }
};

int yield_main()
{
    bench::pin_self(0);
    bench::note("c++20-coro", "one thread pinned to CPU 0; coro.hpp: symmetric transfer, "
                              "intrusive FIFO ready queue");
    for (int k : {2, 100, 10000}) {
        auto s = bench::measure(yield_run{k}, k >= 10000 ? 10 : 1000, (1u << 30) / unsigned(k));
        bench::result("yield", "c++20-coro", "threads=" + std::to_string(k),
                      s.per_iter_ns() / k, "ns/yield");
    }
    return 0;
}

// ---- spawn ----------------------------------------------------------------------

coro::task<std::uint64_t> empty_child(std::uint64_t i) { co_return i; }

coro::task<> spawn_each(coro::scheduler &sched, std::uint64_t n, std::uint64_t &joined)
{
    for (std::uint64_t i = 1; i <= n; ++i) {
        std::uint64_t got = co_await sched.spawn(empty_child(i));
        if (got != i)
            bench::fail("c++20-coro spawn: child " + std::to_string(i) + " returned " +
                        std::to_string(got));
        ++joined;
    }
}

coro::task<> call_each(std::uint64_t n, std::uint64_t &joined)
{
    for (std::uint64_t i = 1; i <= n; ++i) {
        std::uint64_t got = co_await empty_child(i);
        if (got != i)
            bench::fail("c++20-coro spawn inline: child " + std::to_string(i) + " returned " +
                        std::to_string(got));
        ++joined;
    }
}

template <bool Inline>
bench::nanoseconds spawn_run(std::uint64_t n)
{
    coro::scheduler sched;
    std::uint64_t joined = 0;
    auto t0 = bench::clock::now();
    auto parent = sched.spawn(Inline ? call_each(n, joined) : spawn_each(sched, n, joined));
    sched.run();
    auto t1 = bench::clock::now();
    if (!parent.done() || joined != n)
        bench::fail("c++20-coro spawn: " + std::to_string(joined) + " of " + std::to_string(n) +
                    " children joined");
    return t1 - t0;
}

int spawn_main()
{
    auto s = bench::measure(spawn_run<false>, 1000, 1u << 28);
    bench::result("spawn", "c++20-coro", "join=each", s.per_iter_ns(), "ns/spawn");
    s = bench::measure(spawn_run<true>, 1000, 1u << 28);
    bench::result("spawn", "c++20-coro", "join=inline", s.per_iter_ns(), "ns/spawn");
    return 0;
}

// ---- ring -----------------------------------------------------------------------

struct ring_state {
    std::uint64_t n, rounds;
    coro::event gate;              // opened when the clock starts
    coro::event release;           // set after the clock has stopped
    std::uint64_t rings_left;      // rings whose last message has not arrived
    bench::clock::time_point end;  // taken when the last ring's last message arrives
    std::uint64_t sends = 0;       // summed over the finished coroutines
    std::uint64_t bad = 0;         // rounds that came back with v != n
    std::uint64_t finished = 0;
};

// One thread of a ring, index i in it: the protocol of the spec, word for word.
coro::task<> ring_member(ring_state &st, std::uint64_t i, coro::mailbox<int> &in,
                         coro::mailbox<int> &out)
{
    const std::uint64_t n = st.n, rounds = st.rounds;
    std::uint64_t sends = 0;
    if (i == 0)
        co_await st.gate;   // the originator of round 0
    for (std::uint64_t r = 0; r < rounds; ++r) {
        if (i == r % n) {
            co_await out.send(1);
            ++sends;
            int v = co_await in.recv();
            if (v != int(n))
                ++st.bad;
        } else {
            int v = co_await in.recv();
            co_await out.send(v + 1);
            ++sends;
        }
    }
    if (i == (rounds - 1) % n && --st.rings_left == 0)   // it got the ring's last message
        st.end = bench::clock::now();
    co_await st.release;   // untimed from here
    st.sends += sends;
    ++st.finished;
}

int ring_main(int argc, char **argv)
{
    const std::string impl = "c++20-coro";
    const ring::args a = ring::parse(argc, argv, 2, "coro_bench ring", false);
    const std::uint64_t n = a.n, threads = a.threads;

    ring_state st{n, a.rounds, {}, {}, threads / n, {}, 0, 0, 0};
    coro::scheduler sched;
    std::unique_ptr<coro::mailbox<int>[]> boxes;
    try {
        boxes.reset(new coro::mailbox<int>[threads]);
    } catch (const std::bad_alloc &) {
        ring::limit("mailbox allocation", ring::strerror_str(ENOMEM), 0, threads);
    }
    std::uint64_t made = 0;
    try {
        for (; made < threads; ++made) {
            const std::uint64_t base = made - made % n, i = made % n;
            sched.spawn(ring_member(st, i, boxes[made], boxes[base + (i + 1) % n]));   // detached
        }
    } catch (const std::bad_alloc &) {
        ring::limit("coroutine frame allocation", ring::strerror_str(ENOMEM), made, threads);
    }
    sched.run();   // untimed: every coroutine runs up to its first wait

    auto t0 = bench::clock::now();
    st.gate.set();
    sched.run();   // until every coroutine waits on the release (or nothing can run)
    auto t1 = st.rings_left == 0 ? st.end : bench::clock::now();
    st.release.set();
    sched.run();   // untimed: every coroutine finishes (checked below)

    ring::check(impl, a, st.sends, st.bad, st.finished);
    ring::report(impl, a, t1 - t0);
    return 0;
}

[[noreturn]] void usage()
{
    std::cerr << "usage: coro_bench yield | spawn | ring --n N --threads T --rounds M\n";
    std::exit(2);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    std::string_view cmd = argv[1];
    if (cmd == "yield" && argc == 2)
        return yield_main();
    if (cmd == "spawn" && argc == 2)
        return spawn_main();
    if (cmd == "ring")
        return ring_main(argc, argv);
    usage();
}
