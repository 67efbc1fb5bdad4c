// boost_fiber_ring.cpp — the ring benchmark (contract: ring spec of issue 4;
// command line in ring.hpp) with Boost.Fiber:
//
//   boost_fiber_ring --n N --threads T --rounds M [--workers W]
//
//   W = 1 (the default)  impl=boost.fiber-1thread: every fiber on the main
//                        thread, Boost's default round_robin scheduler.
//   W >= 2               impl=boost.fiber-ws<W>: the main thread and W-1
//                        std::threads all run boost::fibers::algo::work_stealing
//                        (Boost's default suspend=false: a thread with nothing
//                        to run keeps trying to steal instead of sleeping).
//
// Mailboxes: one boost::fibers::buffered_channel<int> of capacity 2 per fiber,
// its inbox. Boost's ring buffer keeps one slot free, so capacity 2 holds one
// value: the one-slot mailbox of the other peers (C++20 coro::mailbox, tokio
// mpsc(1), weft's one-slot box). push() onto an empty slot wakes the receiver
// and returns without switching; it blocks only on a full slot, which happens:
// the next round's originator launches its token right after relaying this
// round's, so several tokens of a ring can be on the move at once. The
// unbuffered_channel would be the wrong model here: its push() always suspends
// the sender until the receiver has taken the value (a rendezvous, two more
// switches per message), where Go's unbuffered send to a waiting receiver
// hands the value over and goes on.
//
// Fiber stacks: Boost's default, fixedsize_stack of stack_traits::default_size()
// (128 KiB, malloc'd, touched only at the top). No other change of Boost's
// defaults.
//
// Sequence: (W >= 2: start the W-1 helper threads; each and then main install
// work_stealing(W), whose constructor waits for all W.) Main creates T
// detached fibers (untimed); each counts itself in on `started`, then the
// originator of round 0 of each ring waits on the gate and everyone else on
// its inbox. Main waits (a fiber wait: its thread runs fibers meanwhile) until
// all T have started, starts the clock, opens the gate, waits on `finished`,
// stops the clock. The helper threads wait on a fiber condition variable
// until main releases them, so their dispatchers keep running (stealing)
// fibers the whole time.
//
// Creation failing (std::bad_alloc from a stack or a channel, std::system_error
// from a thread) exits 75 with a LIMIT line; see ring.hpp.
#include "bench.hpp"
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

// A one-shot gate: wait() blocks the calling fiber until open().
class gate {
public:
    void wait()
    {
        std::unique_lock<bf::mutex> lk(mtx_);
        cv_.wait(lk, [this] { return open_; });
    }
    void open()
    {
        {
            std::lock_guard<bf::mutex> lk(mtx_);
            open_ = true;
        }
        cv_.notify_all();
    }

private:
    bf::mutex mtx_;
    bf::condition_variable cv_;
    bool open_ = false;
};

// A countdown (Go's WaitGroup): arrive() from each of `count` fibers, wait()
// until all have. Only the last arrival takes the lock.
class countdown {
public:
    explicit countdown(std::uint64_t count) : left_(count) {}
    void arrive()
    {
        if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<bf::mutex> lk(mtx_);
            cv_.notify_all();
        }
    }
    void wait()
    {
        std::unique_lock<bf::mutex> lk(mtx_);
        cv_.wait(lk, [this] { return left_.load(std::memory_order_acquire) == 0; });
    }

private:
    std::atomic<std::uint64_t> left_;
    bf::mutex mtx_;
    bf::condition_variable cv_;
};

struct ring_state {
    explicit ring_state(const ring::args &a)
        : n(a.n), rounds(a.rounds), started(a.threads), finished(a.threads) {}

    const std::uint64_t n, rounds;
    std::deque<bf::buffered_channel<int>> inbox;   // inbox[k]: fiber k receives from it
    gate start;
    countdown started, finished;
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
    st.sends.fetch_add(sends, std::memory_order_relaxed);
    st.bad.fetch_add(bad, std::memory_order_relaxed);
    st.finished.arrive();
}

// The helper threads of work stealing: install the algorithm (its constructor
// waits for all `workers` threads), then block the thread's main fiber until
// main says stop, which leaves the dispatcher running stolen fibers.
struct helpers {
    bf::mutex mtx;
    bf::condition_variable cv;
    bool stop = false;
    std::vector<std::thread> threads;

    void start(unsigned workers)
    {
        for (unsigned w = 1; w < workers; ++w)
            threads.emplace_back([this, workers] {
                bf::use_scheduling_algorithm<bf::algo::work_stealing>(workers);
                std::unique_lock<bf::mutex> lk(mtx);
                cv.wait(lk, [this] { return stop; });
            });
    }

    void finish()
    {
        {
            std::lock_guard<bf::mutex> lk(mtx);
            stop = true;
        }
        cv.notify_all();
        for (auto &t : threads)
            t.join();
    }
};

} // namespace

int main(int argc, char **argv)
{
    const ring::args a = ring::parse(argc, argv, 1, "boost_fiber_ring", true);
    const std::string impl =
        a.workers == 1 ? "boost.fiber-1thread" : "boost.fiber-ws" + std::to_string(a.workers);

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
            help.start(a.workers);
        } catch (const std::system_error &e) {
            ring::limit("worker thread creation", e.code().message(), 0, a.threads);
        }
        bf::use_scheduling_algorithm<bf::algo::work_stealing>(a.workers);
    }

    std::uint64_t made = 0;
    try {
        for (; made < a.threads; ++made)
            bf::fiber(member, std::ref(st), made).detach();
    } catch (const std::bad_alloc &) {
        ring::limit("fiber creation", ring::strerror_str(ENOMEM), made, a.threads);
    } catch (const std::system_error &e) {
        ring::limit("fiber creation", e.code().message(), made, a.threads);
    }
    st.started.wait();   // untimed: every fiber has run up to its first wait (or nearly)

    auto t0 = bench::clock::now();
    st.start.open();
    st.finished.wait();
    auto t1 = bench::clock::now();

    if (a.workers > 1)
        help.finish();
    ring::check(impl, a, st.sends.load(), st.bad.load(), a.threads);
    ring::report(impl, a, t1 - t0);
    return 0;
}
