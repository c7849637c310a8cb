/* The real-time scheduler of docs/realtime.md: LET copies, I/O bindings, fixed-priority
 * processor model, statistics, feeds and the trace ring. No allocation and no libc: the same
 * code runs in the Python module (simulated time), the host runner and the firmware.
 *
 * cp_sched_init turns the schedule into tick counts (next release per task) and finds each
 * task's slice of the LET copy and I/O binding tables (cp_program_load groups them by task and
 * phase/direction), so a tick does no division and no table scan. */
#include "internal.h"
#include "slot_value.h"

static uint64_t gcd_ticks(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* ---- the steps of a tick */

/* cp_copy_words out of line: inlined at its four calls here, its loops grew the tick's code
 * (a timed tick 3-5 % slower, benchmarks/bench_sim.py --against). */
static CP_NOINLINE void copy_slot(uint8_t *dst, const uint8_t *src, uint32_t n)
{
    cp_copy_words(dst, src, n);
}

/* The LET copies [begin, end): a 4- or 8-byte slot (a scalar) inline, others by copy_slot. */
static CP_ALWAYS_INLINE void apply_copies(uint8_t *data, const cp_let_copy *table, uint32_t begin,
                                uint32_t end)
{
    for (const cp_let_copy *c = table + begin, *stop = table + end; c != stop; c++) {
        uint8_t *dst = data + c->dst;
        const uint8_t *src = data + c->src;
        if (c->size == 4) {
            uint32_t w;
            cp_copy((uint8_t *)&w, src, 4);
            cp_copy(dst, (const uint8_t *)&w, 4);
        } else if (c->size == 8) {
            uint64_t w;
            cp_copy((uint8_t *)&w, src, 8);
            cp_copy(dst, (const uint8_t *)&w, 8);
        } else {
            copy_slot(dst, src, c->size);
        }
    }
}

/* The simulated I/O's channel (kind, channel), NULL if outside it. */
static inline double *sim_channel(const cp_sched *s, uint8_t kind, uint16_t channel)
{
    return kind >= 1 && kind <= CP_IO_KIND_COUNT && channel < s->sim_io_channels
               ? s->sim_io + (size_t)(kind - 1u) * s->sim_io_channels + channel
               : NULL;
}

/* OUTPUT bindings [begin, end) into the simulated I/O (set), for a planned tick: a float32
 * slot without the dtype switch, no callback test a binding. Out of line: inlined into the
 * tick loop it was 9 % faster on bench_sim.py's "io" row but 2-5 % slower on the timed
 * rows, which do not use it (code layout). */
static CP_NOINLINE void sim_writes(const cp_sched *s, const uint8_t *data, uint32_t begin,
                                        uint32_t end)
{
    const cp_io_binding *b = s->prog->io_bindings;
    for (uint32_t k = begin; k < end; k++) {
        double *ch = sim_channel(s, b[k].kind, b[k].channel);
        if (ch == NULL) {
            continue;
        }
        if (b[k].dtype == CP_DT_F32) {
            float f;
            cp_copy((uint8_t *)&f, data + b[k].offset, sizeof(f));
            *ch = (double)f;
        } else {
            *ch = cp_slot_load(data + b[k].offset, b[k].dtype);
        }
    }
}

/* INPUT bindings [begin, end) from the simulated I/O (set), as sim_writes. */
static CP_NOINLINE void sim_reads(const cp_sched *s, uint8_t *data, uint32_t begin,
                                       uint32_t end)
{
    const cp_io_binding *b = s->prog->io_bindings;
    for (uint32_t k = begin; k < end; k++) {
        const double *ch = sim_channel(s, b[k].kind, b[k].channel);
        double v = ch != NULL ? *ch : 0.0;
        if (b[k].dtype == CP_DT_F32) {
            float f = cp_to_f32(v);
            cp_copy(data + b[k].offset, (const uint8_t *)&f, sizeof(f));
        } else {
            cp_slot_store(data + b[k].offset, b[k].dtype, v);
        }
    }
}

/* OUTPUT bindings [begin, end) from the shared slots (into the simulated I/O, or through
 * io_write). */
static void write_outputs(cp_sched *s, uint8_t *data, uint32_t begin, uint32_t end)
{
    const cp_io_binding *b = s->prog->io_bindings;
    for (uint32_t k = begin; k < end; k++) {
        double v = cp_slot_load(data + b[k].offset, b[k].dtype);
        if (s->sim_io == NULL) {
            s->cfg.io_write(s->cfg.io_ctx, b[k].kind, b[k].channel, v);
        } else {
            double *ch = sim_channel(s, b[k].kind, b[k].channel);
            if (ch != NULL) {
                *ch = v;
            }
        }
    }
}

/* INPUT bindings [begin, end) into the shared slots. */
static void read_inputs(cp_sched *s, uint8_t *data, uint32_t begin, uint32_t end)
{
    const cp_io_binding *b = s->prog->io_bindings;
    for (uint32_t k = begin; k < end; k++) {
        double v = 0.0;
        if (s->sim_io != NULL) {
            const double *ch = sim_channel(s, b[k].kind, b[k].channel);
            v = ch != NULL ? *ch : 0.0;
        } else if (s->cfg.io_read != NULL) {
            v = s->cfg.io_read(s->cfg.io_ctx, b[k].kind, b[k].channel);
        }
        cp_slot_store(data + b[k].offset, b[k].dtype, v);
    }
}

/* 1 if OUTPUT bindings [begin, end) go anywhere. */
static inline int outputs_go(const cp_sched *s, uint32_t begin, uint32_t end)
{
    return begin < end && (s->cfg.io_write != NULL || s->sim_io != NULL);
}

/* Period end of a finished job: PUBLISH copies, then OUTPUT bindings from the shared slots. */
static inline void publish(cp_sched *s, uint32_t task, uint8_t *data)
{
    apply_copies(data, s->prog->let_copies, s->copies[task][1], s->copies[task][2]);
    if (outputs_go(s, s->bindings[task][1], s->bindings[task][2])) {
        write_outputs(s, data, s->bindings[task][1], s->bindings[task][2]);
    }
}

/* A chain faulted: record it (the safe state applied). */
static void job_faulted(cp_sched *s, uint32_t task, const cp_fault *by_guard)
{
    cp_fault fault;
    cp_fill((uint8_t *)&fault, 0, sizeof(fault));
    fault.kind = by_guard->kind != CP_FAULT_NONE ? by_guard->kind
                                                 : CP_FAULT_SIGSEGV; /* a guard that forgot */
    fault.address = by_guard->address;
    fault.pc = by_guard->pc;
    fault.code = by_guard->code;
    fault.task = task;
    cp_sched_fail(s, &fault);
}

/* Release of a job before its chain: INPUT bindings into the shared slots, RELEASE copies. */
static inline void prepare(cp_sched *s, uint32_t task, uint8_t *data,
                           const cp_let_copy *copies)
{
    if (s->bindings[task][0] < s->bindings[task][1]) {
        read_inputs(s, data, s->bindings[task][0], s->bindings[task][1]);
    }
    apply_copies(data, copies, s->copies[task][0], s->copies[task][1]);
}

/* Time between two clock reads (0 if the clock went back). */
static inline uint64_t elapsed(uint64_t start, uint64_t stop)
{
    return stop >= start ? stop - start : 0;
}

static inline void add_exec(cp_task_stats *stats, uint64_t exec_ns)
{
    if (exec_ns > stats->exec_ns_max) {
        stats->exec_ns_max = exec_ns;
    }
    stats->exec_ns_sum += exec_ns;
}

/* Step 3, the releases of the due tasks in priority order. The job loop may run inside the
 * platform's guard_run and be left by a fault (a jump back into the guard): everything it has
 * done is in memory here, in the caller's frame. */
typedef struct release_run {
    cp_sched *s;
    uint8_t *data;
    uint32_t due;
    uint32_t jobs;                     /* chains that returned, in ran[0, jobs) */
    uint8_t ran[CP_MAX_TASKS];         /* ran[jobs]: the one that faulted, if one did */
    uint64_t stamp[CP_MAX_TASKS + 1];  /* clock reads: before the first job, after each */
    cp_fault fault;                    /* filled by the guard when a chain faulted */
    /* planned ticks (plan_ticks): their first tick, the running tick's releases (a count and
     * the tasks in priority order) and the index among them of the job that runs */
    uint32_t planned;
    uint32_t at;
    const uint8_t *rel;
    uint64_t t0;
    /* a call of the bare cycle (bare_ticks) under way: its first tick and that tick's time;
     * `at` counts the jobs over the call then */
    uint32_t cycle;
    uint64_t cycle_t0;
    uint64_t cycle_now_ns;
} release_run;

/* The job loop (`timed`: a constant in each copy, there is a clock). A job's time runs from
 * the clock read before its release (the end of the previous job, or the start of the tick's
 * releases) to the read after its chain, so back-to-back jobs cost one read each. Between two
 * reads only the job's release work (bindings, copies), its chain and its guard run; the
 * statistics, pending state and cost of every job are recorded by the caller after the
 * tick's last chain. A skipped release (counted between two reads) adds its few instructions
 * to the next job's time: a job's time is an upper bound of its chain's (docs/design.md, "The
 * job clock"). Returns nonzero if a per-job guard reported a fault. */
CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE int run_jobs(release_run *r, cp_guard_fn job, void *job_ctx, int timed)
{
    /* the loop's reads in locals: the byte stores of the copies may alias anything in memory */
    cp_sched *s = r->s;
    uint8_t *data = r->data;
    uint32_t due = r->due, n = s->task_count, jobs = 0;
    const cp_task_entry *tasks = s->prog->tasks;
    const cp_let_copy *copies = s->prog->let_copies;
    uint64_t (*clock_ns)(void *) = s->cfg.clock_ns;
    void *clock_ctx = s->cfg.clock_ctx;
    if (timed) {
        r->stamp[0] = clock_ns(clock_ctx);
    }
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = s->order[k];
        if ((due >> i & 1u) == 0) {
            continue;
        }
        if (s->state[i].pending) {
            s->stats[i].skipped++;
            continue;
        }
        prepare(s, i, data, copies);
        r->ran[jobs] = (uint8_t)i;
        if (job == NULL) {
            tasks[i].entry();
        } else if (job(job_ctx, tasks[i].entry, s->budget_ns[i], &r->fault) != 0) {
            return 1;
        }
        r->jobs = ++jobs;
        if (timed) {
            r->stamp[jobs] = clock_ns(clock_ctx);
        }
    }
    return 0;
}

