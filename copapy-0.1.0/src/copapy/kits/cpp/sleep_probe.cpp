// LD_PRELOAD probe for a process we do not own (ros2_control_node): every nanosleep() of at most
// COPAPY_SLEEPPROBE_MAX_NS (default 2 ms) records its wake-up latency (CLOCK_REALTIME after the
// call minus the time it was asked to end at, the clock libstdc++'s sleep_until(system_clock)
// computes the relative sleep from) with the CLOCK_MONOTONIC time of the wake-up, per thread;
// at exit the records are written to $COPAPY_SLEEPPROBE_OUT: for each thread int64 tid,
// int64 count, then count pairs of int64 (monotonic wake time, latency), all in ns.
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int SLOTS = 16;
constexpr int64_t CAPACITY = 1 << 18;

struct Slot {
    std::atomic<int64_t> tid{0};
    int64_t count = 0;
    int64_t *values = nullptr;
};

Slot slots[SLOTS];
thread_local Slot *mine = nullptr;
thread_local bool unavailable = false;
using nanosleep_fn = int (*)(const timespec *, timespec *);
int64_t max_ns = 2000000;
nanosleep_fn real_nanosleep = nullptr;

// before any thread of the program exists
__attribute__((constructor)) void init()
{
    real_nanosleep = reinterpret_cast<nanosleep_fn>(dlsym(RTLD_NEXT, "nanosleep"));
    if (const char *env = std::getenv("COPAPY_SLEEPPROBE_MAX_NS")) {
        max_ns = std::atoll(env);
    }
}

int64_t clock_ns(clockid_t clock)
{
    timespec ts;
    clock_gettime(clock, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

Slot *claim()
{
    if (mine != nullptr || unavailable) {
        return mine;
    }
    const auto tid = static_cast<int64_t>(syscall(SYS_gettid));
    for (Slot &s : slots) {
        int64_t free_tid = 0;
        if (s.tid.compare_exchange_strong(free_tid, tid)) {
            void *p = mmap(nullptr, 2 * CAPACITY * sizeof(int64_t), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) {
                break;
            }
            s.values = static_cast<int64_t *>(p);
            mine = &s;
            return mine;
        }
    }
    unavailable = true;
    return nullptr;
}

__attribute__((destructor)) void dump()
{
    const char *path = std::getenv("COPAPY_SLEEPPROBE_OUT");
    if (path == nullptr) {
        return;
    }
    std::FILE *f = std::fopen(path, "wb");
    if (f == nullptr) {
        return;
    }
    for (Slot &s : slots) {
        int64_t tid = s.tid.load();
        if (tid == 0 || s.values == nullptr) {
            continue;
        }
        int64_t n = s.count < CAPACITY ? s.count : CAPACITY;
        std::fwrite(&tid, sizeof tid, 1, f);
        std::fwrite(&n, sizeof n, 1, f);
        std::fwrite(s.values, sizeof(int64_t), 2 * static_cast<std::size_t>(n), f);
    }
    std::fclose(f);
}

}  // namespace

extern "C" int nanosleep(const timespec *req, timespec *rem)
{
    nanosleep_fn real = real_nanosleep != nullptr
                            ? real_nanosleep
                            : reinterpret_cast<nanosleep_fn>(dlsym(RTLD_NEXT, "nanosleep"));
    const int64_t want = req != nullptr ? req->tv_sec * 1000000000LL + req->tv_nsec : 0;
    const int64_t target = clock_ns(CLOCK_REALTIME) + want;
    const int rc = real(req, rem);
    if (rc == 0 && want > 0 && want <= max_ns) {
        const int64_t late = clock_ns(CLOCK_REALTIME) - target;
        Slot *s = claim();
        if (s != nullptr && s->count < CAPACITY) {
            s->values[2 * s->count] = clock_ns(CLOCK_MONOTONIC);
            s->values[2 * s->count + 1] = late;
            s->count++;
        }
    }
    return rc;
}
