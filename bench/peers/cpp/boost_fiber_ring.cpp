// boost_fiber_ring.cpp — the ring benchmark (contract: bench/README.md's
// ring contract; command line in ring.hpp) with Boost.Fiber:
//
//   boost_fiber_ring --n N --threads T --rounds M [--workers W]
//                    [--stack pooled|fixed] [--algo rr|shared|ws]
//
//   W = 1 (the default)  impl=boost.fiber-1thread: every fiber on the main thread.
//   W >= 2               impl=boost.fiber-<algo><W> (e.g. boost.fiber-ws2): the
//                        main thread and W-1 std::threads all run the algorithm.
//   --stack, --algo      Boost's own tuning knobs (fiber_config.hpp). The
//                        defaults are the configuration measured best on the
//                        2-CPU test machine (bench/README.md, "Boost.Fiber's
//                        configuration"): pooled stacks; round_robin with one
//                        thread, work_stealing with more. A NOTE line prints
//                        the configuration used.
//
// Mailboxes: one boost::fibers::buffered_channel<int> of capacity 2 per fiber,
// its inbox. Boost's ring buffer keeps one slot free, so capacity 2 holds one
// value: the one-slot mailbox of the other peers (C++20 coro::mailbox, tokio
// mpsc(1), Go's chan int of capacity 1, weft's one-slot box). push() onto an
// empty slot wakes the receiver and returns without switching; it blocks only
// on a full slot, which happens: the next round's originator launches its
// token right after relaying this round's, so several tokens of a ring can be
// on the move at once. The unbuffered_channel would be the wrong model here:
// its push() always suspends the sender until the receiver has taken the
// value (a rendezvous, two more switches per message).
//
// Timing (the one boundary of the ring contract, the same in every
// implementation): (W >= 2: start the W-1 helper threads; each and then main
// install the algorithm.) Main creates T detached fibers (untimed); each
// counts itself in on `started`, then the originator of round 0 of each ring
// waits on the start gate and everyone else on its inbox. Main waits (a fiber
// wait: its thread runs fibers meanwhile) until all T have started, starts
// the clock and opens the gate. The fiber that receives a ring's last message
// counts the ring done; the one that counts the last ring takes the end time
// and opens the `finished` gate main waits on. Every fiber then waits at the
// release gate instead of ending, so no fiber ends (and frees its stack)
// inside the timed span. Untimed: main opens the release gate and waits until
// every fiber has ended (`ended`). The helper threads wait on a fiber
// condition variable until main releases them, so their dispatchers keep
// running fibers the whole time. No warm-up: each fiber has run once, up to
// its first wait, before the clock starts.
//
// Creation failing (std::bad_alloc from a stack or a channel, std::system_error
// from a thread) exits 75 with a LIMIT line; see ring.hpp.
#include "bench.hpp"
#include "fiber_config.hpp"
#include "ring.hpp"

#include <boost/fiber/all.hpp>

#include <atomic>
#include <deque>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace bf = boost::fibers;

namespace {

using fibercfg::countdown;
using fibercfg::gate;

struct ring_state {
    explicit ring_state(const ring::args &a)
        : n(a.n), rounds(a.rounds), started(a.threads), ended(a.threads),
          rings_left(a.threads / a.n) {}