CP_CALLS_LOADED_CODE
static int run_jobs_timed(void *arg, cp_guard_fn job, void *job_ctx)
{
    return run_jobs(arg, job, job_ctx, 1);
}

CP_CALLS_LOADED_CODE
static int run_jobs_untimed(void *arg, cp_guard_fn job, void *job_ctx)
{
    return run_jobs(arg, job, job_ctx, 0);
}

/* A guard run armed around several ticks (cp_sched_advance): its job function, used for every
 * release inside it. */
typedef struct armed_run {
    cp_guard_fn job;
    void *job_ctx;
} armed_run;

/* The bookkeeping of a tick's releases once its job loop is over or was left by a fault: the
 * jobs whose chain returned are finished, a faulting one gets its time (up to a read after the
 * guard came back) but no run, the fault is recorded and the safe state applied; no job after
 * it has run. */
static void releases_done(cp_sched *s, const release_run *r, int faulted)
{
    /* each finished job: statistics, pending with its cost (its declared wcet, deterministic,
     * or its measured time) */
    int timed = s->cfg.clock_ns != NULL;
    uint32_t jobs = r->jobs;
    const cp_task_entry *tasks = s->prog->tasks;
    int deterministic = s->cfg.deterministic != 0;
    for (uint32_t j = 0; j < jobs; j++) {
        uint32_t i = r->ran[j];
        uint64_t exec_ns = timed ? elapsed(r->stamp[j], r->stamp[j + 1]) : 0;
        if (timed) {
            add_exec(&s->stats[i], exec_ns);
        }
        s->stats[i].runs++;
        s->state[i].remaining_ns = deterministic ? tasks[i].wcet_ns : exec_ns;
        s->state[i].pending = 1;
    }
    if (faulted) {
        uint32_t i = r->ran[jobs];
        if (timed) {
            add_exec(&s->stats[i], elapsed(r->stamp[jobs], s->cfg.clock_ns(s->cfg.clock_ctx)));
        }
        job_faulted(s, i, &r->fault);
    }
}

/* Runs the tick's releases into `r`: with the job function of the enclosing guard run if
 * there is one (`run`), else inside one guard_run of this tick if the platform has one and
 * more than one task is due, else with the per-job guard (or none). Then the bookkeeping.
 * Returns nonzero on a fault. */
static CP_ALWAYS_INLINE int releases(cp_sched *s, uint8_t *data, uint32_t due, release_run *r,
                                     const armed_run *run)
{
    r->s = s;
    r->data = data;
    r->due = due;
    r->jobs = 0;
    r->planned = 0;
    r->fault.kind = CP_FAULT_NONE;
    r->fault.address = 0;
    r->fault.pc = 0;
    r->fault.code = 0;
    int timed = s->cfg.clock_ns != NULL;
    int faulted;
    if (run != NULL) {
        faulted = timed ? run_jobs(r, run->job, run->job_ctx, 1)
                        : run_jobs(r, run->job, run->job_ctx, 0);
    } else if (s->cfg.guard_run != NULL && (due & (due - 1u)) != 0) {
        faulted = s->cfg.guard_run(s->cfg.guard_ctx, timed ? run_jobs_timed : run_jobs_untimed,
                                   r, &r->fault);
    } else { /* at most one release (or no guard_run): per job is as cheap, and a call less */
        faulted = timed ? run_jobs(r, s->cfg.guard, s->cfg.guard_ctx, 1)
                        : run_jobs(r, s->cfg.guard, s->cfg.guard_ctx, 0);
    }
    releases_done(s, r, faulted);
    return faulted;
}

static void write_trace_row(cp_sched *s, const uint8_t *data, uint64_t t_ns)
{
    uint8_t *row = s->trace_buf + (size_t)s->trace_next * s->trace_row_size;
    cp_copy(row, (const uint8_t *)&t_ns, sizeof(t_ns));
    row += sizeof(t_ns);
    for (uint32_t r = 0; r < s->trace_range_count; r++) {
        copy_slot(row, data + s->trace_offset[r], s->trace_size[r]);
        row += s->trace_size[r];
    }
    s->trace_rows++;
    s->trace_next = s->trace_next + 1 < s->trace_capacity ? s->trace_next + 1 : 0;
}

/* Which tasks have a release instant (= a period boundary after the first) at `tick`, as a
 * bit mask; their next releases move on by a period. */
static uint32_t due_tasks(cp_sched *s, uint64_t tick)
{
    uint32_t due = 0;
    uint64_t next_event = UINT64_MAX;
    for (uint32_t i = 0; i < s->task_count; i++) {
        if (s->period_ticks[i] == 0) {
            continue;
        }
        if (s->next_release[i] == tick) {
            due |= (uint32_t)1 << i;
            s->next_release[i] += s->period_ticks[i];
        }
        if (s->next_release[i] < next_event) {
            next_event = s->next_release[i];
        }
    }
    s->next_event = next_event;
    return due;
}

static void apply_feeds(cp_sched *s, uint8_t *data, uint64_t tick)
{
    for (uint32_t f = 0; f < s->feed_count; f++) {
        const cp_sched_feed *feed = &s->feeds[f];
        if (tick >= feed->first_tick && tick - feed->first_tick < feed->count) {
            copy_slot(data + feed->offset,
                      feed->samples + (size_t)(tick - feed->first_tick) * feed->size, feed->size);
        }
    }
}

/* One tick into the release record `r` (with `run`: inside a guard run armed for several
 * ticks). */
CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE void tick_in(cp_sched *s, release_run *r, const armed_run *run)
{
    uint8_t *data = cp_program_data(s->prog);
    uint32_t n = s->task_count;
    uint64_t tick = s->tick;
    uint32_t due = tick >= s->next_event ? due_tasks(s, tick) : 0;

    /* 1. period ends, in task index order (a pending job implies t > offset) */
    for (uint32_t i = 0; i < n && (due >> i) != 0; i++) {
        if ((due >> i & 1u) == 0 || !s->state[i].pending) {
            continue;
        }
        if (s->state[i].remaining_ns == 0) {
            publish(s, i, data);
            s->state[i].pending = 0;
        } else {
            s->stats[i].overruns++;
        }
    }

    /* 2. feeds */
    if (s->feed_count != 0) {
        apply_feeds(s, data, tick);
    }

    /* 3. releases in priority order */
    if (due != 0 && releases(s, data, due, r, run) != 0) {
        return; /* faulted: nothing more happens in this program until a reset */
    }

    /* 4. processor model: the tick's time to pending jobs by priority (preemptive); nothing
     * to do when no pending job has time left, never in a deterministic run without wcets
     * (job_costs 0: every job costs nothing) */
    uint32_t busy = 0;
    for (uint32_t i = 0; i < n && s->job_costs; i++) {
        busy |= (uint32_t)(s->state[i].pending != 0) & (uint32_t)(s->state[i].remaining_ns != 0);
    }
    uint64_t left = busy ? s->cfg.tick_ns : 0;
    for (uint32_t k = 0; k < n && left != 0; k++) {
        cp_sched_task_state *st = &s->state[s->order[k]];
        if (st->pending && st->remaining_ns != 0) {
            uint64_t take = st->remaining_ns < left ? st->remaining_ns : left;
            st->remaining_ns -= take;
            left -= take;
        }
    }

    /* 5. trace */
    if (s->trace_buf != NULL) {
        write_trace_row(s, data, s->now_ns);
    }
    s->tick = tick + 1;
    s->now_ns += s->cfg.tick_ns;
}

