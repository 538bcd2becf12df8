#include "model_picker_dialog.h"

#include "model_discovery.h"

#include "model/model.h"
#include "sim/gpu_specs.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QThread>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>

namespace kvscope::ui {

ModelPickerDialog::ModelPickerDialog(const QString& currentSpec, const EngineConfig& c, QWidget* parent)
    : QDialog(parent), m_base(c) {
    setWindowTitle(tr("Load model"));
    resize(640, 480);
    m_list = new QListWidget(this);
    m_list->setObjectName("modelList");
    m_list->setAlternatingRowColors(true);
    m_spec = new QLineEdit(currentSpec, this);
    m_spec->setObjectName("modelSpec");
    m_spec->setPlaceholderText(tr("dummy:tiny, /path/model.gguf or a Hugging Face directory"));
    connect(m_list, &QListWidget::currentItemChanged, this, [this](QListWidgetItem* item) {
        if (item && !item->data(Qt::UserRole).toString().isEmpty()) m_spec->setText(item->data(Qt::UserRole).toString());
    });
    connect(m_list, &QListWidget::itemDoubleClicked, this, &QDialog::accept);
    auto* openGguf = new QPushButton(tr("Open GGUF file..."), this);
    connect(openGguf, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Open GGUF model"), {}, tr("GGUF models (*.gguf)"));
        if (!f.isEmpty()) m_spec->setText(f);
    });
    auto* openDir = new QPushButton(tr("Open Hugging Face directory..."), this);
    connect(openDir, &QPushButton::clicked, this, [this] {
        const QString d = QFileDialog::getExistingDirectory(this, tr("Hugging Face model directory (config.json, *.safetensors, tokenizer.json)"));
        if (!d.isEmpty()) m_spec->setText(d);
    });
    auto* openRow = new QHBoxLayout;
    openRow->addWidget(openGguf);
    openRow->addWidget(openDir);
    openRow->addStretch();

    m_maxModelLen = new QSpinBox(this);
    m_maxModelLen->setObjectName("maxModelLen");
    m_maxModelLen->setRange(0, 1 << 20);
    m_maxModelLen->setValue(c.scheduler.max_model_len);
    m_maxModelLen->setToolTip(tr("max_model_len: prompt + output tokens of one request at most (vLLM --max-model-len, "
                                 "TensorRT-LLM max_seq_len). Fixed for the engine's lifetime."));
    m_kvMiB = new QSpinBox(this);
    m_kvMiB->setRange(0, 1 << 20);
    m_kvMiB->setSuffix(" MiB");
    // A budget right for one model is not for the next: sized to the chosen model unless one is typed.
    m_kvMiB->setSpecialValueText(tr("sized to the model"));
    m_kvMiB->setValue(0);
    m_kvMiB->setToolTip(tr("KV cache budget (vLLM --kv-cache-memory, TensorRT-LLM max_tokens_in_paged_kv_cache)"));
    m_threads = new QSpinBox(this);
    m_threads->setRange(0, 256);
    m_threads->setSpecialValueText(tr("all cores (%1)").arg(QThread::idealThreadCount()));
    m_threads->setValue(c.num_threads);
    m_threads->setToolTip(tr("CPU threads of the backend (llama.cpp --threads)"));
    m_backend = new QComboBox(this);
    m_backend->addItem(tr("This machine (CUDA when the build and the machine have it, else CPU)"), QString("auto"));
    m_backend->addItem(tr("CPU"), QString("cpu"));
    // A simulated GPU runs the real scheduler and KV cache with predicted step times and no weights.
    for (const GpuSpec& g : gpu_specs())
        m_backend->addItem(tr("Simulated %1").arg(QString::fromStdString(g.display_name)),
                           QString::fromStdString("sim:" + g.name));
    const int current = m_backend->findData(QString::fromStdString(backend_name(c)));
    m_backend->setCurrentIndex(std::max(0, current));
    m_backend->setToolTip(tr("--backend: a simulated accelerator shows what the engine would do on that GPU "
                             "(step times from a roofline model); every view then says \"simulated\""));
    m_tensorParallel = new QSpinBox(this);
    m_tensorParallel->setRange(1, 64);
    m_tensorParallel->setValue(c.tensor_parallel_size);
    m_tensorParallel->setToolTip(tr("--tensor-parallel-size: GPUs the model is sharded over (simulated backends only)"));
    auto syncBackend = [this] {
        const bool sim = m_backend->currentData().toString().startsWith("sim:");
        m_tensorParallel->setEnabled(sim);
        if (!sim) m_tensorParallel->setValue(1);
        m_threads->setEnabled(!sim);
    };
    connect(m_backend, &QComboBox::currentIndexChanged, this, syncBackend);
    syncBackend();
    auto* form = new QFormLayout;
    form->addRow(tr("Model"), m_spec);
    form->addRow(tr("max_model_len"), m_maxModelLen);
    form->addRow(tr("KV cache memory"), m_kvMiB);
    form->addRow(tr("Backend"), m_backend);
    form->addRow(tr("Tensor parallel"), m_tensorParallel);
    form->addRow(tr("CPU threads"), m_threads);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Load"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(new QLabel(tr("Presets and models found on this machine:"), this));
    layout->addWidget(m_list, 1);
    layout->addLayout(openRow);
    layout->addLayout(form);
    layout->addWidget(buttons);
    populate(currentSpec);
    m_contextTimer = new QTimer(this);
    m_contextTimer->setSingleShot(true);
    m_contextTimer->setInterval(250);
    connect(m_contextTimer, &QTimer::timeout, this, &ModelPickerDialog::showModelContext);
    connect(m_spec, &QLineEdit::textChanged, m_contextTimer, qOverload<>(&QTimer::start));
    showModelContext();
}

