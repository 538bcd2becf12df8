// The main window of the workbench (GUI thread).
#pragma once

#include <QMainWindow>

namespace kvscope::ui {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
};

}  // namespace kvscope::ui
