// The schedulers with no model: a KvCacheManager of a few blocks, requests built by hand, and a fake
// runner that does what LlmEngine::step() does around the model (schedule, check_invariants,
// update_after_step, one sampled token for each request that reached its last token, finish_request at
// max_tokens). Each case is a step-by-step trace, written out by hand from the rules in docs/DESIGN.md
// section 2: admission order, seats, the token budget, chunked prefill, the head-of-line cap,
// preemption (victim and requeue position), priority seats, naive static batches, prefix caching and
// the admission fit check. A seeded soak with live reconfiguration checks the invariants every step.
#include "test_support.h"

#include "kv/kv_cache_manager.h"
#include "sched/continuous_scheduler.h"
#include "sched/naive_scheduler.h"

#include <QRegularExpression>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace kvscope;

namespace {

// Trace rows: one line per step, "a:4 b:1 pad:2 -c | c d" = a computes 4 tokens and b 1, 2 padding rows
// (naive mode), c was preempted, and c then d wait (in queue order) after the step was scheduled.
QString trace_line(const Scheduler& sched, const SchedulerOutput& out) {
    QStringList parts;
    for (const ScheduledRequest& s : out.scheduled)
        parts << QString::fromStdString(s.request->request_id) + ":" + QString::number(s.num_new_tokens);
    if (out.num_padding_tokens > 0) parts << "pad:" + QString::number(out.num_padding_tokens);
    for (const Request* r : out.preempted) parts << "-" + QString::fromStdString(r->request_id);
    if (!sched.waiting().empty()) {
        parts << "|";
        for (const Request* r : sched.waiting()) parts << QString::fromStdString(r->request_id);
    }
    return parts.join(' ');
}

// The engine's loop around the model, with the model and sampler faked.
class FakeRunner {
public:
    FakeRunner(const std::string& mode, const SchedulerConfig& config, int num_blocks, int block_size, bool caching)
        : kv_(num_blocks, block_size, caching) {
        if (mode == "naive") sched_ = std::make_unique<NaiveScheduler>(kv_, config);
        else sched_ = std::make_unique<ContinuousScheduler>(kv_, config);
    }

    Request* add(const std::string& id, std::vector<int32_t> prompt, int max_tokens, int priority = 0,
                 const std::string& cache_salt = "") {
        auto r = std::make_unique<Request>();
        r->request_id = id;
        r->num_prompt_tokens = int(prompt.size());
        r->all_token_ids = std::move(prompt);
        r->sampling_params.max_tokens = max_tokens;
        r->priority = priority;
        r->arrival_seq = next_seq_++;
        r->arrival_time = double(r->arrival_seq);
        r->cache_salt = cache_salt;
        requests_.push_back(std::move(r));
        sched_->add_request(requests_.back().get());
        return requests_.back().get();
    }

    // One engine step. Returns "" or the first broken rule, prefixed with the step number.
    std::string step() {
        const std::set<const Request*> was_running(sched_->running().begin(), sched_->running().end());
        last_ = sched_->schedule();
        ++num_steps_;
        trace_ << trace_line(*sched_, last_);
        std::string err = sched_->check_invariants(last_);
        if (err.empty()) err = check_step(was_running);
        if (!err.empty()) return "step " + std::to_string(num_steps_ - 1) + ": " + err;
        sched_->update_after_step(last_);
        for (const ScheduledRequest& s : last_.scheduled) {
            Request* r = s.request;
            const bool reached = r->num_computed_tokens == r->num_tokens();
            if (reached != s.samples)
                return "step " + std::to_string(num_steps_ - 1) + ": " + r->request_id + " samples=" +
                       std::to_string(s.samples) + " but computed " + std::to_string(r->num_computed_tokens) +
                       " of " + std::to_string(r->num_tokens());
            if (!reached) continue;
            r->all_token_ids.push_back(int32_t(7 + r->num_tokens() % 5));  // the fake sampler
            if (r->num_output_tokens() >= r->sampling_params.max_tokens ||
                r->num_tokens() >= sched_->config().max_model_len)
                sched_->finish_request(r, FinishReason::LENGTH);
        }
        return "";
    }

