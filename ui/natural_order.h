// Natural order of identifiers: runs of digits compare by their value, so bench-1-6 comes before
// bench-1-59 and bench-1-60 (plain string order puts bench-1-59 and bench-1-60 around bench-1-6).
#pragma once

#include <QStringView>

namespace kvscope::ui {

bool naturalLess(QStringView a, QStringView b);

}  // namespace kvscope::ui
