#include "tuning_panel.h"

#include "theme.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>

#include <cmath>

namespace kvscope::ui {

TuningPanel::TuningPanel(QWidget* parent) : QWidget(parent), m_debounce(this) {
    m_debounce.setSingleShot(true);
    m_debounce.setInterval(200);
    connect(&m_debounce, &QTimer::timeout, this, [this] { emit configEdited(config()); });

    m_blockSize = new QSlider(Qt::Horizontal, this);
    m_blockSize->setRange(0, 8);
    m_blockSize->setPageStep(1);
    m_blockSize->setTickPosition(QSlider::TicksBelow);
    m_blockSizeLabel = new QLabel(this);
    m_blockSizeLabel->setMinimumWidth(32);
    const QString blockTip =
        tr("<b>block_size</b>: tokens per KV block (vLLM --block-size, TensorRT-LLM tokens_per_block). Smaller blocks "
           "waste less of the last block but make longer block tables; larger blocks fragment more. Changing it "
           "drains and rebuilds the pool: running requests are preempted and recomputed.");
    m_blockSize->setToolTip(blockTip);
    m_blockSizeLabel->setToolTip(blockTip);
    connect(m_blockSize, &QSlider::valueChanged, this, [this](int v) {
        m_blockSizeLabel->setText(QString::number(1 << v));
        edited();
    });
    auto* blockRow = new QHBoxLayout;
    blockRow->addWidget(m_blockSize, 1);
    blockRow->addWidget(m_blockSizeLabel);

    m_maxSeqsSlider = new QSlider(Qt::Horizontal, this);
    m_maxSeqsSlider->setRange(1, 256);
    m_maxSeqs = new QSpinBox(this);
    m_maxSeqs->setRange(kMaxNumSeqsRange.first, kMaxNumSeqsRange.second);
    const QString seqTip = tr("<b>max_num_seqs</b>: requests running at once at most (vLLM --max-num-seqs, TensorRT-LLM "
                              "max_batch_size). Applies at the next step; lowering it preempts the latest admitted.");
    m_maxSeqs->setToolTip(seqTip);
    m_maxSeqsSlider->setToolTip(seqTip);
    connect(m_maxSeqsSlider, &QSlider::valueChanged, m_maxSeqs, &QSpinBox::setValue);
    connect(m_maxSeqs, &QSpinBox::valueChanged, this, [this](int v) {
        QSignalBlocker b(m_maxSeqsSlider);
        m_maxSeqsSlider->setValue(v);
        edited();
    });
    auto* seqRow = new QHBoxLayout;
    seqRow->addWidget(m_maxSeqsSlider, 1);
    seqRow->addWidget(m_maxSeqs);

    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setRange(kMaxNumBatchedTokensRange.first, kMaxNumBatchedTokensRange.second);
    m_maxTokens->setSingleStep(64);
    m_maxTokens->setToolTip(tr("<b>max_num_batched_tokens</b>: token budget of one step, prefill chunks plus decodes "
                               "(vLLM --max-num-batched-tokens, TensorRT-LLM max_num_tokens). Long prompts are "
                               "prefilled in chunks that fit the budget."));
    connect(m_maxTokens, &QSpinBox::valueChanged, this, [this] { edited(); });

    m_policy = new QComboBox(this);
    m_policy->addItems({"fcfs", "priority"});
    m_policy->setToolTip(tr("<b>policy</b>: who is scheduled first and who is preempted (vLLM --scheduling-policy; "
                            "TensorRT-LLM CapacitySchedulerPolicy). fcfs: arrival order, the last admitted is preempted. "
                            "priority: lower value first, the lowest priority then latest arrival is preempted."));
    connect(m_policy, &QComboBox::currentIndexChanged, this, [this] { edited(); });

    m_prefixCaching = new QCheckBox(tr("enable"), this);
    m_prefixCaching->setToolTip(tr("<b>enable_prefix_caching</b>: reuse full KV blocks whose chained token hash matches "
                                   "(vLLM --enable-prefix-caching, TensorRT-LLM enable_block_reuse). Changing it "
                                   "rebuilds the pool."));
    connect(m_prefixCaching, &QCheckBox::toggled, this, [this] { edited(); });

    m_mode = new QComboBox(this);
    m_mode->addItems({"paged", "naive"});
    m_mode->setToolTip(tr("<b>mode</b>: paged = paged KV cache + continuous batching (vLLM, TensorRT-LLM inflight "
                          "batching). naive = static batches, each request reserves max_model_len contiguous slots and "
                          "the batch runs until its longest request ends (the baseline). Changing it rebuilds the pool."));
    connect(m_mode, &QComboBox::currentIndexChanged, this, [this] { edited(); });

    m_kvMiB = new QSpinBox(this);
    m_kvMiB->setRange(kKvCacheMiBRange.first, kKvCacheMiBRange.second);
    m_kvMiB->setSuffix(" MiB");
    // 0: the engine sizes it (on a simulated GPU, its memory less weights and activations: vLLM's rule).
    m_kvMiB->setSpecialValueText(tr("engine default"));
    m_kvMiB->setToolTip(tr("<b>KV cache memory</b>: bytes of the KV pool; num_blocks = budget / bytes_per_block (vLLM "
                           "--kv-cache-memory / gpu_memory_utilization, TensorRT-LLM max_tokens_in_paged_kv_cache / "
                           "free_gpu_memory_fraction). Changing it rebuilds the pool."));
    connect(m_kvMiB, &QSpinBox::valueChanged, this, [this] { edited(); });

    m_kvDtype = new QComboBox(this);
    for (const char* name : kKvCacheDtypes) m_kvDtype->addItem(QString::fromLatin1(name));
    m_kvDtype->setToolTip(tr("<b>kv_cache_dtype</b>: the type of every cached K and V value (vLLM --kv-cache-dtype, "
                             "llama.cpp --cache-type-k/-v). auto follows the weights: F32 weights keep float32, F16/BF16 "
                             "weights their own type, quantized weights float16. A half type holds twice the tokens in "
                             "the same memory and halves what decode attention reads. Changing it rebuilds the pool."));
    connect(m_kvDtype, &QComboBox::currentIndexChanged, this, [this] { edited(); });

    m_simSpeed = new QComboBox(this);
    m_simSpeed->setObjectName("simSpeed");
    m_simSpeed->addItem(tr("1x (real time)"), 1.0);
    m_simSpeed->addItem(tr("10x"), 10.0);
    m_simSpeed->addItem(tr("100x"), 100.0);
    m_simSpeed->addItem(tr("as fast as possible"), 0.0);
    m_simSpeed->setToolTip(tr("<b>Simulation speed</b>: simulated seconds per wall second (kvscope-cli --sim-speed). "
                              "The engine clock advances by each step's predicted time; at 1x a simulated second "
                              "takes a second. Changes no figure, only how fast you watch them."));
    connect(m_simSpeed, &QComboBox::currentIndexChanged, this, [this] { edited(); });
    m_simSpeedLabel = new QLabel(tr("Simulation speed"), this);

    m_status = new QLabel(this);
    m_status->setWordWrap(true);
    // A palette role, not a style sheet: it follows a theme change.
    m_status->setForegroundRole(QPalette::PlaceholderText);

    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(0, 0, 0, 0);
    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->addRow(tr("block_size"), blockRow);
    form->addRow(tr("max_num_seqs"), seqRow);
    form->addRow(tr("max_num_batched_tokens"), m_maxTokens);
    form->addRow(tr("policy"), m_policy);
    form->addRow(tr("prefix caching"), m_prefixCaching);
    form->addRow(tr("mode"), m_mode);
    form->addRow(tr("KV cache memory"), m_kvMiB);
    form->addRow(tr("KV cache dtype"), m_kvDtype);
    form->addRow(m_simSpeedLabel, m_simSpeed);  // shown for a simulated backend only (setConfig)
    outer->addLayout(form);
    outer->addWidget(m_status);
    setConfig(m_base);
}

EngineConfig TuningPanel::config() const {
    EngineConfig c = m_base;
    c.block_size = 1 << m_blockSize->value();
    c.scheduler.max_num_seqs = m_maxSeqs->value();
    c.scheduler.max_num_batched_tokens = m_maxTokens->value();
    c.scheduler.policy = m_policy->currentIndex() == 1 ? SchedulerPolicy::PRIORITY : SchedulerPolicy::FCFS;
    c.scheduler.enable_prefix_caching = m_prefixCaching->isChecked();
    c.mode = m_mode->currentIndex() == 1 ? BatchingMode::NAIVE : BatchingMode::PAGED;
    c.kv_cache_dtype = m_kvDtype->currentText().toStdString();
    if (c.backend == BackendKind::SIM) c.sim_pace = m_simSpeed->currentData().toDouble();
    const int64_t bytes = int64_t(m_kvMiB->value()) << 20;
    if (m_base.kv_cache_memory != 0 || bytes != 0) c.kv_cache_memory = bytes;
    return c;
}

void TuningPanel::setConfig(const EngineConfig& c) {
    m_base = c;
    m_debounce.stop();
    const QSignalBlocker b1(m_blockSize), b2(m_maxSeqs), b3(m_maxTokens), b4(m_policy), b5(m_prefixCaching),
        b6(m_mode), b7(m_kvMiB), b8(m_maxSeqsSlider), b9(m_kvDtype), b10(m_simSpeed);
    m_blockSize->setValue(int(std::lround(std::log2(std::max(1, c.block_size)))));
    m_blockSizeLabel->setText(QString::number(c.block_size));
    m_maxSeqs->setValue(c.scheduler.max_num_seqs);
    m_maxSeqsSlider->setValue(c.scheduler.max_num_seqs);
    m_maxTokens->setValue(c.scheduler.max_num_batched_tokens);
    m_policy->setCurrentIndex(c.scheduler.policy == SchedulerPolicy::PRIORITY ? 1 : 0);
    m_prefixCaching->setChecked(c.scheduler.enable_prefix_caching);
    m_mode->setCurrentIndex(c.mode == BatchingMode::NAIVE ? 1 : 0);
    m_kvDtype->setCurrentText(QString::fromStdString(c.kv_cache_dtype));
    m_kvMiB->setValue(c.kv_cache_memory == 0 ? 0 : int(std::max<int64_t>(1, c.kv_cache_memory >> 20)));
    const bool simulated = c.backend == BackendKind::SIM;
    m_simSpeedLabel->setVisible(simulated);
    m_simSpeed->setVisible(simulated);
    setSimSpeed(c.sim_pace);  // signals blocked above
    m_status->setPalette(QPalette());  // inherits the theme's again
    m_status->setForegroundRole(QPalette::PlaceholderText);
    m_status->setText(tr("Applied. max_model_len %1. Changes apply at the next step.").arg(c.scheduler.max_model_len));
}

void TuningPanel::showRefusal(const QString& message) {
    QPalette error;
    error.setColor(QPalette::WindowText, Theme::errorText());
    m_status->setPalette(error);  // only this role is set: the rest still follows the theme
    m_status->setForegroundRole(QPalette::WindowText);
    m_status->setText(tr("Not applied: %1. The knobs are back at the running configuration.").arg(message));
}

void TuningPanel::edited() {
    m_status->setText(tr("Applying..."));
    m_debounce.start();
}

void TuningPanel::setBlockSize(int blockSize) { m_blockSize->setValue(int(std::lround(std::log2(std::max(1, blockSize))))); }
void TuningPanel::setMaxNumSeqs(int value) { m_maxSeqs->setValue(value); }
void TuningPanel::setMaxNumBatchedTokens(int value) { m_maxTokens->setValue(value); }
void TuningPanel::setPolicy(const QString& policy) { m_policy->setCurrentText(policy); }
void TuningPanel::setPrefixCaching(bool on) { m_prefixCaching->setChecked(on); }
void TuningPanel::setMode(const QString& mode) { m_mode->setCurrentText(mode); }
void TuningPanel::setKvCacheMiB(int mib) { m_kvMiB->setValue(mib); }
void TuningPanel::setKvCacheDtype(const QString& dtype) { m_kvDtype->setCurrentText(dtype); }
void TuningPanel::setSimSpeed(double pace) {
    const int i = m_simSpeed->findData(pace);
    if (i >= 0) {
        m_simSpeed->setCurrentIndex(i);
        return;
    }
    m_simSpeed->addItem(tr("%1x").arg(pace), pace);  // a pace from the command line or a script, as it is
    m_simSpeed->setCurrentIndex(m_simSpeed->count() - 1);
}

}  // namespace kvscope::ui