    Scheduler& sched() { return *sched_; }
    KvCacheManager& kv() { return kv_; }
    const SchedulerOutput& last() const { return last_; }
    const QStringList& trace() const { return trace_; }
    const std::vector<std::unique_ptr<Request>>& requests() const { return requests_; }
    Request* find(const std::string& id) const {
        for (const auto& r : requests_)
            if (r->request_id == id) return r.get();
        return nullptr;
    }

private:
    // Rules of the step that Scheduler::check_invariants cannot see on its own.
    std::string check_step(const std::set<const Request*>& was_running) const {
        std::set<const Request*> seen;
        bool admitted = false;
        for (const ScheduledRequest& s : last_.scheduled) {
            const Request* r = s.request;
            if (!seen.insert(r).second) return r->request_id + " is scheduled twice";
            if (r->status != RequestStatus::RUNNING) return r->request_id + " is scheduled but not running";
            if (s.num_new_tokens <= 0) return r->request_id + " is scheduled for no tokens";
            if (r->num_computed_tokens + s.num_new_tokens > r->num_tokens())
                return r->request_id + " is scheduled beyond its tokens";
            admitted |= !was_running.contains(r);
        }
        for (const Request* r : last_.preempted)
            if (seen.contains(r) || r->status != RequestStatus::PREEMPTED) return r->request_id + " is preempted and scheduled";
        for (const Request* r : sched_->waiting())
            if (r->num_computed_tokens != 0 || (r->status != RequestStatus::WAITING && r->status != RequestStatus::PREEMPTED))
                return "waiting request " + r->request_id + " has computed tokens or a wrong status";
        // Continuous batching admits a request only while one free block per running request stays in
        // reserve (the last admission saw running - 1 others): otherwise the next decodes preempt someone.
        const int running = int(sched_->running().size());
        if (sched_->mode() == "paged" && admitted && running >= 2 && kv_.num_free_blocks() < running - 1)
            return "admission left " + std::to_string(kv_.num_free_blocks()) + " free blocks for " +
                   std::to_string(running) + " running requests";
        return "";
    }

