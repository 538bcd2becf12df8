#include "metrics_help_dialog.h"

#include "latency_summary.h"

#include <QDialogButtonBox>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace kvscope::ui {

MetricsHelpDialog::MetricsHelpDialog(QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Metric definitions"));
    resize(640, 520);
    QString html = tr("<h3>Metric definitions</h3><p>Timestamps are monotonic seconds since the engine started. "
                      "Names follow <code>vllm bench serve</code>, so exports can be compared with vLLM runs.</p><table cellspacing=6>");
    const QJsonObject defs = metricDefinitions();
    for (auto it = defs.begin(); it != defs.end(); ++it)
        html += QString("<tr><td valign=top><b><code>%1</code></b></td><td>%2</td></tr>").arg(it.key(), it.value().toString().toHtmlEscaped());
    html += "</table><p>" +
            tr("Summaries give mean, median, std and p50/p90/p99. Throughputs divide by the run's duration (first arrival "
               "to last finish). The block map shows every physical KV block; the charts show one point per engine step.") +
            "</p>";
    auto* text = new QTextBrowser(this);
    text->setHtml(html);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(text);
    layout->addWidget(buttons);
}

}  // namespace kvscope::ui
