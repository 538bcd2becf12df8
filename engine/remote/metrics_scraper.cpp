#include "remote/metrics_scraper.h"

#include <algorithm>
#include <chrono>

namespace kvscope {

MetricsScraper::MetricsScraper(HttpEndpoint endpoint, double interval_s, std::function<double()> clock, std::string path)
    : endpoint_(std::move(endpoint)), clock_(std::move(clock)), path_(std::move(path)) {
    series_.interval_s = interval_s;
    thread_ = std::thread([this] { run(); });
    // Without this wait the first requests can reach the server before the first scrape (seen in CI:
    // a run "starting" at 10% KV usage). A scrape is bounded by its timeout, so this cannot hang.
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [this] { return first_scraped_; });
}

MetricsScraper::~MetricsScraper() { stop(); }

void MetricsScraper::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

ServerSeries MetricsScraper::series() const {
    std::lock_guard lock(mutex_);
    return series_;
}

void MetricsScraper::run() {
    HttpClient client(endpoint_);
    for (;;) {
        scrape(client);
        std::unique_lock lock(mutex_);
        if (!first_scraped_) {
            first_scraped_ = true;
            wake_.notify_all();
        }
        if (stopping_) return;
        wake_.wait_for(lock, std::chrono::duration<double>(series_.interval_s), [this] { return stopping_; });
        if (stopping_) {  // one last sample, so that the series reaches the end of the run
            lock.unlock();
            // The run has ended on the client when stop() is called, but a server frees a request's KV
            // blocks only after it has sent the last chunk: sample again (for at most two seconds) until it
            // reports nothing running, so the series ends where the server has settled. Seconds of the clock,
            // not 20 samples: a slow page (0.9 s) on a server that is never idle took 20 s. A failed scrape (a
            // busy server past the timeout) is tried again: it used to end the series on a sample taken while
            // the run's last requests still held their blocks.
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            while (std::chrono::steady_clock::now() < until && !scrape(client, 1.0))
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            return;
        }
    }
}

bool MetricsScraper::scrape(HttpClient& client, double timeout_s) {
    const HttpResponse r = client.get(path_, timeout_s > 0 ? timeout_s : std::max(1.0, series_.interval_s));
    const double t = clock_();
    std::lock_guard lock(mutex_);
    ++series_.num_scrapes;
    if (!r.ok()) {
        ++series_.num_failed_scrapes;
        series_.last_failed = true;
        series_.last_error = r.describe();
        return false;  // not known to have settled
    }
    series_.last_failed = false;
    const std::vector<PromSample> samples = parse_prometheus_text(r.body);
    if (series_.engine == ServerEngine::UNKNOWN) series_.engine = engine_of_metrics(samples);
    const ServerReading reading = read_server_metrics(series_.engine, samples);
    if (!first_) first_ = reading;
    series_.samples.push_back(server_sample(t, reading, previous_ ? &*previous_ : nullptr, previous_time_, *first_));
    previous_ = reading;
    previous_time_ = t;
    return reading.num_requests_running.value_or(0) == 0;
}

}  // namespace kvscope
