// The Load dialog (issue 17, item 10): it opens on the model loaded now, not on the first preset, also
// when that model is a path it did not find itself; and its max_model_len field says what "the model's"
// context is for the model chosen (it said "up to 8192" whatever the file).
#include "engine_controller.h"
#include "model_picker_dialog.h"
#include "test_support.h"

#include <QLineEdit>
#include <QListWidget>
#include <QSpinBox>
#include <QStandardPaths>
#include <QtTest>

using namespace kvscope;
using namespace kvscope::ui;

class TestModelPickerDialog : public QObject {
    Q_OBJECT

    static QString specOf(const ModelPickerDialog& dialog) {
        return dialog.findChild<QListWidget*>("modelList")->currentItem()->data(Qt::UserRole).toString();
    }

private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void opensOnTheLoadedModel_data() {
        QTest::addColumn<QString>("current");
        QTest::addRow("a preset") << "dummy:smollm-135m";
        QTest::addRow("a path it did not find") << QString::fromStdString(kvscope::test::models_dir() + "/stories260K-hf");
    }
    void opensOnTheLoadedModel() {
        QFETCH(QString, current);
        ModelPickerDialog dialog(current, EngineController::defaultConfig());
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));
        auto* list = dialog.findChild<QListWidget*>("modelList");
        list->setFocus();  // focus made an unselected list take its first row
        QApplication::processEvents();
        QCOMPARE(specOf(dialog), current);
        QCOMPARE(dialog.spec(), current);
    }

    void showsTheChosenModelsContext() {
        const QString hf = QString::fromStdString(kvscope::test::models_dir() + "/stories260K-hf");
        ModelPickerDialog dialog(hf, EngineController::defaultConfig());
        auto* maxLen = dialog.findChild<QSpinBox*>("maxModelLen");
        QVERIFY(maxLen);
        QCOMPARE(maxLen->value(), 0);  // the default: the model's
        QCOMPARE(maxLen->specialValueText(), QString("model's: 512"));
        auto* spec = dialog.findChild<QLineEdit*>("modelSpec");
        spec->setText("dummy:tiny");
        QTRY_COMPARE(maxLen->specialValueText(), QString("model's: 2048"));
        spec->setText("dummy:llama-3-8b");  // no weights are made to read its shapes
        QTRY_COMPARE(maxLen->specialValueText(), QString("model's: 8192"));
        spec->setText(QString::fromStdString(kvscope::test::models_dir() + "/stories260K-f32.gguf"));
        QTRY_COMPARE(maxLen->specialValueText(), QString("model's: 512"));
        spec->setText("/no/such/model.gguf");
        QTRY_COMPARE(maxLen->specialValueText(), QString("model's (up to 8192)"));
    }
};

QTEST_MAIN(TestModelPickerDialog)
#include "test_model_picker_dialog.moc"