/* ---- the hyperperiod plan (cp_sched_set_plan)
 *
 * Where every job finishes in its release tick (deterministic, no wcet: job_costs 0) and no
 * job is timed, which tasks a tick publishes and releases repeats with the hyperperiod once
 * every task has had its first release. The plan lists one hyperperiod from that tick on, a
 * tick as bytes: the count of due tasks and their indices in index order (period ends), flags
 * (PLAN_OUTPUTS: one of them drives outputs; PLAN_BARE: none of them has INPUT bindings or
 * RELEASE copies, so its jobs are only chain calls, one call of the platform's guard_jobs),
 * their PUBLISH copies as one list (a count and 16-bit indices, so that a tick past the first
 * of a run copies without a test per task), then the count again and the same tasks in
 * priority order (releases). A planned tick does what tick_in does for those tasks, without
 * the due scan, the skip test (a due task published first, so it is never pending at its
 * release) or the processor model (nothing to model). Statistics and pending states are
 * booked once for a run of planned ticks (plan_book: each task's runs are its releases in
 * them, and after a tick every periodic task is pending), and a fault books the faulting
 * tick's jobs that returned before it (plan_fault), as releases_done would. Where every tick
 * is bare and drives no outputs, the plan's bare cycle follows: the hyperperiod's copies and
 * releases as one guard_jobs list (plan_cycle), which bare_ticks hands to the platform once
 * for many hyperperiods. */

/* PLAN_FLAT_OUTPUTS: no due task's OUTPUT binding reads a slot that a later due task's (in
 * index order) PUBLISH copy writes, so the tick may publish from the flat copy list and then
 * move the outputs (with the simulated I/O, where no callback sees the order) */
enum { PLAN_OUTPUTS = 1, PLAN_BARE = 2, PLAN_FLAT_OUTPUTS = 4 };

/* 1 if periodic task i is released at tick t. */
static int released_at(const cp_sched *s, uint32_t i, uint64_t t)
{
    return s->period_ticks[i] != 0 && t >= s->offset_ticks[i] &&
           (t - s->offset_ticks[i]) % s->period_ticks[i] == 0;
}

/* The first tick of the plan (the latest first release) and its length (the hyperperiod, 0 if
 * no task is periodic or it exceeds max_ticks). */
static uint64_t plan_bounds(const cp_sched *s, uint64_t max_ticks, uint64_t *start)
{
    uint64_t h = 0, first = 0;
    for (uint32_t i = 0; i < s->task_count; i++) {
        uint64_t p = s->period_ticks[i];
        if (p == 0) {
            continue;
        }
        first = s->offset_ticks[i] > first ? s->offset_ticks[i] : first;
        uint64_t g = h == 0 ? p : gcd_ticks(h, p);
        uint64_t step = p / g;
        if (h != 0 && step > max_ticks / h) {
            return 0;
        }
        h = h == 0 ? p : h * step;
        if (h > max_ticks) {
            return 0;
        }
    }
    *start = first;
    return h;
}

/* A planned tick's PUBLISH copy: dst, src and size, each a native uint32_t. */
enum { PLAN_COPY_BYTES = 12 };

/* A planned tick's header (plan_tick_bytes): its count of PUBLISH copies, and where its
 * releases start (their count, then the task indices), past those copies. */
static inline uint32_t plan_copy_count(const uint8_t *op)
{
    return op[2 + op[0]] | (uint32_t)op[3 + op[0]] << 8;
}

static inline const uint8_t *plan_releases(const uint8_t *op)
{
    return op + 4 + op[0] + PLAN_COPY_BYTES * plan_copy_count(op);
}

static void put_plan_copy(uint8_t *ops, uint64_t at, uint32_t dst, uint32_t src, uint32_t size)
{
    const uint32_t v[3] = {dst, src, size};
    cp_copy(ops + at, (const uint8_t *)v, sizeof(v));
}

/* Tick t's PUBLISH copies (of the tasks in `due`, in index and table order) at ops + at as
 * PLAN_COPY_BYTES entries (ops NULL: counted only), a copy that continues the previous one in
 * both source and destination merged into it where the merged ranges do not overlap (the
 * same bytes as copying one after the other: a task's output slots, and the tasks' in task
 * order, lie side by side as the compiler places them); returns the number of entries. */
static uint32_t plan_tick_copies(const cp_sched *s, uint32_t due, uint8_t *ops, uint64_t at)
{
    uint32_t entries = 0;
    uint64_t dst = 0, src = 0, size = 0;
    for (uint32_t i = 0; i < s->task_count; i++) {
        for (uint32_t k = s->copies[i][1]; (due >> i & 1u) && k < s->copies[i][2]; k++) {
            const cp_let_copy *c = &s->prog->let_copies[k];
            uint64_t grown = size + c->size;
            if (size != 0 && src + size == c->src && dst + size == c->dst &&
                (src + grown <= dst || dst + grown <= src)) {
                size = grown;
                continue;
            }
            if (size != 0 && ops != NULL) {
                put_plan_copy(ops, at + (uint64_t)PLAN_COPY_BYTES * entries, (uint32_t)dst,
                              (uint32_t)src, (uint32_t)size);
            }
            entries += size != 0;
            dst = c->dst;
            src = c->src;
            size = c->size;
        }
    }
    if (size != 0 && ops != NULL) {
        put_plan_copy(ops, at + (uint64_t)PLAN_COPY_BYTES * entries, (uint32_t)dst,
                      (uint32_t)src, (uint32_t)size);
    }
    return entries + (size != 0);
}

/* 1 if an OUTPUT binding of task i reads a byte that a PUBLISH copy of a task in `later` (a
 * mask) writes. */
static int outputs_overwritten(const cp_sched *s, uint32_t i, uint32_t later)
{
    const cp_io_binding *b = s->prog->io_bindings;
    const cp_let_copy *c = s->prog->let_copies;
    for (uint32_t o = s->bindings[i][1]; o < s->bindings[i][2]; o++) {
        uint64_t lo = b[o].offset, hi = lo + cp_dtype_size(b[o].dtype);
        for (uint32_t k = 0; k < s->task_count; k++) {
            for (uint32_t x = s->copies[k][1]; (later >> k & 1u) && x < s->copies[k][2]; x++) {
                if (c[x].dst < hi && lo < (uint64_t)c[x].dst + c[x].size) {
                    return 1;
                }
            }
        }
    }
    return 0;
}

/* The tasks due at tick t (a mask; *count of them) and the tick's plan flags. */
static uint32_t plan_tick_due(const cp_sched *s, uint64_t t, uint32_t *count, uint32_t *flags)
{
    uint32_t due = 0, outputs = 0, work = 0;
    *count = 0;
    for (uint32_t i = 0; i < s->task_count; i++) {
        uint32_t d = (uint32_t)released_at(s, i, t);
        due |= d << i;
        *count += d;
        outputs |= d & (uint32_t)(s->bindings[i][1] < s->bindings[i][2]);
        work |= d & (uint32_t)(s->bindings[i][0] < s->bindings[i][1] ||
                               s->copies[i][0] < s->copies[i][1]);
    }
    *flags = (outputs ? PLAN_OUTPUTS : 0u) | (work ? 0u : PLAN_BARE);
    uint32_t flat = outputs;
    for (uint32_t i = 0; i < s->task_count && flat; i++) {
        uint32_t later = i + 1 < 32 ? due >> (i + 1) << (i + 1) : 0;
        flat = !((due >> i & 1u) && outputs_overwritten(s, i, later));
    }
    *flags |= flat ? PLAN_FLAT_OUTPUTS : 0u;
    return due;
}

/* Tick t's plan bytes at ops + at (ops NULL: counted only); returns the index after them. */
static uint64_t plan_tick_bytes(const cp_sched *s, uint64_t t, uint8_t *ops, uint64_t at)
{
    uint32_t count, flags, n = s->task_count;
    uint32_t due = plan_tick_due(s, t, &count, &flags);
    uint32_t ncopies = plan_tick_copies(s, due, NULL, 0);
    if (ops == NULL) {
        return at + 5u + 2u * count + (uint64_t)PLAN_COPY_BYTES * ncopies;
    }
    ops[at++] = (uint8_t)count; /* period ends, in task index order */
    for (uint32_t i = 0; i < n; i++) {
        if (due >> i & 1u) {
            ops[at++] = (uint8_t)i;
        }
    }
    ops[at++] = (uint8_t)flags;
    ops[at++] = (uint8_t)ncopies; /* their PUBLISH copies, merged */
    ops[at++] = (uint8_t)(ncopies >> 8);
    at += (uint64_t)PLAN_COPY_BYTES * plan_tick_copies(s, due, ops, at);
    ops[at++] = (uint8_t)count; /* releases in priority order */
    for (uint32_t k = 0; k < n; k++) {
        if (due >> s->order[k] & 1u) {
            ops[at++] = s->order[k];
        }
    }
    return at;
}