    KvCacheManager kv_;
    std::unique_ptr<Scheduler> sched_;
    std::vector<std::unique_ptr<Request>> requests_;
    uint64_t next_seq_ = 0;
    SchedulerOutput last_;
    int num_steps_ = 0;
    QStringList trace_;
};

// ---- trace cases: a setup, requests in a small language, and the expected trace ----

struct Setup {
    const char* mode = "paged";
    const char* policy = "fcfs";
    bool caching = false;
    int seats = 8;      // max_num_seqs
    int budget = 64;    // max_num_batched_tokens
    int threshold = 0;  // long_prefill_token_threshold
    int num_blocks = 64;
    int block_size = 4;
    int max_model_len = 128;
    // Reconfigurations between steps: "k:policy=fcfs,seats=1,budget=8,threshold=2" applies before step k.
    const char* changes = "";
};

// "a:4/3" = request a, a prompt of 4 tokens of its own, max_tokens 3. Optional parts: "a:P16+4/3" = the
// first 16 tokens of a shared sequence P, then 4 of its own; "p2" = priority 2; "@3" = added before
// step 3 (else before step 0). Requests given for the same step arrive in the order written.
struct RequestSpec {
    std::string id;
    int shared = 0, own = 0, max_tokens = 1, priority = 0, arrival_step = 0;
};

std::vector<RequestSpec> parse_requests(const QString& text) {
    static const QRegularExpression re(R"(^(\w+):(?:P(\d+)\+?)?(\d*)/(\d+)(?:p(\d+))?(?:@(\d+))?$)");
    std::vector<RequestSpec> out;
    for (const QString& word : text.split(' ', Qt::SkipEmptyParts)) {
        const QRegularExpressionMatch m = re.match(word);
        if (!m.hasMatch()) qFatal("bad request spec '%s'", qPrintable(word));
        out.push_back({m.captured(1).toStdString(), m.captured(2).toInt(), m.captured(3).toInt(), m.captured(4).toInt(),
                       m.captured(5).toInt(), m.captured(6).toInt()});
    }
    return out;
}

std::vector<int32_t> prompt_of(const RequestSpec& s, int index) {
    std::vector<int32_t> t;
    for (int i = 0; i < s.shared; ++i) t.push_back(10000 + i);
    for (int i = 0; i < s.own; ++i) t.push_back(1000 * (index + 1) + i);  // nobody else's tokens
    return t;
}

SchedulerConfig config_of(const Setup& s) {
    SchedulerConfig c;
    c.policy = parse_scheduler_policy(s.policy);
    c.enable_prefix_caching = s.caching;
    c.max_num_seqs = s.seats;
    c.max_num_batched_tokens = s.budget;
    c.long_prefill_token_threshold = s.threshold;
    c.max_model_len = s.max_model_len;
    return c;
}

void apply_changes(FakeRunner& run, const QString& changes, int step) {
    for (const QString& change : changes.split(' ', Qt::SkipEmptyParts)) {
        const QStringList at = change.split(':');
        if (at.size() != 2) qFatal("bad change '%s'", qPrintable(change));
        if (at[0].toInt() != step) continue;
        SchedulerConfig c = run.sched().config();
        for (const QString& kv : at[1].split(',')) {
            const QStringList p = kv.split('=');
            if (p[0] == "policy") c.policy = parse_scheduler_policy(p[1].toStdString());
            else if (p[0] == "seats") c.max_num_seqs = p[1].toInt();
            else if (p[0] == "budget") c.max_num_batched_tokens = p[1].toInt();
            else if (p[0] == "threshold") c.long_prefill_token_threshold = p[1].toInt();
            else qFatal("bad change '%s'", qPrintable(change));
        }
        run.sched().set_config(c);
    }
}

QStringList rep(const QString& line, int n) {
    QStringList out;
    for (int i = 0; i < n; ++i) out << line;
    return out;
}

void add_trace_columns() {
    QTest::addColumn<QString>("mode");
    QTest::addColumn<QString>("policy");
    QTest::addColumn<bool>("caching");
    QTest::addColumn<int>("seats");
    QTest::addColumn<int>("budget");
    QTest::addColumn<int>("threshold");
    QTest::addColumn<int>("num_blocks");
    QTest::addColumn<int>("block_size");
    QTest::addColumn<int>("max_model_len");
    QTest::addColumn<QString>("changes");
    QTest::addColumn<QString>("requests");
    QTest::addColumn<QStringList>("trace");
}

void add_trace_row(const char* name, const Setup& s, const char* requests, const QStringList& trace) {
    QTest::newRow(name) << QString(s.mode) << QString(s.policy) << s.caching << s.seats << s.budget << s.threshold
                        << s.num_blocks << s.block_size << s.max_model_len << QString(s.changes) << QString(requests)
                        << trace;
}

// Runs the current row until every request finished and compares the whole trace.
void run_trace_row() {
    QFETCH(QString, mode);
    QFETCH(QString, policy);
    QFETCH(bool, caching);
    QFETCH(int, seats);
    QFETCH(int, budget);
    QFETCH(int, threshold);
    QFETCH(int, num_blocks);
    QFETCH(int, block_size);
    QFETCH(int, max_model_len);
    QFETCH(QString, changes);
    QFETCH(QString, requests);
    QFETCH(QStringList, trace);
    const std::string policy_s = policy.toStdString();
    const Setup setup{.policy = policy_s.c_str(), .caching = caching, .seats = seats, .budget = budget,
                      .threshold = threshold, .max_model_len = max_model_len};
    FakeRunner run(mode.toStdString(), config_of(setup), num_blocks, block_size, caching);
    const std::vector<RequestSpec> specs = parse_requests(requests);
    int last_arrival = 0;
    for (const RequestSpec& s : specs) last_arrival = std::max(last_arrival, s.arrival_step);
    for (int step = 0; step < 1000; ++step) {
        for (size_t i = 0; i < specs.size(); ++i)
            if (specs[i].arrival_step == step)
                run.add(specs[i].id, prompt_of(specs[i], int(i)), specs[i].max_tokens, specs[i].priority);
        apply_changes(run, changes, step);
        if (step > last_arrival && !run.sched().has_unfinished_requests()) break;
        QCOMPARE(QString::fromStdString(run.step()), QString());
    }
    QCOMPARE(run.trace(), trace);
    QVERIFY(!run.sched().has_unfinished_requests());
    QCOMPARE(run.kv().num_free_blocks(), num_blocks);
    QCOMPARE(QString::fromStdString(run.kv().check_invariants()), QString());
    for (const auto& r : run.requests()) QCOMPARE(r->num_output_tokens(), r->sampling_params.max_tokens);
}

}  // namespace

