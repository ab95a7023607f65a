// groups_plot.cpp: plot_groups (groups_plot.h).
#include "landmark/groups_plot.h"

#include <cmath>

#include "landmark/attention.h"
#include "plot/plot.h"

namespace lm {

std::vector<int> plot_groups(const std::vector<int32_t>& kind, const std::string& png_path, const std::string& title) {
  const int T = static_cast<int>(kind.size());
  LM_CHECK(T > 0 && T <= 512, "plot_groups: window length must be in 1..512, got " << T);
  std::vector<int32_t> G = paper_groups(kind);
  // Block index of each landmark position, to name "block g" groups in order.
  std::vector<int> block_of_landmark(T + 1, -1);
  int blocks = 0;
  for (int j = 0; j < T; ++j)
    if (kind[j] == kLandmark || kind[j] == kControlledLandmark) block_of_landmark[j] = blocks++;
  block_of_landmark[T] = blocks;  // the open tail block
  std::vector<int> cat(static_cast<size_t>(T) * T, -1);
  std::vector<double> values(static_cast<size_t>(T) * T, NAN);
  int max_block = -1;
  for (int i = 0; i < T; ++i) {
    // The query's own group id: its block's landmark position (T for the open tail).
    int top = T;
    for (int j = i; j < T; ++j)
      if (kind[j] == kLandmark || kind[j] == kControlledLandmark) {
        top = j;
        break;
      }
    for (int j = 0; j <= i; ++j) {
      const int32_t g = G[static_cast<size_t>(i) * T + j];
      int c;
      if (kind[i] == kContextMiss)
        c = 2;
      else if (g == -1)
        c = 3;
      else if (g == -2)
        c = 4;
      else if (kind[j] == kContextMiss)
        c = 2;
      else if (g == top)
        c = (kind[j] == kRegular) ? 0 : 1;
      else {
        c = 5 + block_of_landmark[g];
        max_block = std::max(max_block, block_of_landmark[g]);
      }
      cat[static_cast<size_t>(i) * T + j] = c;
      values[static_cast<size_t>(i) * T + j] = c;
    }
  }
  plot::HeatmapOptions o;
  o.title = title;
  o.x_label = "key position j";
  o.y_label = "query position i";
  o.categorical = true;
  o.category_names = {{0, "top group: own block"},
                      {1, "top group: landmark (gate)"},
                      {2, "top group: CMT"},
                      {3, "ignored: own landmark"},
                      {4, "CMT-controlled landmarks"}};
  for (int b = 0; b <= max_block; ++b) o.category_names[5 + b] = "block " + std::to_string(b) + " (own softmax)";
  for (int j = 0; j < T; ++j)
    if (kind[j] == kLandmark || kind[j] == kControlledLandmark) o.marked_columns.push_back(j);
  o.cell_size = T <= 32 ? 22 : 8;
  plot::heatmap(png_path, T, T, values, o);
  return cat;
}

}  // namespace lm