/* The cycle's builder: the order bytes at ops + order_at and the entries' words at
 * ops + words_at (ops NULL: counted only), `entries` and `words` (3-word entries) so far. */
typedef struct cycle_out {
    int rows;          /* a ROW entry after each tick */
    uint8_t *ops;
    uint64_t words_at;
    uint64_t order_at;
    uint64_t entries;
    uint64_t words;
} cycle_out;

static void cycle_entry(cycle_out *c, uint32_t kind)
{
    if (c->ops != NULL) {
        c->ops[c->order_at + c->entries] = (uint8_t)kind;
    }
    c->entries++;
}

/* A 3-word entry (COPY, INPUT, OUTPUT). */
static void cycle_move(cycle_out *c, uint32_t kind, uint32_t w0, uint32_t w1, uint32_t w2)
{
    if (c->ops != NULL) {
        put_plan_copy(c->ops, c->words_at + (uint64_t)PLAN_COPY_BYTES * c->words, w0, w1, w2);
    }
    cycle_entry(c, kind);
    c->words++;
}

/* Task i's INPUT (OUTPUT: [b1, b2)) bindings [begin, end) as moves; the channel word is patched
 * for the simulated I/O (plan_cycle_channels), the binding's index kept in the dtype word. */
static void cycle_bindings(cycle_out *c, const cp_sched *s, uint32_t kind, uint32_t begin,
                           uint32_t end)
{
    const cp_io_binding *b = s->prog->io_bindings;
    for (uint32_t k = begin; k < end; k++) {
        cycle_move(c, kind, b[k].offset, CP_JOBS_NO_CHANNEL, b[k].dtype | k << 8);
    }
}

/* Tick t's PUBLISH copies of the tasks in `due` (merged, plan_tick_copies) as COPY entries. */
static void cycle_copies(cycle_out *c, const cp_sched *s, uint32_t due)
{
    uint32_t n = plan_tick_copies(s, due, c->ops,
                                  c->words_at + (uint64_t)PLAN_COPY_BYTES * c->words);
    for (uint32_t k = 0; k < n; k++) {
        cycle_entry(c, CP_JOBS_COPY);
    }
    c->words += n;
}

/* The cycle: the hyperperiod [start, start + h) as one guard_jobs list that runs whole
 * hyperperiods in one call, each tick's entries in the order of a planned tick past a run's
 * first (plan_ticks with the simulated I/O): its period ends (the merged PUBLISH copies and
 * then the OUTPUT moves task by task where PLAN_FLAT_OUTPUTS, else task by task its copies
 * and then its OUTPUT moves), then its releases in priority order (each task's INPUT moves,
 * its RELEASE copies, its job; a float32 INPUT right before the job is one INPUT_JOB entry
 * with it), then (c->rows) a ROW entry: its trace row. Returns 0 if
 * the lists would not be addressable; *jobs: the jobs, *io: whether it moves I/O. */
static int plan_cycle(const cp_sched *s, uint64_t start, uint64_t h, cycle_out *c,
                      uint32_t *jobs, uint32_t *io)
{
    *jobs = 0;
    *io = 0;
    if (s->prog->io_binding_count >= 1u << 24) {
        return 0; /* (a binding's index is kept in 24 bits) */
    }
    for (uint64_t t = start; t < start + h; t++) {
        uint32_t count, flags, due = plan_tick_due(s, t, &count, &flags);
        if (!(flags & PLAN_OUTPUTS) || (flags & PLAN_FLAT_OUTPUTS)) {
            cycle_copies(c, s, due);
        }
        for (uint32_t i = 0; i < s->task_count && (flags & PLAN_OUTPUTS); i++) {
            if (due >> i & 1u) {
                if (!(flags & PLAN_FLAT_OUTPUTS)) {
                    cycle_copies(c, s, 1u << i);
                }
                cycle_bindings(c, s, CP_JOBS_OUTPUT, s->bindings[i][1], s->bindings[i][2]);
                *io |= s->bindings[i][1] < s->bindings[i][2];
            }
        }
        for (uint32_t k = 0; k < s->task_count; k++) {
            uint32_t i = s->order[k];
            if (!(due >> i & 1u)) {
                continue;
            }
            uint32_t b0 = s->bindings[i][0], b1 = s->bindings[i][1];
            *io |= b0 < b1;
            if (b0 < b1 && s->copies[i][0] == s->copies[i][1] &&
                s->prog->io_bindings[b1 - 1].dtype == CP_DT_F32) {
                /* its last INPUT a float32 one right before the job: one entry for both */
                cycle_bindings(c, s, CP_JOBS_INPUT, b0, b1 - 1);
                cycle_move(c, CP_JOBS_INPUT_JOB, s->prog->io_bindings[b1 - 1].offset,
                           CP_JOBS_NO_CHANNEL, i | (b1 - 1) << 8);
                continue;
            }
            cycle_bindings(c, s, CP_JOBS_INPUT, b0, b1);
            for (uint32_t x = s->copies[i][0]; x < s->copies[i][1]; x++) {
                const cp_let_copy *l = &s->prog->let_copies[x];
                cycle_move(c, CP_JOBS_COPY, l->dst, l->src, l->size);
            }
            cycle_entry(c, i);
        }
        if (c->rows) {
            cycle_entry(c, CP_JOBS_ROW);
        }
        *jobs += count;
        if (c->entries > UINT32_MAX / 4 || c->words > UINT32_MAX / (4 * PLAN_COPY_BYTES)) {
            return 0;
        }
    }
    return 1;
}

/* Where the cycle goes after the plan's `bytes` in the buffer `ops` (NULL: counted with the
 * most padding): its words (aligned in memory), its order with ROW entries and the same
 * without (h bytes fewer); returns the end (bytes if there is no cycle). */
static uint64_t plan_cycle_bytes(const cp_sched *s, uint64_t start, uint64_t h,
                                 const uint8_t *ops, uint64_t bytes, uint64_t *words_at,
                                 uint64_t *order_at)
{
    cycle_out c = {1, NULL, 0, 0, 0, 0};
    uint32_t jobs, io;
    if (!plan_cycle(s, start, h, &c, &jobs, &io) || jobs == 0) {
        return bytes;
    }
    uintptr_t pad = ops != NULL ? (0u - (uintptr_t)(ops + bytes)) % sizeof(uint32_t)
                                : sizeof(uint32_t) - 1u;
    *words_at = bytes + pad;
    *order_at = *words_at + (uint64_t)PLAN_COPY_BYTES * c.words;
    return *order_at + 2 * c.entries - h;
}

/* plan_cycle_io: the cycle moves I/O; its channel words are those of the simulated I/O set */
enum { CYCLE_IO = 1, CYCLE_IO_SET = 2 };

/* The cycle's INPUT and OUTPUT words patched for the simulated I/O set (cp_sched_set_sim_io):
 * each binding's index into it, CP_JOBS_NO_CHANNEL for a channel outside it (an INPUT reads
 * 0.0, an OUTPUT goes nowhere: sim_channel's NULL). Without it, or where an index does not
 * fit in a word, the cycle does not move I/O (CYCLE_IO_SET clear: the per-tick path). */
static void plan_cycle_channels(cp_sched *s)
{
    s->plan_cycle_io &= CYCLE_IO;
    if (s->plan_cycle_count == 0 || s->plan_cycle_io == 0 || s->sim_io == NULL ||
        (uint64_t)CP_IO_KIND_COUNT * s->sim_io_channels >= CP_JOBS_NO_CHANNEL) {
        return;
    }
    const uint8_t *order = s->plan + s->plan_cycle_order;
    uint8_t *w = s->plan + s->plan_cycle_copies;
    for (uint32_t k = 0; k < s->plan_cycle_count; k++) {
        if (order[k] == CP_JOBS_INPUT || order[k] == CP_JOBS_OUTPUT ||
            order[k] == CP_JOBS_INPUT_JOB) {
            uint32_t v[3];
            cp_copy((uint8_t *)v, w, sizeof(v));
            const cp_io_binding *b = &s->prog->io_bindings[v[2] >> 8];
            const double *ch = sim_channel(s, b->kind, b->channel);
            v[1] = ch != NULL ? (uint32_t)(ch - s->sim_io) : CP_JOBS_NO_CHANNEL;
            cp_copy(w, (const uint8_t *)v, sizeof(v));
        }
        w += order[k] == CP_JOBS_ROW || order[k] < CP_JOBS_INPUT_JOB ? 0 : PLAN_COPY_BYTES;
    }
    s->plan_cycle_io |= CYCLE_IO_SET;
}

