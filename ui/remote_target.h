// A remote OpenAI-compatible engine as the GUI names it: what the user asks to connect to
// (RemoteConnection: URL, API key, served model) and what the connection found (RemoteTarget: the
// engine, the served models). probeEndpoint() asks the server (/v1/models, /version, /metrics) through
// the engine's libcurl client; it blocks, so it runs off the GUI thread. The API key lives only in
// RemoteConnection, for the session: nothing here writes it to settings or exports.
#pragma once

#include "remote/server_metrics.h"

#include <QJsonObject>
#include <QMetaType>
#include <QString>
#include <QStringList>

#include <vector>

namespace kvscope::ui {

struct RemoteConnection {
    QString baseUrl;  // http(s)://host:port, no /v1
    QString apiKey;   // "" = none; sent as Authorization: Bearer, never stored
    QString model;    // the served model name; "" = the first /v1/models lists
};

struct RemoteTarget {
    QString baseUrl;      // without user:password@
    QString engine;       // kvscope, vllm, sglang, tgi, llama.cpp, unknown
    QString model;        // the served model in use
    QStringList models;   // every model /v1/models lists

    // "remote: vllm at http://gpu-box:8000, model llama-3-8b": the status bar's and the exports' words.
    QString label() const;
    // {"kind": "remote", "base_url", "engine", "model"}: kvscope-cli bench's "target" (plus the model).
    QJsonObject toJson() const;
};

// Blocking: lists the served models and recognises the engine. Throws BadInput with a message that
// names the URL and the cause (refused, 401, 404, no model list, a model that is not served).
RemoteTarget probeEndpoint(const RemoteConnection& connection);

using ServerSamples = std::vector<kvscope::ServerSample>;

// How the scrapes of the server's /metrics went (ServerSeries' counts): the view says when they fail,
// and the session export carries the counts.
struct ScrapeHealth {
    int scrapes = 0, failed = 0;
    bool failing = false;  // the latest scrape failed
    QString lastError;
    bool operator==(const ScrapeHealth&) const = default;
};

}  // namespace kvscope::ui

Q_DECLARE_METATYPE(kvscope::ui::RemoteConnection)
Q_DECLARE_METATYPE(kvscope::ui::RemoteTarget)
Q_DECLARE_METATYPE(kvscope::ui::ServerSamples)
Q_DECLARE_METATYPE(kvscope::ui::ScrapeHealth)