// "0" loads the chosen model with its own context, at most 8192: the field says what that is for the
// model chosen now (it said "up to 8192" whatever the file).
void ModelPickerDialog::showModelContext() {
    try {
        const int context = load_model_config(spec().toStdString()).max_position_embeddings;
        const int applied = default_max_model_len(context);
        m_maxModelLen->setSpecialValueText(applied == context ? tr("model's: %1").arg(context)
                                                              : tr("%1 (the model's %2 is longer)").arg(applied).arg(context));
    } catch (const std::exception&) {  // nothing that names a model yet: the load will say why
        m_maxModelLen->setSpecialValueText(tr("model's (up to 8192)"));
    }
}

void ModelPickerDialog::populate(const QString& currentSpec) {
    auto header = [this](const QString& text, int row = -1) {
        auto* item = new QListWidgetItem(text);
        item->setFlags(Qt::NoItemFlags);
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
        m_list->insertItem(row < 0 ? m_list->count() : row, item);
    };
    header(tr("Dummy presets (seeded random weights, real shapes, no download)"));
    for (const QString& p : dummyPresets()) {
        auto* item = new QListWidgetItem("    " + p, m_list);
        item->setData(Qt::UserRole, p);
    }
    const auto found = discoverModels();
    header(found.isEmpty() ? tr("No models found in %1").arg(defaultModelRoots().join(", "))
                           : tr("Found on this machine"));
    for (const DiscoveredModel& m : found) {
        auto* item = new QListWidgetItem(QString("    %1  (%2, %3, %4 MiB)")
                                             .arg(m.name, m.source, m.format)
                                             .arg(double(m.bytes) / (1 << 20), 0, 'f', 0),
                                         m_list);
        item->setData(Qt::UserRole, m.spec);
        item->setToolTip(m.spec);
    }
    // The loaded model is the choice until another is made: with no row current, the list took its
    // first preset (dummy:tiny) the moment it had focus. A model that is neither a preset nor found
    // here (a path from the command line) is listed first, on its own.
    for (int i = 0; i < m_list->count(); ++i)
        if (!currentSpec.isEmpty() && m_list->item(i)->data(Qt::UserRole).toString() == currentSpec) {
            m_list->setCurrentRow(i);
            return;
        }
    if (currentSpec.isEmpty()) return;
    auto* current = new QListWidgetItem("    " + currentSpec);
    current->setData(Qt::UserRole, currentSpec);
    current->setToolTip(currentSpec);
    m_list->insertItem(0, current);
    header(tr("Loaded now"), 0);
    m_list->setCurrentRow(1);
}

QString ModelPickerDialog::spec() const { return m_spec->text().trimmed(); }

EngineConfig ModelPickerDialog::config() const {
    EngineConfig c = m_base;
    c.scheduler.max_model_len = m_maxModelLen->value();
    c.kv_cache_memory = int64_t(m_kvMiB->value()) << 20;
    c.num_threads = m_threads->value();
    parse_backend(m_backend->currentData().toString().toStdString(), c);  // names from the list: they parse
    c.tensor_parallel_size = m_tensorParallel->value();
    if (c.backend == BackendKind::SIM && m_base.backend != BackendKind::SIM) c.sim_pace = 1;  // watchable at first
    return c;
}

}  // namespace kvscope::ui