/* 1 if the cycle can run: it exists, and its I/O moves (if any) go to the simulated I/O. */
static inline int plan_cycle_ready(const cp_sched *s)
{
    return s->plan_cycle_count != 0 && s->plan_cycle_io != CYCLE_IO;
}

uint64_t cp_sched_plan_size(const cp_sched *s, uint64_t max_ticks)
{
    if (s == NULL || s->prog == NULL || s->prog->let_copy_count > UINT16_MAX) {
        return 0; /* (a tick's copies are counted in 16 bits) */
    }
    uint64_t start = 0, h = plan_bounds(s, max_ticks, &start), bytes = 0, copies_at, order_at;
    for (uint64_t t = start; t < start + h; t++) {
        bytes = plan_tick_bytes(s, t, NULL, bytes);
    }
    return bytes != 0 ? plan_cycle_bytes(s, start, h, NULL, bytes, &copies_at, &order_at) : 0;
}

uint32_t cp_sched_set_plan(cp_sched *s, uint8_t *ops, uint32_t capacity)
{
    if (s == NULL || s->prog == NULL) {
        return 0;
    }
    s->plan = NULL;
    s->plan_capacity = 0;
    s->plan_ops = 0;
    s->plan_tick = UINT64_MAX;
    s->plan_cycle_count = 0;
    s->plan_cycle_io = 0;
    uint64_t start = 0, h = plan_bounds(s, capacity / 5, &start);
    uint64_t bytes = cp_sched_plan_size(s, capacity / 5);
    if (ops == NULL || h == 0 || bytes == 0 || bytes > capacity || s->job_costs != 0 ||
        s->cfg.clock_ns != NULL) {
        return 0;
    }
    uint64_t at = 0, copies_at = 0, order_at = 0;
    for (uint64_t t = start; t < start + h; t++) {
        at = plan_tick_bytes(s, t, ops, at);
    }
    s->plan = ops;
    s->plan_capacity = capacity;
    s->plan_ops = (uint32_t)at;
    s->plan_start = start;
    s->plan_period = h;
    if (plan_cycle_bytes(s, start, h, ops, at, &copies_at, &order_at) != at) {
        cycle_out c = {1, ops, copies_at, order_at, 0, 0};
        (void)plan_cycle(s, start, h, &c, &s->plan_cycle_jobs, &s->plan_cycle_io);
        cycle_out rowless = {0, ops, copies_at, order_at + c.entries, 0, 0};
        (void)plan_cycle(s, start, h, &rowless, &s->plan_cycle_jobs, &s->plan_cycle_io);
        s->plan_cycle_copies = (uint32_t)copies_at;
        s->plan_cycle_order = (uint32_t)order_at;
        s->plan_cycle_rowless = (uint32_t)(order_at + c.entries);
        s->plan_cycle_count = (uint32_t)c.entries;
        plan_cycle_channels(s);
    }
    return (uint32_t)bytes;
}

/* After planned ticks: each task's next release and the next event, as due_tasks keeps them
 * (s->tick >= plan_start >= every offset). */
static void plan_sync(cp_sched *s)
{
    uint64_t next_event = UINT64_MAX, t = s->tick;
    for (uint32_t i = 0; i < s->task_count; i++) {
        uint64_t p = s->period_ticks[i];
        if (p == 0) {
            continue;
        }
        uint64_t since = t - s->offset_ticks[i];
        s->next_release[i] = t + (since % p == 0 ? 0 : p - since % p);
        next_event = s->next_release[i] < next_event ? s->next_release[i] : next_event;
    }
    s->next_event = next_event;
}

/* The op index where tick s->tick starts. */
static uint32_t plan_position(const cp_sched *s)
{
    if (s->plan_tick == s->tick) {
        return s->plan_at;
    }
    uint64_t phase = (s->tick - s->plan_start) % s->plan_period;
    uint32_t at = 0;
    for (uint64_t t = 0; t < phase; t++) {
        at += 1u + s->plan[at];                                          /* period ends */
        at += 3u + PLAN_COPY_BYTES * (s->plan[at + 1] | (uint32_t)s->plan[at + 2] << 8);
        at += 1u + s->plan[at];                                          /* releases */
    }
    return at;
}

/* Releases of periodic task i in ticks [0, t). */
static uint64_t releases_before(const cp_sched *s, uint32_t i, uint64_t t)
{
    uint64_t off = s->offset_ticks[i];
    return t > off ? (t - off - 1u) / s->period_ticks[i] + 1u : 0;
}

/* The bookkeeping of the planned ticks [t0, s->tick), done: each task ran at each of its
 * releases, and after a tick every periodic task is pending (the plan starts once every task
 * has been released, and a due task is released again right after its period end). */
static void plan_book(cp_sched *s, uint64_t t0)
{
    uint64_t t1 = s->tick;
    for (uint32_t i = 0; i < s->task_count && t1 != t0; i++) {
        if (s->period_ticks[i] != 0) {
            s->stats[i].runs += releases_before(s, i, t1) - releases_before(s, i, t0);
            s->state[i].pending = 1;
        }
    }
}

/* After the cycle's `done` ticks up to s->tick (at s->now_ns): their trace rows, written by
 * its ROW entries up to the ring slot s->trace_next, counted and given their times (the row
 * of tick t holds t's time, as write_trace_row's). */
static void cycle_rows(cp_sched *s, uint64_t done)
{
    if (s->trace_buf == NULL) {
        return;
    }
    s->trace_rows += done;
    uint64_t cap = s->trace_capacity, slot = s->trace_next, t_ns = s->now_ns;
    for (uint64_t j = done < cap ? done : cap; j != 0; j--) {
        slot = slot != 0 ? slot - 1 : cap - 1;
        t_ns -= s->cfg.tick_ns;
        cp_copy(s->trace_buf + (size_t)slot * s->trace_row_size, (const uint8_t *)&t_ns,
                sizeof(t_ns));
    }
}

/* A planned tick's job r->rel[1 + r->at] faulted (or the bare cycle's job r->at, counted over
 * the call: its tick found first): the ticks before it are booked, the tick's
 * due tasks have published (not pending), the jobs before it returned (a run each, pending),
 * and the fault is recorded; no job after it has run. */
static void plan_fault(cp_sched *s, release_run *r)
{
    if (r->cycle) { /* in the bare cycle: the tick and the job within it from the job count */
        uint64_t c = r->at / s->plan_cycle_jobs, t = r->cycle_t0 + c * s->plan_period;
        uint32_t j = r->at % s->plan_cycle_jobs;
        const uint8_t *op = s->plan;
        for (;;) {
            const uint8_t *rel = plan_releases(op);
            if (j < rel[0]) {
                r->rel = rel;
                break;
            }
            j -= rel[0];
            t++;
            op = rel + 1 + rel[0];
        }
        s->tick = t;
        s->now_ns = r->cycle_now_ns + (t - r->cycle_t0) * s->cfg.tick_ns;
        cycle_rows(s, t - r->cycle_t0); /* the ticks before the faulting one wrote theirs */
        r->at = j;
        r->cycle = 0;
    }
    plan_book(s, r->t0);
    const uint8_t *rel = r->rel + 1;
    for (uint32_t k = 0; k < r->rel[0]; k++) {
        s->state[rel[k]].pending = 0;
    }
    for (uint32_t k = 0; k < r->at; k++) {
        s->stats[rel[k]].runs++;
        s->state[rel[k]].pending = 1;
    }
    job_faulted(s, rel[r->at], &r->fault);
}

/* The flat PUBLISH copy list of a planned tick (`copy`: ncopies entries of plan_tick_copies). */
static CP_ALWAYS_INLINE void plan_copies(uint8_t *data, const uint8_t *copy, uint32_t ncopies)
{
    for (; ncopies != 0; ncopies--, copy += PLAN_COPY_BYTES) {
        uint32_t v[3];
        cp_copy((uint8_t *)v, copy, sizeof(v));
        if (v[2] == 4) {
            uint32_t w;
            cp_copy((uint8_t *)&w, data + v[1], 4);
            cp_copy(data + v[0], (const uint8_t *)&w, 4);
        } else {
            copy_slot(data + v[0], data + v[1], v[2]);
        }
    }
}

/* A guard_jobs list of the program's tasks, one job: one budget for every job when every
 * periodic task has the same (the platform stores it once), else each task's. */
static cp_guard_job_list job_list(const cp_sched *s, const uint8_t *order, uint32_t count)
{
    cp_guard_job_list list;
    cp_fill((uint8_t *)&list, 0, sizeof(list));
    list.tasks = s->prog->tasks;
    list.order = order;
    list.count = count;
    list.repeat = 1;
    int seen = 0;
    for (uint32_t i = 0; i < s->task_count; i++) {
        if (s->period_ticks[i] == 0) {
            continue;
        }
        if (seen && list.budget != s->budget_ns[i]) {
            list.budget_ns = s->budget_ns;
        }
        list.budget = seen ? list.budget : s->budget_ns[i];
        seen = 1;
    }
    return list;
}

