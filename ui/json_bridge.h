// The engine writes JSON with nlohmann::json (one vocabulary for the CLI and the GUI); Qt code holds
// QJsonObject. One conversion, through the text, for the few places where the two meet.
#pragma once

#include <QByteArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <nlohmann/json.hpp>

namespace kvscope::ui {

inline QJsonObject toQJsonObject(const nlohmann::json& j) {
    return QJsonDocument::fromJson(QByteArray::fromStdString(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)))
        .object();
}

inline QJsonValue toQJsonValue(const nlohmann::json& j) {
    return QJsonDocument::fromJson(QByteArray::fromStdString(nlohmann::json{{"v", j}}.dump(-1, ' ', false,
                                                                                       nlohmann::json::error_handler_t::replace)))
        .object()
        .value("v");
}

}  // namespace kvscope::ui