class TestScheduler : public QObject {
    Q_OBJECT
private slots:
    // Waiting requests are admitted in policy order while seats (max_num_seqs) last.
    void admissionOrder_data() {
        add_trace_columns();
        const char* four = "a:4/2p2 b:4/2p0 c:4/2p1 d:4/2p0";
        add_trace_row("fcfs: arrival order, 2 seats", {.seats = 2}, four,
                      {"a:4 b:4 | c d", "a:1 b:1 | c d", "c:4 d:4", "c:1 d:1"});
        add_trace_row("priority: (priority, arrival) order, 2 seats", {.policy = "priority", .seats = 2}, four,
                      {"b:4 d:4 | c a", "b:1 d:1 | c a", "c:4 a:4", "c:1 a:1"});
        add_trace_row("fcfs: 1 seat", {.seats = 1}, "a:2/1 b:2/1 c:2/1", {"a:2 | b c", "b:2 | c", "c:2"});
        add_trace_row("fcfs: later arrivals queue behind", {.seats = 1}, "a:2/2 b:2/1@1 c:2/1@1",
                      {"a:2", "a:1 | b c", "b:2 | c", "c:2"});
        add_trace_row("8 seats: everyone at once", {}, four, {"a:4 b:4 c:4 d:4", "a:1 b:1 c:1 d:1"});
    }
    void admissionOrder() { run_trace_row(); }

    // One token budget per step covers decodes and prefill chunks; a long prompt is chunked.
    void tokenBudget_data() {
        add_trace_columns();
        add_trace_row("a long prompt is chunked across steps", {.budget = 16}, "a:50/3",
                      {"a:16", "a:16", "a:16", "a:2", "a:1", "a:1"});
        add_trace_row("decodes and a prefill share the budget", {.budget = 16}, "a:4/4 b:30/2@1",
                      {"a:4", "a:1 b:15", "a:1 b:15", "a:1 b:1"});
        add_trace_row("a prefill chunk takes what the decodes leave", {.budget = 8}, "a:2/3 b:20/1@1",
                      {"a:2", "a:1 b:7", "a:1 b:7", "b:6"});
        add_trace_row("decodes beyond the budget wait", {.budget = 2}, "a:1/3 b:1/3 c:1/3",
                      rep("a:1 b:1 | c", 3) + rep("c:1", 3));
    }
    void tokenBudget() { run_trace_row(); }

    // While others wait, one prefill chunk takes at most long_prefill_token_threshold tokens (0: a
    // quarter of the budget), so a long prompt cannot hold up the queue for a whole step.
    void headOfLineCap_data() {
        add_trace_columns();
        add_trace_row("threshold 8 caps the first prompt while b waits", {.budget = 32, .threshold = 8},
                      "a:40/1 b:4/1", {"a:8 b:4", "a:32"});
        add_trace_row("threshold 0: a quarter of the budget", {.budget = 40}, "a:40/1 b:4/1", {"a:10 b:4", "a:30"});
        add_trace_row("a running prefill stays capped while b waits for a seat",
                      {.seats = 1, .budget = 32, .threshold = 8}, "a:40/1 b:4/1", rep("a:8 | b", 5) + QStringList{"b:4"});
        add_trace_row("no cap when nothing waits", {.budget = 32, .threshold = 8}, "a:40/1", {"a:32", "a:8"});
    }
    void headOfLineCap() { run_trace_row(); }