    const std::uint64_t n, rounds;
    std::deque<bf::buffered_channel<int>> inbox;   // inbox[k]: fiber k receives from it
    gate start, finished, release;
    countdown started, ended;
    std::atomic<std::uint64_t> rings_left;         // rings whose last message has not arrived
    bench::clock::time_point end;                  // set before `finished` opens
    std::atomic<std::uint64_t> sends{0}, bad{0};
};

[[noreturn]] void channel_broken(const char *op)
{
    bench::fail(std::string("boost.fiber ring: channel ") + op + " did not succeed");
}

// Fiber k: index i = k % n in ring k / n. The protocol of the spec, word for word.
void member(ring_state &st, std::uint64_t k)
{
    const std::uint64_t n = st.n, rounds = st.rounds, i = k % n, base = k - i;
    bf::buffered_channel<int> &in = st.inbox[k], &out = st.inbox[base + (i + 1) % n];
    std::uint64_t sends = 0, bad = 0;
    st.started.arrive();
    if (i == 0)
        st.start.wait();   // the originator of round 0
    for (std::uint64_t r = 0; r < rounds; ++r) {
        int v = 0;
        if (i == r % n) {
            if (out.push(1) != bf::channel_op_status::success)
                channel_broken("push");
            ++sends;
            if (in.pop(v) != bf::channel_op_status::success)
                channel_broken("pop");
            if (v != int(n))
                ++bad;
        } else {
            if (in.pop(v) != bf::channel_op_status::success)
                channel_broken("pop");
            if (out.push(v + 1) != bf::channel_op_status::success)
                channel_broken("push");
            ++sends;
        }
    }
    if (i == (rounds - 1) % n &&   // it received the ring's last message
        st.rings_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        st.end = bench::clock::now();
        st.finished.open();
    }
    st.release.wait();   // untimed from here
    st.sends.fetch_add(sends, std::memory_order_relaxed);
    st.bad.fetch_add(bad, std::memory_order_relaxed);
    st.ended.arrive();
}

// The helper threads of work stealing: install the algorithm (its constructor
// waits for all `workers` threads), then block the thread's main fiber until
// main says stop, which leaves the dispatcher running stolen fibers.
struct helpers {
    gate stop;
    std::vector<std::thread> threads;

    void start(unsigned workers, fibercfg::algo_kind algo)
    {
        for (unsigned w = 1; w < workers; ++w)
            threads.emplace_back([this, workers, algo] {
                fibercfg::install(algo, workers);
                stop.wait();
            });
    }

    void finish()
    {
        stop.open();
        for (auto &t : threads)
            t.join();
    }
};

} // namespace

int main(int argc, char **argv)
{
    // Defaults: Boost's best on the 2-CPU test machine (see the header).
    fibercfg::config cfg =
        fibercfg::strip(argc, argv, {fibercfg::stack_kind::pooled, fibercfg::algo_kind::rr},
                        "boost_fiber_ring");
    const ring::args a = ring::parse(argc, argv, 1, "boost_fiber_ring", true);
    if (a.workers > 1 && !cfg.algo_given)
        cfg.algo = fibercfg::algo_kind::ws;   // round_robin cannot run more than one thread
    if (a.workers > 1 && cfg.algo == fibercfg::algo_kind::rr)
        ring::usage("boost_fiber_ring", true, "--algo rr: round_robin runs one thread only");
    const std::string impl = a.workers == 1 ? std::string("boost.fiber-1thread")
                                            : std::string("boost.fiber-") +
                                                  fibercfg::name(cfg.algo) +
                                                  std::to_string(a.workers);

    ring_state st(a);
    try {
        for (std::uint64_t k = 0; k < a.threads; ++k)
            st.inbox.emplace_back(2);   // capacity 2 = one value, see above
    } catch (const std::bad_alloc &) {
        ring::limit("channel allocation", ring::strerror_str(ENOMEM), 0, a.threads);
    }

    helpers help;
    if (a.workers > 1) {
        try {
            help.start(a.workers, cfg.algo);
        } catch (const std::system_error &e) {
            ring::limit("worker thread creation", e.code().message(), 0, a.threads);
        }
    }
    fibercfg::install(cfg.algo, a.workers);
    fibercfg::stacks stacks(cfg.stack);

    std::uint64_t made = 0;
    try {
        for (; made < a.threads; ++made)
            bf::fiber(std::allocator_arg, stacks.get(), member, std::ref(st), made).detach();
    } catch (const std::bad_alloc &) {
        ring::limit("fiber creation", ring::strerror_str(ENOMEM), made, a.threads);
    } catch (const std::system_error &e) {
        ring::limit("fiber creation", e.code().message(), made, a.threads);
    }
    st.started.wait();   // untimed: every fiber has run up to its first wait (or nearly)

    auto t0 = bench::clock::now();
    st.start.open();
    st.finished.wait();
    auto t1 = st.end;
    st.release.open();   // untimed from here
    st.ended.wait();

    if (a.workers > 1)
        help.finish();
    ring::check(impl, a, st.sends.load(), st.bad.load(), a.threads);
    ring::report(impl, a, t1 - t0);
    bench::note(impl, std::string("stack=") + fibercfg::name(cfg.stack) +
                          " algo=" + fibercfg::name(cfg.algo) +
                          " workers=" + std::to_string(a.workers));
    return 0;
}
