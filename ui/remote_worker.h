// RemoteWorker: the GUI's side of a remote OpenAI-compatible engine (a QObject on its own thread, owned
// by EngineController, the counterpart of EngineWorker for a local engine). Chat requests stream over
// the engine's HttpStreamPool and OpenAiStreamReader (chat completions, SSE), benchmarks run on
// RemoteBenchTarget with run_remote_bench (kvscope-cli bench's loop, on a thread of their own), and
// MetricsScraper reads /metrics every second while connected. It emits the value types EngineWorker
// emits (EngineUpdate, BenchResult), so panes, the request table and the latency charts need not know
// which engine answered; TTFT, ITL and TPOT are measured on this client's clock.
// Thread: its own (slots); the pool's and the benchmark's threads only post to it.
#pragma once

#include "bench_spec.h"
#include "engine_types.h"
#include "remote_target.h"

#include "remote/http_client.h"

#include <QObject>
#include <QTimer>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <thread>

namespace kvscope {
class HttpStreamPool;
class MetricsScraper;
struct BenchRun;
}

namespace kvscope::ui {

class RemoteWorker : public QObject {
    Q_OBJECT
public:
    explicit RemoteWorker(QObject* parent = nullptr);
    ~RemoteWorker() override;

public slots:
    void connectEndpoint(const kvscope::ui::RemoteConnection& connection);
    // Ends every stream and the benchmark (their requests finish as aborted) and stops scraping.
    void disconnectEndpoint();
    void submitRequest(const kvscope::ui::SubmitCommand& command);
    void abortRequest(const QString& requestId);
    void runBenchmark(const kvscope::ui::BenchSpec& spec);
    void cancelBenchmark();

signals:
    void connected(const kvscope::ui::RemoteTarget& target);
    void connectFailed(const QString& message);
    void updated(const kvscope::ui::EngineUpdate& update);
    // Scraped /metrics samples since the previous signal, times on this worker's clock (the requests'),
    // and how the scrapes went; sent when either changed.
    void serverSampled(const kvscope::ui::ServerSamples& samples, const kvscope::ui::ScrapeHealth& health);
    void requestRejected(const QString& requestId, const QString& message);
    void errorOccurred(const QString& message);
    void benchmarkProgressed(int finished, int total);
    void benchmarkFinished(const kvscope::ui::BenchResult& result);

private:
    struct Flight;

    double now() const;
    void takeChunk(const QString& id, const QString& delta, double firstTokenTime, int chunks);
    void takeDone(const QString& id, const RequestMetrics& metrics, const QString& error);
    void finishBenchmark(const BenchRun& run, double clockOffset);
    void pollScraper();
    void abortAll();
    void publishSoon();
    void publish();
    RequestProgress& pendingFor(const QString& id);

    std::chrono::steady_clock::time_point m_t0;
    HttpEndpoint m_endpoint;
    RemoteTarget m_target;
    bool m_connected = false;
    quint64 m_commandsReceived = 0;
    std::map<QString, std::shared_ptr<Flight>> m_flights;  // chat requests streaming
    std::unique_ptr<HttpStreamPool> m_pool;
    std::unique_ptr<MetricsScraper> m_scraper;
    size_t m_samplesSent = 0;
    ScrapeHealth m_healthSent;
    QTimer m_scrapeTimer;
    // Coalesced since the last update (as EngineWorker: at most one every ~16 ms).
    std::map<QString, RequestProgress> m_progress;
    std::vector<RequestMetrics> m_finished;
    QTimer m_publishTimer;

    // The benchmark: run_remote_bench on m_benchThread; its finishes are posted here.
    std::thread m_benchThread;
    std::atomic<bool> m_benchCancel{false};
    bool m_benchRunning = false;
    BenchSpec m_benchSpec;
    int m_benchRuns = 0;
    std::vector<int32_t> m_vocabulary;  // the server's ordinary tokens, asked once per connection
};

}  // namespace kvscope::ui