    // Out of blocks, a running request is preempted by recompute: fcfs picks the last admitted and puts it
    // back at the front of the queue; priority picks the lowest priority, then the latest arrival, and
    // puts it back in policy order. After a preemption for memory nobody is admitted in that step.
    void preemption_data() {
        add_trace_columns();
        add_trace_row("fcfs: the last admitted is the victim and waits at the front", {.num_blocks = 6},
                      "a:4/8 b:4/8 c:4/8 d:4/2@1",
                      QStringList{"a:4 b:4 c:4"} + rep("a:1 b:1 c:1 | d", 4) +
                          QStringList{"a:1 b:1 -c | c d", "a:1 b:1 | c d", "a:1 b:1 | c d", "c:9 d:4", "c:1 d:1", "c:1"});
        const char* mixed = "a:4/8p1 b:4/8p1 c:4/8p0@1 d:4/2p0@1";
        add_trace_row("fcfs: c, admitted last, is the victim", {.num_blocks = 7}, mixed,
                      QStringList{"a:4 b:4", "a:1 b:1 c:4 | d"} + rep("a:1 b:1 c:1 | d", 3) +
                          QStringList{"a:1 b:1 -c | c d", "a:1 b:1 | c d", "a:1 b:1 | c d", "c:8 d:4", "c:1 d:1", "c:1", "c:1"});
        add_trace_row("priority: b (lowest priority, latest arrival) is the victim and waits behind d",
                      {.policy = "priority", .num_blocks = 7}, mixed,
                      QStringList{"a:4 b:4", "a:1 b:1 c:4 | d"} + rep("a:1 b:1 c:1 | d", 3) +
                          QStringList{"a:1 c:1 -b | d b", "a:1 c:1 | d b", "a:1 c:1 | d b", "c:1 d:4 | b", "d:1 b:9", "b:1", "b:1"});
        add_trace_row("priority: a victim scheduled earlier in the step gives its tokens back",
                      {.policy = "priority", .num_blocks = 4}, "a:7/8p2 b:4/8p0@1",
                      QStringList{"a:7", "a:1 b:4", "b:1 -a | a"} + rep("b:1 | a", 6) + QStringList{"a:9"} + rep("a:1", 5));
        // After a switch from priority, d (arrived after a) was running: preempted, it still goes first.
        add_trace_row("fcfs puts the victim at the front, not in arrival order",
                      {.policy = "priority", .seats = 2, .changes = "1:policy=fcfs,seats=1"},
                      "a:4/3p1 b:4/3p0 d:4/3p0",
                      {"b:4 d:4 | a", "b:1 -d | d a", "b:1 | d a", "d:5 | a", "d:1 | a", "a:4", "a:1", "a:1"});
        add_trace_row("lowering max_num_seqs preempts the fcfs victim", {.seats = 3, .changes = "2:seats=1"},
                      "a:2/4 b:2/4 c:2/4",
                      {"a:2 b:2 c:2", "a:1 b:1 c:1", "a:1 -c -b | b c", "a:1 | b c", "b:4 | c", "b:1 | c", "c:4", "c:1"});
    }
    void preemption() { run_trace_row(); }

    // Under priority (unlike vLLM), a waiting request that outranks a running one takes its seat when
    // max_num_seqs is the limit; fcfs never does.
    void prioritySeats_data() {
        add_trace_columns();
        const char* late_urgent = "a:4/6p1 b:4/6p1 c:4/2p0@2";
        add_trace_row("priority: c outranks b and takes its seat", {.policy = "priority", .seats = 2}, late_urgent,
                      {"a:4 b:4", "a:1 b:1", "a:1 c:4 -b | b", "a:1 c:1 | b", "a:1 b:6", "a:1 b:1", "b:1", "b:1"});
        add_trace_row("fcfs: c waits for a seat", {.seats = 2}, late_urgent,
                      QStringList{"a:4 b:4", "a:1 b:1"} + rep("a:1 b:1 | c", 4) + QStringList{"c:4", "c:1"});
        add_trace_row("priority: an equal priority does not take a seat", {.policy = "priority", .seats = 2},
                      "a:4/3p1 b:4/3p1 c:4/1p1@1", {"a:4 b:4", "a:1 b:1 | c", "a:1 b:1 | c", "c:4"});
        add_trace_row("priority: the victim waits in policy order", {.policy = "priority", .seats = 1},
                      "a:2/2p1 b:2/1p1@1 c:2/1p0@1", {"a:2", "c:2 -a | a b", "a:3 | b", "b:2"});
    }
    void prioritySeats() { run_trace_row(); }

    // The naive baseline: static batches of up to max_num_seqs, max_model_len reserved per member,
    // prompts padded to the longest, finished members padded until the batch ends, nobody joins a batch.
    void naiveBatches_data() {
        add_trace_columns();
        const Setup naive{.mode = "naive", .max_model_len = 16};
        Setup two = naive;
        two.seats = 2;
        add_trace_row("batches of max_num_seqs, padded to the longest prompt", two, "a:4/2 b:6/4 c:3/1",
                      {"a:4 b:6 | c", "a:1 b:1 pad:2 | c", "b:1 pad:1 | c", "b:1 pad:1 | c", "c:3"});
        add_trace_row("a new request waits for the whole batch", naive, "a:2/3 b:2/1@1", {"a:2", "a:1 | b", "a:1 | b", "b:2"});
        Setup small = naive;
        small.num_blocks = 9;  // two reservations of 16 slots = 4 blocks each, not three
        add_trace_row("a batch holds as many max_model_len reservations as fit", small, "a:2/1 b:2/1 c:2/1",
                      {"a:2 b:2 | c", "c:2"});
    }
    void naiveBatches() { run_trace_row(); }

