// kvscope: the GUI. Parses the command line (DESIGN.md section 4) and opens the main window.
#include "main_window.h"

#include <QApplication>
#include <QCommandLineParser>

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setApplicationName("kvscope");
    QApplication::setOrganizationName("kvscope");
    QApplication::setApplicationVersion("0.1.0");

    QCommandLineParser parser;
    parser.setApplicationDescription("Desktop workbench for paged-KV, continuous-batching LLM inference");
    parser.addHelpOption();
    parser.addVersionOption();
    QCommandLineOption model_option("model", "Model: HF directory, .gguf file or dummy:PRESET.", "M", "dummy:tiny");
    parser.addOption(model_option);
    parser.process(app);

    kvscope::ui::MainWindow window;
    window.show();
    return app.exec();
}