/* 1 if the planned tick at `op` is one for bare_ticks: its jobs bare, no outputs driven (a
 * program with bindings does not build bare_ticks' lists a tick for nothing). */
static inline int plan_bare(const uint8_t *op)
{
    return (op[1 + op[0]] & (PLAN_OUTPUTS | PLAN_BARE)) == PLAN_BARE;
}

/* Planned ticks past a run's first, from plan byte *at on, while a tick's jobs are bare and
 * its period ends drive no outputs (and there is no feed): the tick's PUBLISH copies from the
 * flat list, its jobs in one call of the run's guard_jobs, its trace row; a loop of its own,
 * so that nothing else lives between two ticks. Where the plan's cycle can run
 * (plan_cycle_ready) and whole hyperperiods are left from the plan's first tick on, they go
 * to guard_jobs as the cycle, many in one call, bare or not (copies, I/O moves, jobs and trace
 * rows in the per-tick order; nothing else observes the data between two of its ticks: no
 * feed, no callback, no processor model). Returns the ticks done, at most `ticks`;
 * *faulted: the last one faulted (not counted, s->tick is its tick, or plan_fault finds it
 * from the cycle's job count). */
CP_CALLS_LOADED_CODE
static uint64_t bare_ticks(cp_sched *s, release_run *r, void *job_ctx, cp_guard_jobs_fn jobs,
                           const cp_guard_job_list *base, uint64_t ticks, uint32_t *at,
                           int *faulted)
{
    uint8_t *data = cp_program_data(s->prog);
    const uint8_t *plan = s->plan, *op = plan + *at, *end = plan + s->plan_ops;
    uint64_t tick = s->tick, now_ns = s->now_ns, tick_ns = s->cfg.tick_ns, k = 0;
    uint64_t h = s->plan_period;
    int tracing = s->trace_buf != NULL, ready = plan_cycle_ready(s);
    cp_guard_job_list list = *base;
    cp_guard_job_list cycle = list;
    cycle.order = plan + (tracing ? s->plan_cycle_order : s->plan_cycle_rowless);
    cycle.count = (uint32_t)(s->plan_cycle_count - (tracing ? 0 : h));
    cycle.data = data;
    cycle.copies = (const uint32_t *)(const void *)(plan + s->plan_cycle_copies);
    cycle.io = s->sim_io;
    if (tracing) {
        cycle.rows = s->trace_buf;
        cycle.row_capacity = s->trace_capacity;
        cycle.row_next = &s->trace_next;
        cycle.row_offset = s->trace_offset;
        cycle.row_size = s->trace_size;
        cycle.row_ranges = s->trace_range_count;
        cycle.row_bytes = s->trace_row_size;
    }
    while (k < ticks) {
        if (op == plan && ready && ticks - k >= h) {
            uint64_t reps = (ticks - k) / h, most = UINT32_MAX / s->plan_cycle_jobs;
            cycle.repeat = (uint32_t)(reps < most ? reps : most);
            r->cycle = 1;
            r->cycle_t0 = tick;
            r->cycle_now_ns = now_ns;
            s->tick = tick;
            s->now_ns = now_ns;
            if (jobs(job_ctx, &cycle, &r->at, &r->fault) != 0) {
                *faulted = 1; /* plan_fault finds the tick */
                return k;
            }
            r->cycle = 0;
            k += cycle.repeat * h;
            tick += cycle.repeat * h;
            now_ns += cycle.repeat * h * tick_ns;
            s->now_ns = now_ns;
            cycle_rows(s, cycle.repeat * h);
            continue;
        }
        uint32_t m = op[0];
        if (!plan_bare(op)) {
            break;
        }
        plan_copies(data, op + 4 + m, plan_copy_count(op));
        const uint8_t *rel = plan_releases(op);
        r->rel = rel;
        s->tick = tick; /* where a fault's jump back finds the tick */
        s->now_ns = now_ns;
        list.order = rel + 1;
        list.count = m;
        if (jobs(job_ctx, &list, &r->at, &r->fault) != 0) {
            *faulted = 1;
            break;
        }
        if (tracing) {
            write_trace_row(s, data, now_ns);
        }
        tick++;
        now_ns += tick_ns;
        k++;
        op = rel + 1 + m;
        op = op == end ? plan : op;
    }
    s->tick = tick;
    s->now_ns = now_ns;
    *at = (uint32_t)(op - plan);
    return k;
}

/* Up to `ticks` planned ticks with the job function `job` (NULL: chains called directly) and,
 * for a tick whose jobs are bare, the run's `jobs` (NULL: a job call each), stopping at a
 * fault; returns the ticks done (a faulting tick is not counted). */
CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE uint64_t plan_ticks(cp_sched *s, release_run *r, cp_guard_fn job,
                                            void *job_ctx, cp_guard_jobs_fn jobs,
                                            uint64_t ticks)
{
    uint8_t *data = cp_program_data(s->prog);
    const uint8_t *plan = s->plan;
    const cp_let_copy *copies = s->prog->let_copies;
    const cp_task_entry *tasks = s->prog->tasks;
    const uint64_t *budget = s->budget_ns;
    uint64_t tick_ns = s->cfg.tick_ns;
    uint32_t at = plan_position(s), end = s->plan_ops;
    r->s = s;
    r->data = data;
    r->fault.kind = CP_FAULT_NONE;
    r->fault.address = 0;
    r->fault.pc = 0;
    r->fault.code = 0;
    r->t0 = s->tick;
    r->at = 0;
    r->cycle = 0;
    r->planned = 1;
    cp_guard_job_list list = job_list(s, NULL, 0);
    for (uint64_t k = 0; k < ticks; k++) {
        if (k != 0 && jobs != NULL && s->feed_count == 0 &&
            (plan_bare(plan + at) || (at == 0 && plan_cycle_ready(s)))) {
            int faulted = 0;
            k += bare_ticks(s, r, job_ctx, jobs, &list, ticks - k, &at, &faulted);
            if (faulted) {
                plan_fault(s, r);
                r->planned = 0;
                return k;
            }
            if (k == ticks) {
                break;
            }
        }
        const uint8_t *op = plan + at, *ends = op + 1;
        uint32_t m = *op, flags = op[1 + m];
        uint32_t ncopies = plan_copy_count(op);
        const uint8_t *copy = op + 4 + m;
        op = plan_releases(op);
        if (k != 0 && (flags & PLAN_FLAT_OUTPUTS) && s->sim_io != NULL) {
            /* 1. period ends: the flat copy list, then the outputs task by task (no output
             * reads what a later task's copy writes: the same bytes, the same moves) */
            plan_copies(data, copy, ncopies);
            for (; m != 0; m--, ends++) {
                sim_writes(s, data, s->bindings[*ends][1], s->bindings[*ends][2]);
            }
        } else if (k == 0 || (flags & PLAN_OUTPUTS)) { /* 1. period ends, task by task */
            /* the first tick of a run may have been settled (published already), and a
             * task's outputs come after its own copies; past it every due task is pending */
            for (; m != 0; m--) {
                uint32_t i = *ends++;
                if (k == 0 && !s->state[i].pending) {
                    continue;
                }
                apply_copies(data, copies, s->copies[i][1], s->copies[i][2]);
                if (s->sim_io != NULL) {
                    sim_writes(s, data, s->bindings[i][1], s->bindings[i][2]);
                } else if (outputs_go(s, s->bindings[i][1], s->bindings[i][2])) {
                    write_outputs(s, data, s->bindings[i][1], s->bindings[i][2]);
                }
                s->state[i].pending = 0;
            }
        } else { /* the same from the flat copy list: after the plan's first tick (the latest
                  * first release) every due task is pending, and only a settle between two
                  * runs publishes early */
            plan_copies(data, copy, ncopies);
        }
        if (s->feed_count != 0) { /* 2. feeds */
            apply_feeds(s, data, s->tick);
        }
        r->rel = op; /* 3. releases */
        m = *op++;
        int faulted = 0;
        if ((flags & PLAN_BARE) && jobs != NULL) {
            list.order = op;
            list.count = m;
            faulted = jobs(job_ctx, &list, &r->at, &r->fault);
        } else {
            for (uint32_t j = 0; j < m && !faulted; j++) {
                uint32_t i = op[j];
                r->at = j;
                if (!(flags & PLAN_BARE)) {
                    if (s->sim_io != NULL) {
                        sim_reads(s, data, s->bindings[i][0], s->bindings[i][1]);
                    } else if (s->bindings[i][0] < s->bindings[i][1]) {
                        read_inputs(s, data, s->bindings[i][0], s->bindings[i][1]);
                    }
                    apply_copies(data, copies, s->copies[i][0], s->copies[i][1]);
                }
                if (job == NULL) {
                    tasks[i].entry();
                } else {
                    faulted = job(job_ctx, tasks[i].entry, budget[i], &r->fault);
                }
            }
        }
        if (faulted) {
            plan_fault(s, r);
            r->planned = 0;
            return k;
        }
        op += m;
        if (s->trace_buf != NULL) { /* 5. trace (4: no job costs time) */
            write_trace_row(s, data, s->now_ns);
        }
        s->tick++;
        s->now_ns += tick_ns;
        at = (uint32_t)(op - plan);
        at = at == end ? 0 : at;
    }
    r->planned = 0;
    plan_book(s, r->t0);
    s->plan_at = at;
    s->plan_tick = s->tick;
    plan_sync(s);
    return ticks;
}