    // Prefix caching: hits shorten the first chunk, and the admission fit check counts what really leaves
    // the free queue. Shared tokens are "P<n>" (docs/DESIGN.md: only full blocks are cached, and the last
    // token is always recomputed).
    void prefixCaching_data() {
        add_trace_columns();
        add_trace_row("three shared blocks are hits", {.caching = true}, "a:P12/1 b:P12+4/1@1", {"a:12", "b:4"});
        add_trace_row("an identical prompt recomputes its last block", {.caching = true}, "a:P12/1 b:P12/1@1",
                      {"a:12", "b:4"});
        add_trace_row("a partial block is not shared", {.caching = true}, "a:P10/1 b:P10+6/1@1", {"a:10", "b:8"});
        add_trace_row("caching off: no hits", {}, "a:P12/1 b:P12+4/1@1", {"a:12", "b:16"});
        // Hits held by a running request take no free block: b needs 1 new block + a's reserve = 2 free.
        add_trace_row("hits in use cost no free blocks", {.caching = true, .num_blocks = 7}, "a:P16/3 b:P16+4/1@1",
                      {"a:16", "a:1 b:4", "a:1"});
        add_trace_row("... and without caching b waits", {.num_blocks = 7}, "a:P16/3 b:P16+4/1@1",
                      {"a:16", "a:1 | b", "a:1 | b", "b:20"});
        // p's finished blocks stay cached-free; they are free for b (3 new + 1 reserve of the 4 free).
        add_trace_row("evictable cached blocks count as free", {.caching = true, .num_blocks = 6},
                      "p:16/1 a:4/6@1 b:12/1@2", QStringList{"p:16", "a:4", "a:1 b:12"} + rep("a:1", 4));
        // b's 4 hits sit in the free queue (ref_cnt 0): admitting b takes them AND 2 new blocks out of it,
        // 6 of the 6 free, leaving nothing of a's reserve block. b waits until a finishes.
        add_trace_row("evictable hits leave the free queue too", {.caching = true, .num_blocks = 8},
                      "p:P16/1 a:4/8@1 b:P16+8/1@2", QStringList{"p:16", "a:4"} + rep("a:1 | b", 7) + QStringList{"b:8"});
        add_trace_row("... the same admission as without caching", {.num_blocks = 8}, "p:P16/1 a:4/8@1 b:P16+8/1@2",
                      QStringList{"p:16", "a:4"} + rep("a:1 | b", 7) + QStringList{"b:24"});
    }
    void prefixCaching() { run_trace_row(); }

    // The hits are the very blocks of the earlier request (shared, ref_cnt 2), and get_computed_blocks'
    // count is what the scheduler reports as num_cached_tokens.
    void prefixHitsShareBlocks() {
        SchedulerConfig c;
        c.enable_prefix_caching = true;
        FakeRunner run("paged", c, 32, 4, true);
        std::vector<int32_t> prompt(14);
        for (int i = 0; i < 14; ++i) prompt[size_t(i)] = 500 + i;
        run.add("a", prompt, 2);
        QCOMPARE(QString::fromStdString(run.step()), QString());
        const std::vector<int32_t> a_table = run.kv().block_table("a");
        QCOMPARE(a_table.size(), size_t(4));
        prompt.push_back(99);
        Request* b = run.add("b", prompt, 2);
        QCOMPARE(QString::fromStdString(run.step()), QString());
        QCOMPARE(run.trace().back(), QString("a:1 b:3"));
        QCOMPARE(b->num_cached_tokens, 12);
        const std::vector<int32_t> b_table = run.kv().block_table("b");
        QCOMPARE(b_table.size(), size_t(4));
        for (int i = 0; i < 3; ++i) QCOMPARE(b_table[size_t(i)], a_table[size_t(i)]);
        QVERIFY(b_table[3] != a_table[3]);
        // a finished in that step: in use are the 3 shared blocks, now b's alone, and b's new one.
        QCOMPARE(run.kv().num_free_blocks(), 32 - 4);
        for (int i = 0; i < 3; ++i) QCOMPARE(run.kv().block_pool().block(b_table[size_t(i)]).ref_cnt, 1);
        while (run.sched().has_unfinished_requests()) QCOMPARE(QString::fromStdString(run.step()), QString());
        QCOMPARE(run.kv().num_free_blocks(), 32);
    }

