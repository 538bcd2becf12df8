#include "main_window.h"

#include <QIcon>
#include <QLabel>

namespace kvscope::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle("kvscope");
    setWindowIcon(QIcon(":/icons/kvscope.svg"));
    setCentralWidget(new QLabel("kvscope", this));
    resize(1280, 800);
}

}  // namespace kvscope::ui
