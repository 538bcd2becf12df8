// Both themes meet WCAG AA text contrast (4.5:1) for every text role on the backgrounds the widgets
// draw it on (issue 17): labels, text boxes, buttons, tooltips, selections, the secondary text of the
// block map and the engine panel (PlaceholderText), error text, and the charts' labels. Also: toggling
// the theme and back restores the first palette (no text left dark on dark).
#include "theme.h"

#include <QApplication>
#include <QPalette>
#include <QtTest>

#include <cmath>

using namespace kvscope::ui;

namespace {

double luminance(const QColor& c) {
    auto channel = [](double v) { return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF());
}

double contrastRatio(const QColor& a, const QColor& b) {
    const double la = luminance(a), lb = luminance(b);
    return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

}  // namespace

class TestThemeContrast : public QObject {
    Q_OBJECT
private slots:
    void contrast_data() {
        QTest::addColumn<bool>("dark");
        QTest::newRow("dark") << true;
        QTest::newRow("light") << false;
    }
    void contrast() {
        QFETCH(bool, dark);
        Theme::apply(dark);
        const QPalette p = QApplication::palette();
        using R = QPalette::ColorRole;
        const std::pair<R, R> pairs[] = {
            {R::WindowText, R::Window},      {R::Text, R::Base},           {R::Text, R::AlternateBase},
            {R::ButtonText, R::Button},      {R::ToolTipText, R::ToolTipBase}, {R::HighlightedText, R::Highlight},
            {R::PlaceholderText, R::Base},   {R::PlaceholderText, R::Window},  {R::Link, R::Base},
        };
        const QMetaEnum roles = QMetaEnum::fromType<QPalette::ColorRole>();
        for (auto [fg, bg] : pairs) {
            const double ratio = contrastRatio(p.color(QPalette::Active, fg), p.color(QPalette::Active, bg));
            QVERIFY2(ratio >= 4.5, qPrintable(QString("%1 on %2: %3:1").arg(roles.valueToKey(fg), roles.valueToKey(bg))
                                                  .arg(ratio, 0, 'f', 2)));
        }
        for (R bg : {R::Window, R::Base}) {
            const double ratio = contrastRatio(Theme::errorText(), p.color(bg));
            QVERIFY2(ratio >= 4.5, qPrintable(QString("error text on %1: %2:1").arg(roles.valueToKey(bg)).arg(ratio)));
        }
        QVERIFY2(contrastRatio(Theme::chartForeground(), Theme::chartBackground()) >= 4.5, "chart labels");
    }

    // The other theme and back: the same palette as the first time.
    void toggleRestores() {
        Theme::apply(true);
        const QPalette first = QApplication::palette();
        Theme::apply(false);
        QVERIFY(QApplication::palette().color(QPalette::Window) != first.color(QPalette::Window));
        Theme::apply(true);
        for (int role = 0; role < QPalette::NColorRoles; ++role)
            QCOMPARE(QApplication::palette().color(QPalette::ColorRole(role)), first.color(QPalette::ColorRole(role)));
    }
};

QTEST_MAIN(TestThemeContrast)
#include "test_theme_contrast.moc"
