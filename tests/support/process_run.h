// One child process run to its end, for the suites that run executables (kvscope-cli, cpack, dpkg-deb):
// its exit code (-1 when it crashed or ran out of time, with the reason in err), stdout and stderr.
#pragma once

#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace kvscope::test {

struct ProcessResult {
    int code = -1;
    QString out, err;
};

inline ProcessResult run_process(const QString& program, const QStringList& args, const QProcessEnvironment& env,
                                 int timeout_s) {
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(program, args);
    if (!p.waitForStarted()) return {-1, {}, program + ": cannot start: " + p.errorString()};
    if (!p.waitForFinished(timeout_s * 1000)) {
        p.kill();
        p.waitForFinished();
        return {-1, QString::fromUtf8(p.readAllStandardOutput()),
                program + " " + args.join(' ') + ": no result in " + QString::number(timeout_s) + " s"};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace kvscope::test
