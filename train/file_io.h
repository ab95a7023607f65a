// file_io.h: write_file_atomic, for the callers in train/, infer/ and apps/ that include it from
// here. It is declared in tensor/files.h, beside the checks on paths, because plot's PNG writer
// (below train/ in the layers) writes through it too.
#pragma once

#include "tensor/files.h"
