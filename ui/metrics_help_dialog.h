// MetricsHelpDialog: the metric definitions (docs/DESIGN.md section 3), one click away (F1).
#pragma once

#include <QDialog>

namespace kvscope::ui {

class MetricsHelpDialog : public QDialog {
    Q_OBJECT
public:
    explicit MetricsHelpDialog(QWidget* parent = nullptr);
};

}  // namespace kvscope::ui
