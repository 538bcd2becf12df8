#include "remote_target.h"

#include "remote/http_client.h"
#include "remote/remote_server.h"
#include "util/errors.h"

namespace kvscope::ui {

QString RemoteTarget::label() const {
    return QString("remote: %1 at %2, model %3").arg(engine, baseUrl, model);
}

QJsonObject RemoteTarget::toJson() const {
    return QJsonObject{{"kind", "remote"}, {"base_url", baseUrl}, {"engine", engine}, {"model", model}};
}

RemoteTarget probeEndpoint(const RemoteConnection& c) {
    const std::string url = c.baseUrl.trimmed().toStdString();
    check_base_url(url);
    HttpEndpoint endpoint;
    endpoint.base_url = url;
    endpoint.api_key = c.apiKey.toStdString();
    endpoint.connect_timeout_s = 5;
    HttpClient client(endpoint);
    RemoteTarget t;
    t.baseUrl = QString::fromStdString(redacted_url(url));
    std::vector<std::string> served;
    t.model = QString::fromStdString(check_served_model(client, c.model.toStdString(), &served));
    for (const std::string& name : served) t.models << QString::fromStdString(name);
    t.engine = QString::fromUtf8(to_string(detect_remote_engine(client)));
    return t;
}

}  // namespace kvscope::ui