    // Hundreds of random requests, random pools, and random reconfiguration between steps: every step
    // keeps every invariant, everyone finishes with all its tokens, and every block ends free.
    void soak_data() {
        QTest::addColumn<QString>("mode");
        QTest::addColumn<bool>("caching");
        QTest::addColumn<uint64_t>("seed");
        QTest::newRow("paged") << QString("paged") << false << uint64_t(1601);
        QTest::newRow("paged, prefix caching") << QString("paged") << true << uint64_t(1602);
        QTest::newRow("naive") << QString("naive") << false << uint64_t(1603);
    }
    void soak() {
        QFETCH(QString, mode);
        QFETCH(bool, caching);
        QFETCH(uint64_t, seed);
        std::mt19937_64 rng(test::test_seed(seed));
        auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
        for (int round = 0; round < 4; ++round) {
            const int block_size = 1 << uniform(0, 4);
            const int num_blocks = uniform(8, 160);
            const int capacity = num_blocks * block_size;
            SchedulerConfig c;
            c.enable_prefix_caching = caching;
            c.max_model_len = std::min(160, capacity);  // every request fits the pool alone
            c.policy = uniform(0, 1) ? SchedulerPolicy::PRIORITY : SchedulerPolicy::FCFS;
            c.max_num_seqs = uniform(1, 24);
            c.max_num_batched_tokens = uniform(1, 96);
            FakeRunner run(mode.toStdString(), c, num_blocks, block_size, caching);
            // Prompts start with one of 3 shared prefixes (or none) and use a small vocabulary, so that
            // prefix hits, shared blocks and evictions happen all the time.
            std::vector<std::vector<int32_t>> prefixes(3);
            for (auto& p : prefixes)
                for (int i = uniform(0, 40); i > 0; --i) p.push_back(uniform(0, 9));
            const int num_requests = 300;
            int added = 0, steps = 0;
            while (added < num_requests || run.sched().has_unfinished_requests()) {
                for (int k = uniform(0, 3); k > 0 && added < num_requests; --k, ++added) {
                    std::vector<int32_t> prompt = uniform(0, 3) < 3 ? prefixes[size_t(uniform(0, 2))] : std::vector<int32_t>{};
                    for (int i = uniform(1, 60); i > 0; --i) prompt.push_back(uniform(0, 9));
                    if (int(prompt.size()) >= c.max_model_len) prompt.resize(size_t(c.max_model_len - 1));
                    const int max_tokens = uniform(1, std::max(1, std::min(40, c.max_model_len - int(prompt.size()))));
                    run.add("r" + std::to_string(added), prompt, max_tokens, uniform(0, 3), uniform(0, 4) ? "" : "salt");
                }
                if (uniform(0, 4) == 0) {
                    SchedulerConfig next = run.sched().config();
                    next.max_num_seqs = uniform(1, 24);
                    next.max_num_batched_tokens = uniform(1, 96);
                    next.long_prefill_token_threshold = uniform(0, 2) ? 0 : uniform(1, 16);
                    if (uniform(0, 3) == 0) next.policy = next.policy == SchedulerPolicy::FCFS ? SchedulerPolicy::PRIORITY : SchedulerPolicy::FCFS;
                    run.sched().set_config(next);
                }
                const std::string err = run.step();
                if (!err.empty()) QFAIL(("round " + std::to_string(round) + ", " + err).c_str());
                QVERIFY2(++steps < 200000, "the soak does not finish");
            }
            QCOMPARE(run.kv().num_free_blocks(), num_blocks);
            QCOMPARE(QString::fromStdString(run.kv().check_invariants()), QString());
            for (const auto& r : run.requests()) {
                QVERIFY(r->is_finished());
                QCOMPARE(r->num_output_tokens(), std::min(r->sampling_params.max_tokens,
                                                          run.sched().config().max_model_len - r->num_prompt_tokens));
            }
            qInfo("round %d: %d blocks of %d, %d steps, %lld preemptions, %lld prefix-cache hit tokens", round,
                  num_blocks, block_size, steps, static_cast<long long>(run.sched().num_preemptions()),
                  static_cast<long long>(run.kv().prefix_cache_stats().num_hit_tokens));
        }
    }
};

QTEST_GUILESS_MAIN(TestScheduler)
#include "test_scheduler.moc"
