// A kvscope-cli serve process for the server suites, and a plain HTTP/1.1 client over QTcpSocket that
// shows the bytes as a client sees them (status line, headers, raw body; chunked bodies are read as they
// arrive, so SSE events are visible in them).
#pragma once

#include "test_support.h"

#include <QElapsedTimer>
#include <QProcess>
#include <QTcpSocket>
#include <nlohmann/json.hpp>

#include <memory>

namespace kvscope::test {

struct Reply {
    int status = 0;
    QByteArray head;  // status line and headers
    QByteArray body;  // as sent (a chunked body keeps its chunk-size lines)
};

inline QByteArray request_bytes(const QByteArray& method, const QByteArray& path, const QByteArray& body,
                                const QByteArray& extra_headers = {}) {
    QByteArray r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers;
    if (!body.isEmpty() || method == "POST")
        r += "Content-Type: application/json\r\nContent-Length: " + QByteArray::number(body.size()) + "\r\n";
    return r + "\r\n" + body;
}

// Reads until the server closes the connection (the requests ask for Connection: close).
inline Reply read_reply(QTcpSocket& s, int timeout_ms = 20000) {
    QByteArray data;
    QElapsedTimer t;
    t.start();
    while (s.state() == QAbstractSocket::ConnectedState && t.elapsed() < timeout_ms) {
        s.waitForReadyRead(200);
        data += s.readAll();
    }
    data += s.readAll();
    Reply r;
    const qsizetype end = data.indexOf("\r\n\r\n");
    if (end < 0) return r;
    r.head = data.left(end);
    r.body = data.mid(end + 4);
    const QList<QByteArray> status_line = r.head.split('\r').front().split(' ');
    if (status_line.size() >= 2) r.status = status_line[1].toInt();
    return r;
}

inline Reply http(int port, const QByteArray& method, const QByteArray& path, const QByteArray& body = {},
                  const QByteArray& extra_headers = {}) {
    QTcpSocket s;
    s.connectToHost("127.0.0.1", static_cast<quint16>(port));
    if (!s.waitForConnected(5000)) return {};
    s.write(request_bytes(method, path, body, extra_headers));
    s.flush();
    return read_reply(s);
}

inline Reply post(int port, const QByteArray& path, const nlohmann::json& body, const QByteArray& extra_headers = {}) {
    return http(port, "POST", path, QByteArray::fromStdString(body.dump()), extra_headers);
}

// The "data: ..." payloads of an SSE body, in order.
inline QList<QByteArray> sse_events(const QByteArray& body) {
    QList<QByteArray> events;
    for (const QByteArray& e : body.split('\n'))
        if (e.startsWith("data: ")) events << e.mid(6).trimmed();
    return events;
}

// The value of the first sample "PREFIX:NAME{...LABEL_PART...} V"; -1 when absent.
inline double metric(const QByteArray& text, const QByteArray& name, const QByteArray& label_part = {},
                     const QByteArray& prefix = "kvscope") {
    for (const QByteArray& line : text.split('\n'))
        if (line.startsWith(prefix + ":" + name + "{") && line.contains(label_part))
            return line.mid(line.lastIndexOf(' ') + 1).toDouble();
    return -1;
}

// `kvscope-cli serve --port 0 ARGS...`, started in initTestCase and stopped with SIGTERM.
class ServeProcess {
public:
    // Starts the server and waits until it listens; QVERIFY-style failures go through `error`.
    bool start(const QStringList& args, QByteArray* error) {
        process_ = std::make_unique<QProcess>();
        process_->start(QString::fromStdString(cli_path()), QStringList{"serve", "--port", "0"} + args);
        if (!process_->waitForStarted(10000)) {
            *error = "kvscope-cli did not start";
            return false;
        }
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 60000 && process_->state() == QProcess::Running) {
            process_->waitForReadyRead(200);
            stderr_ += process_->readAllStandardError();
            // http:// or, with --ssl-certfile, https://
            const QByteArray marker = stderr_.contains("listening on https://") ? "listening on https://127.0.0.1:"
                                                                                 : "listening on http://127.0.0.1:";
            const qsizetype at = stderr_.indexOf(marker);
            if (at >= 0 && stderr_.indexOf('\n', at) > at) {
                port_ = stderr_.mid(at + marker.size()).split('\n').front().trimmed().toInt();
                return true;
            }
        }
        *error = "the server did not report its port: " + stderr_;
        return false;
    }

    // SIGTERM; true when it stopped cleanly (exit 0, "stopped" said).
    bool stop(QByteArray* error) {
        if (!process_) return true;
        process_->terminate();
        const bool stopped = process_->waitForFinished(20000);
        if (!stopped) process_->kill();
        process_->waitForFinished(5000);
        stderr_ += process_->readAllStandardError();
        const bool ok = stopped && process_->exitStatus() == QProcess::NormalExit && process_->exitCode() == 0 &&
                        stderr_.contains("kvscope serve: stopped");
        if (!ok) *error = "the server did not stop cleanly: " + stderr_;
        process_.reset();
        return ok;
    }

    int port() const { return port_; }
    qint64 pid() const { return process_ ? process_->processId() : 0; }
    QByteArray stderr_text() { return process_ ? stderr_ += process_->readAllStandardError() : stderr_; }

private:
    std::unique_ptr<QProcess> process_;
    QByteArray stderr_;
    int port_ = 0;
};

}  // namespace kvscope::test
