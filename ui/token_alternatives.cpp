#include "token_alternatives.h"

#include <cmath>

namespace kvscope::ui {

QString visibleToken(const std::string& bytes) {
    QString out;
    size_t i = 0;
    while (i < bytes.size()) {
        // The longest valid UTF-8 character here, else one byte shown as <0xNN>.
        const unsigned char c = static_cast<unsigned char>(bytes[i]);
        const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        QString ch;
        if (len > 0 && i + len <= bytes.size()) {
            ch = QString::fromUtf8(bytes.data() + i, qsizetype(len));
            if (ch.contains(QChar::ReplacementCharacter)) ch.clear();
        }
        if (ch.isEmpty()) {
            out += QString("<0x%1>").arg(QString::number(c, 16).toUpper().rightJustified(2, '0'));
            ++i;
            continue;
        }
        if (ch == " ") ch = QString(QChar(0x2423));
        else if (ch == "\n") ch = QString(QChar(0x21b5));
        else if (ch == "\t") ch = QString(QChar(0x21e5));
        out += ch;
        i += len;
    }
    return out.isEmpty() ? QStringLiteral("(empty)") : out;
}

QString tokenAlternativesToolTip(const TokenLogprobs& l, const Tokenizer& tokenizer) {
    auto percent = [](float logprob) { return QString::number(100.0 * std::exp(double(logprob)), 'f', 1) + "%"; };
    QString html = QString("<b>%1</b> &nbsp;%2 &nbsp;<span style='color:gray'>logprob %3, rank %4</span>")
                       .arg(visibleToken(tokenizer.token_to_bytes(l.token_id)).toHtmlEscaped(), percent(l.logprob))
                       .arg(double(l.logprob), 0, 'f', 3)
                       .arg(l.rank);
    if (l.top.empty()) return html;
    html += "<table cellspacing=0 cellpadding=1>";
    for (const auto& [id, logprob] : l.top) {
        const QString token = visibleToken(tokenizer.token_to_bytes(id)).toHtmlEscaped();
        html += QString("<tr><td>%1</td><td align=right>&nbsp;&nbsp;%2</td></tr>")
                    .arg(id == l.token_id ? "<b>" + token + "</b>" : token, percent(logprob));
    }
    return html + "</table>";
}

}  // namespace kvscope::ui
