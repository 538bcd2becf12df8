#include "dtype.h"