/* `ticks` ticks (stopping at a fault): planned where the plan holds, else tick_in; the job
 * function is the armed run's (`run`) or, without one, the per-job guard. */
CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE void ticks_in(cp_sched *s, release_run *r, const armed_run *run,
                                      uint64_t ticks)
{
    cp_guard_fn job = run != NULL ? run->job : s->cfg.guard;
    void *job_ctx = run != NULL ? run->job_ctx : s->cfg.guard_ctx;
    /* a tick's jobs in one call: only inside a run of the config's own guard_run */
    cp_guard_jobs_fn jobs = run != NULL && run->job != NULL ? s->cfg.guard_jobs : NULL;
    for (uint64_t k = 0; k < ticks && s->fault.kind == CP_FAULT_NONE;) {
        if (s->plan_ops != 0 && s->tick >= s->plan_start) {
            k += plan_ticks(s, r, job, job_ctx, jobs, ticks - k);
            continue;
        }
        tick_in(s, r, run);
        k++;
    }
}

void cp_sched_set_sim_io(cp_sched *s, double *io, uint32_t channels)
{
    if (s != NULL) {
        s->sim_io = channels != 0 ? io : NULL;
        s->sim_io_channels = io != NULL ? channels : 0;
        plan_cycle_channels(s);
    }
}

void cp_sched_settle(cp_sched *s)
{
    if (s == NULL || s->prog == NULL || !s->prog->loaded || s->fault.kind != CP_FAULT_NONE) {
        return;
    }
    uint8_t *data = cp_program_data(s->prog);
    for (uint32_t i = 0; i < s->task_count; i++) {
        /* finished jobs whose period ends exactly now publish; unfinished ones stay pending and
         * are counted as overruns when the tick itself is processed */
        if (s->period_ticks[i] != 0 && s->next_release[i] == s->tick && s->state[i].pending &&
            s->state[i].remaining_ns == 0) {
            publish(s, i, data);
            s->state[i].pending = 0;
        }
    }
}

static int live(const cp_sched *s)
{
    return s != NULL && s->prog != NULL && s->prog->loaded && s->fault.kind == CP_FAULT_NONE;
}

void cp_sched_tick(cp_sched *s)
{
    if (live(s)) {
        release_run r;
        tick_in(s, &r, NULL);
    }
}

/* Ticks inside one guard run: the release record lives in cp_sched_advance's frame, which a
 * chain's signal does not leave (the jump lands in the guard run it called). */
typedef struct advance_run {
    cp_sched *s;
    uint64_t ticks;
    release_run r;
} advance_run;

CP_CALLS_LOADED_CODE
static int advance_body(void *arg, cp_guard_fn job, void *job_ctx)
{
    advance_run *a = arg;
    const armed_run run = {job, job_ctx};
    ticks_in(a->s, &a->r, &run, a->ticks);
    return 0; /* a fault a job returned is booked already (releases) */
}

/* `ticks` ticks, stopping at a fault. With the platform's guard_run, one run is armed for all
 * of them (one sigsetjmp and CPU-state entry, not one a tick); each job is still guarded with
 * its own budget, and a tick's releases are booked exactly as in cp_sched_tick. */
void cp_sched_advance(cp_sched *s, uint64_t ticks)
{
    if (ticks > 1 && live(s) && s->cfg.guard_run != NULL) {
        advance_run a;
        a.s = s;
        a.ticks = ticks;
        a.r.jobs = 0;
        a.r.planned = 0;
        a.r.fault.kind = CP_FAULT_NONE;
        if (s->cfg.guard_run(s->cfg.guard_ctx, advance_body, &a, &a.r.fault) != 0) {
            /* a chain's signal or budget jumped back out of its tick: that tick's booking */
            if (a.r.planned) {
                plan_fault(s, &a.r);
            } else {
                releases_done(s, &a.r, 1);
            }
        }
        return;
    }
    if (s != NULL && s->cfg.guard_run == NULL && live(s)) {
        /* the job function is the per-job guard for every tick: planned where it can be */
        release_run r;
        ticks_in(s, &r, NULL, ticks);
        return;
    }
    for (uint64_t k = 0; k < ticks; k++) {
        cp_sched_tick(s);
    }
}

/* ---- set-up */

static void restart(cp_sched *s)
{
    uint64_t next_event = UINT64_MAX;
    for (uint32_t i = 0; i < CP_MAX_TASKS; i++) {
        s->state[i].pending = 0;
        s->state[i].remaining_ns = 0;
        cp_fill((uint8_t *)&s->stats[i], 0, sizeof(s->stats[i]));
        s->next_release[i] = s->offset_ticks[i];
        if (s->period_ticks[i] != 0 && s->offset_ticks[i] < next_event) {
            next_event = s->offset_ticks[i];
        }
    }
    s->next_event = next_event;
    s->tick = 0;
    s->now_ns = 0;
    s->trace_rows = 0;
    s->trace_next = 0;
    s->plan_tick = UINT64_MAX;
    cp_fill((uint8_t *)&s->fault, 0, sizeof(s->fault));
}

uint64_t cp_program_tick_ns(const cp_program *prog)
{
    uint64_t g = 0;
    for (uint32_t i = 0; i < prog->task_count; i++) {
        if (prog->tasks[i].period_ns != 0) {
            g = gcd_ticks(g, prog->tasks[i].period_ns);
            g = gcd_ticks(g, prog->tasks[i].offset_ns);
        }
    }
    return g;
}

static uint32_t group_key(const void *table, uint32_t index, int copies)
{
    return copies ? cp_let_copy_group((const cp_let_copy *)table + index)
                  : cp_io_binding_group((const cp_io_binding *)table + index);
}

/* Each task's slice of a table grouped by (task, phase): bounds[t] = {start of group 2t,
 * start of group 2t + 1, end of group 2t + 1}. Returns 0 if the table is not grouped that way
 * (not loaded by cp_program_load). */
static int group_bounds(uint32_t (*bounds)[3], uint32_t count, const void *table, int copies)
{
    uint32_t at = 0;
    for (uint32_t g = 0; g < 2 * CP_MAX_TASKS; g++) {
        bounds[g / 2][g % 2] = at;
        while (at < count && group_key(table, at, copies) == g) {
            at++;
        }
        if (at < count && group_key(table, at, copies) < g) {
            return 0;
        }
        if (g % 2 == 1) {
            bounds[g / 2][2] = at;
        }
    }
    return at == count;
}

