// MetricsScraper: a thread that GETs a remote engine's /metrics every interval while a remote run
// goes on and keeps the mapped ServerSeries (server_metrics.h). A failed scrape is counted and the
// scraping goes on; a page with no known family leaves every series empty. Scrapes are bounded by the
// interval (at least 1 s) so that a hung server cannot hold the thread past stop().
// Thread: its own; series() and stop() from any thread.
#pragma once

#include "remote/http_client.h"
#include "remote/server_metrics.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace kvscope {

class MetricsScraper {
public:
    // `clock` gives the time of each sample (the benchmark target's now()). The first scrape is done
    // before the constructor returns, so the series starts from the server's state before the run.
    MetricsScraper(HttpEndpoint endpoint, double interval_s, std::function<double()> clock,
                   std::string path = "/metrics");
    ~MetricsScraper();
    MetricsScraper(const MetricsScraper&) = delete;
    MetricsScraper& operator=(const MetricsScraper&) = delete;

    // Takes one last sample, then ends the thread (idempotent).
    void stop();
    ServerSeries series() const;

private:
    void run();
    // True when the page was read and the server reports nothing running. timeout_s 0: the interval (at least 1 s).
    bool scrape(HttpClient& client, double timeout_s = 0);

    HttpEndpoint endpoint_;
    std::function<double()> clock_;
    std::string path_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    bool first_scraped_ = false;
    ServerSeries series_;
    std::optional<ServerReading> first_, previous_;
    double previous_time_ = 0;
    std::thread thread_;  // last: started when everything above exists
};

}  // namespace kvscope
