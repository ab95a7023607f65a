// groups_plot.h: the picture of the grouping in docs/landmark.md: for every query (row) and key
// (column) of a small window, which softmax group the key falls into, as a categorical heat map.
// Made from paper_groups (landmark/reference.cpp) by the project's plotting code (plot/).
#pragma once

#include <string>
#include <vector>

namespace lm {

// kinds: one row of TokenKind values. Writes the PNG and returns the category of every cell
// (row-major; -1 for masked future cells): 0 own-block token (top group), 1 landmark of an
// earlier block (top group, the gate), 2 the context-miss token (top group), 3 ignored (the
// query's own landmark), 4 CMT-controlled landmark group, 5 + g the regular tokens of block g.
std::vector<int> plot_groups(const std::vector<int32_t>& kinds, const std::string& png_path, const std::string& title);

}  // namespace lm