cp_status cp_sched_init(cp_sched *s, const cp_program *prog, const cp_sched_config *cfg,
                        cp_error *err)
{
    if (s == NULL || prog == NULL || cfg == NULL) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_sched_init: scheduler, program and config must not be NULL", 0);
    }
    if (s->struct_size < sizeof(cp_sched) || cfg->struct_size < CP_SCHED_CONFIG_SIZE_ABI3) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_sched.struct_size is %u and cp_sched_config.struct_size %u, "
                       "expected >= %u and >= %u: set them to sizeof() before cp_sched_init",
                       s->struct_size, cfg->struct_size, sizeof(cp_sched),
                       CP_SCHED_CONFIG_SIZE_ABI3);
    }
    if (!prog->loaded || prog->task_count > CP_MAX_TASKS) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "the program is not loaded (or has more than %u tasks)", CP_MAX_TASKS);
    }
    uint64_t tick_ns = cfg->tick_ns;
    uint64_t fit = cp_program_tick_ns(prog);
    if (tick_ns == 0) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       fit != 0 ? "tick_ns is 0: the tick must be a positive number of "
                                  "nanoseconds that divides every task period and offset "
                                  "(here at most %u ns)"
                                : "tick_ns is 0: the tick must be a positive number of "
                                  "nanoseconds", fit);
    }
    for (uint32_t i = 0; i < prog->task_count; i++) {
        const cp_task_entry *t = &prog->tasks[i];
        if (t->period_ns == 0) {
            continue;
        }
        if (t->period_ns % tick_ns != 0) {
            return CP_FAIL(err, CP_ERR_ARGUMENT, i,
                           "task %u period %u ns is not a multiple of the tick %u ns: choose "
                           "a tick that divides every period and offset (the largest is %u ns)",
                           i, t->period_ns, tick_ns, fit);
        }
        if (t->offset_ns % tick_ns != 0) {
            return CP_FAIL(err, CP_ERR_ARGUMENT, i,
                           "task %u offset %u ns is not a multiple of the tick %u ns: choose "
                           "a tick that divides every period and offset (the largest is %u ns)",
                           i, t->offset_ns, tick_ns, fit);
        }
    }

    uint32_t struct_size = s->struct_size;
    cp_fill((uint8_t *)s, 0, sizeof(*s));
    s->struct_size = struct_size;
    if (!group_bounds(s->copies, prog->let_copy_count, prog->let_copies, 1) ||
        !group_bounds(s->bindings, prog->io_binding_count, prog->io_bindings, 0)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "the program's LET copies or I/O bindings are not grouped by task: "
                       "load the program with cp_program_load", 0);
    }
    s->task_count = prog->task_count;
    s->prog = prog;
    /* a config of ABI 3 or 4 ends before guard_run (left NULL by the fill above) */
    cp_copy((uint8_t *)&s->cfg, (const uint8_t *)cfg,
            cfg->struct_size < sizeof(cp_sched_config) ? cfg->struct_size
                                                       : sizeof(cp_sched_config));
    s->cfg.struct_size = sizeof(cp_sched_config);
    /* priority order: lower number first, ties by task index (a stable insertion sort) */
    for (uint32_t i = 0; i < prog->task_count; i++) {
        uint32_t k = i;
        while (k > 0 && prog->tasks[s->order[k - 1]].priority > prog->tasks[i].priority) {
            s->order[k] = s->order[k - 1];
            k--;
        }
        s->order[k] = (uint8_t)i;
        s->period_ticks[i] = prog->tasks[i].period_ns / tick_ns;
        s->offset_ticks[i] = prog->tasks[i].period_ns != 0 ? prog->tasks[i].offset_ns / tick_ns
                                                           : 0;
    }
    s->job_costs = s->cfg.deterministic == 0;
    for (uint32_t i = 0; i < prog->task_count; i++) {
        s->budget_ns[i] = cp_task_budget_ns(&prog->tasks[i], cfg->budget_factor,
                                            cfg->budget_min_ns, 0);
        s->job_costs |= prog->tasks[i].wcet_ns != 0;
    }
    restart(s);
    cp_ok(err);
    return CP_OK;
}

uint64_t cp_task_budget_ns(const cp_task_entry *task, uint32_t factor, uint64_t min_ns,
                           uint64_t request_ns)
{
    if (factor == 0) {
        return 0;
    }
    uint64_t base = task->budget_ns != 0  ? task->budget_ns
                    : task->wcet_ns != 0  ? task->wcet_ns
                                          : task->period_ns;
    if (base == 0) {
        return request_ns; /* a task run on request, with nothing declared */
    }
    uint64_t budget = base > UINT64_MAX / factor ? UINT64_MAX : base * factor;
    return budget < min_ns ? min_ns : budget;
}

/* ---- the safe state */

static void drive_safe(const cp_sched *s, const cp_io_binding *b)
{
    if (s->cfg.io_write != NULL && b->direction == CP_DIR_OUTPUT) {
        s->cfg.io_write(s->cfg.io_ctx, b->kind, b->channel, b->safe);
    }
}

void cp_sched_safe_state(const cp_sched *s)
{
    cp_sched_release_outputs(s, NULL);
}

/* 1 if `prog` drives (kind, channel) from an OUTPUT binding. */
static int drives(const cp_program *prog, uint8_t kind, uint16_t channel)
{
    for (uint32_t k = 0; prog != NULL && k < prog->io_binding_count; k++) {
        const cp_io_binding *b = &prog->io_bindings[k];
        if (b->direction == CP_DIR_OUTPUT && b->kind == kind && b->channel == channel) {
            return 1;
        }
    }
    return 0;
}

void cp_sched_release_outputs(const cp_sched *s, const cp_program *next)
{
    if (s == NULL || s->prog == NULL || !s->prog->loaded) {
        return;
    }
    const cp_program *prog = s->prog;
    for (uint32_t k = 0; k < prog->io_binding_count; k++) {
        const cp_io_binding *b = &prog->io_bindings[k];
        if (!drives(next, b->kind, b->channel)) {
            drive_safe(s, b);
        }
    }
}

void cp_sched_fail(cp_sched *s, const cp_fault *fault)
{
    if (s == NULL || s->prog == NULL || fault == NULL || fault->kind == CP_FAULT_NONE ||
        s->fault.kind != CP_FAULT_NONE) {
        return; /* the first fault is the one reported */
    }
    s->fault = *fault;
    s->fault.tick = s->tick;
    cp_sched_safe_state(s);
}

void cp_sched_reset(cp_sched *s)
{
    if (s == NULL || s->prog == NULL || !s->prog->loaded) {
        return;
    }
    const cp_program *prog = s->prog;
    cp_program_reset_data(prog);
    restart(s);
}

cp_status cp_sched_add_feed(cp_sched *s, const cp_sched_feed *feed, cp_error *err)
{
    if (s == NULL || s->prog == NULL || feed == NULL) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_sched_add_feed: an initialised scheduler and a feed are needed", 0);
    }
    if (s->feed_count >= CP_MAX_FEEDS) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, s->feed_count,
                       "already %u feeds, the maximum: clear the feeds first", CP_MAX_FEEDS);
    }
    uint32_t data_size = s->prog->data_size;
    if (feed->size == 0 || (uint64_t)feed->offset + feed->size > data_size) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, s->feed_count,
                       "feed slot [%u, %u) is empty or exceeds the %u-byte data region",
                       feed->offset, (uint64_t)feed->offset + feed->size, data_size);
    }
    if (feed->count > (uint64_t)SIZE_MAX / feed->size ||
        (feed->samples == NULL && feed->count != 0)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, s->feed_count,
                       "feed samples: %u samples of %u bytes are not addressable (or NULL)",
                       feed->count, feed->size);
    }
    s->feeds[s->feed_count++] = *feed;
    cp_ok(err);
    return CP_OK;
}

void cp_sched_clear_feeds(cp_sched *s)
{
    if (s != NULL) {
        s->feed_count = 0;
        cp_fill((uint8_t *)s->feeds, 0, sizeof(s->feeds));
    }
}

cp_status cp_sched_set_trace(cp_sched *s, const uint32_t *offsets, const uint32_t *sizes,
                             uint32_t count, uint8_t *buf, uint64_t capacity, cp_error *err)
{
    if (s == NULL || s->prog == NULL) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_sched_set_trace: the scheduler is not initialised", 0);
    }
    if (count > CP_MAX_TRACE_RANGES) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0, "%u trace ranges, at most %u are supported",
                       count, CP_MAX_TRACE_RANGES);
    }
    if (count > 0 && (offsets == NULL || sizes == NULL || buf == NULL || capacity == 0)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "tracing %u ranges needs the ranges, a buffer and a capacity > 0 rows",
                       count);
    }
    uint64_t row_size = sizeof(uint64_t);
    for (uint32_t r = 0; r < count; r++) {
        uint64_t end = (uint64_t)offsets[r] + sizes[r];
        if (sizes[r] == 0 || end > s->prog->data_size) {
            return CP_FAIL(err, CP_ERR_ARGUMENT, r,
                           "trace range %u [%u, %u) is empty or exceeds the %u-byte data "
                           "region", r, offsets[r], end, s->prog->data_size);
        }
        row_size += sizes[r];
    }
    if (row_size > UINT32_MAX || (count > 0 && capacity > (uint64_t)SIZE_MAX / row_size)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "a trace of %u rows of %u bytes is not addressable", capacity, row_size);
    }
    /* a range that starts where the previous one ends joins it: the same row bytes, one
     * copy (LocalTarget's outputs are side by side, one range each: bench_sim.py "trace") */
    uint32_t merged = 0;
    cp_fill((uint8_t *)s->trace_offset, 0, sizeof(s->trace_offset));
    cp_fill((uint8_t *)s->trace_size, 0, sizeof(s->trace_size));
    for (uint32_t r = 0; r < count; r++) {
        if (merged != 0 &&
            (uint64_t)s->trace_offset[merged - 1] + s->trace_size[merged - 1] == offsets[r]) {
            s->trace_size[merged - 1] += sizes[r];
            continue;
        }
        s->trace_offset[merged] = offsets[r];
        s->trace_size[merged] = sizes[r];
        merged++;
    }
    s->trace_range_count = merged;
    s->trace_row_size = count > 0 ? (uint32_t)row_size : 0;
    s->trace_buf = count > 0 ? buf : NULL;
    s->trace_capacity = count > 0 ? capacity : 0;
    s->trace_rows = 0;
    s->trace_next = 0;
    cp_ok(err);
    return CP_OK;
}
