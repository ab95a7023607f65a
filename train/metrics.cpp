// metrics.cpp: metrics.jsonl reader and loss-curve plot (metrics.h).
#include "train/metrics.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plot/plot.h"
#include "tensor/check.h"

namespace lm {

MetricsLog read_metrics(const std::string& path) {
  std::ifstream in(path);
  LM_CHECK(in.good(), "metrics: cannot open " << path);
  MetricsLog m;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("parent")) continue;  // the record of an --init-from run's parent
    LM_CHECK(j.is_object() && j.contains("step") && (j.contains("loss") || j.contains("val_loss")),
             "metrics: " << path << " line " << n << " is not a metrics record: " << line.substr(0, 80));
    const double step = j["step"].get<double>();
    if (j.contains("val_loss")) {
      m.val_step.push_back(step);
      m.val_loss.push_back(j["val_loss"].get<double>());
    } else {
      m.step.push_back(step);
      m.loss.push_back(j["loss"].get<double>());
      m.lr.push_back(j.value("lr", NAN));
      m.tokens_per_s.push_back(j.value("tokens_per_s", NAN));
    }
  }
  return m;
}

namespace {
// Exponential moving average with bias correction (so the first points are not pulled to 0).
std::vector<double> smooth(const std::vector<double>& y, double beta) {
  std::vector<double> out(y.size());
  double avg = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    avg = beta * avg + (1 - beta) * y[i];
    out[i] = avg / (1 - std::pow(beta, static_cast<double>(i + 1)));
  }
  return out;
}
}  // namespace

void plot_loss_curves(const std::vector<std::string>& paths, const std::vector<std::string>& labels,
                      const std::string& png_path, const std::string& title, bool log_y,
                      const std::vector<int64_t>& offsets) {
  LM_CHECK(!paths.empty() && paths.size() == labels.size(), "plot_loss_curves: need one label per metrics file");
  LM_CHECK(offsets.empty() || offsets.size() == paths.size(),
           "plot_loss_curves: got " << offsets.size() << " step offsets for " << paths.size() << " metrics files");
  std::vector<plot::Series> series;
  for (size_t i = 0; i < paths.size(); ++i) {
    MetricsLog m = read_metrics(paths[i]);
    LM_CHECK(!m.step.empty(), "plot_loss_curves: " << paths[i] << " has no training steps yet");
    if (!offsets.empty()) {
      for (double& s : m.step) s += static_cast<double>(offsets[i]);
      for (double& s : m.val_step) s += static_cast<double>(offsets[i]);
    }
    const std::string prefix = labels[i].empty() ? "" : labels[i] + ": ";
    plot::Rgb base = plot::palette_color(static_cast<int>(2 * i)),
              val = plot::palette_color(static_cast<int>(2 * i + 1));
    plot::Rgb faint{static_cast<uint8_t>((base.r + 2 * 255) / 3), static_cast<uint8_t>((base.g + 2 * 255) / 3),
                    static_cast<uint8_t>((base.b + 2 * 255) / 3)};
    series.push_back({prefix + "train loss (per step)", m.step, m.loss, faint});
    series.push_back({prefix + "train loss (smoothed)", m.step, smooth(m.loss, 0.95), base});
    if (!m.val_step.empty()) series.push_back({prefix + "validation loss", m.val_step, m.val_loss, val});
  }
  plot::LineChartOptions o;
  o.title = title;
  o.x_label = "step";
  o.y_label = log_y ? "cross-entropy (nats/token, log scale)" : "cross-entropy (nats/token)";
  o.log_y = log_y;
  plot::line_chart(png_path, series, o);
}

NumberTable read_number_table(const std::string& path) {
  std::ifstream in(path);
  LM_CHECK(in.good(), "table: cannot open " << path);
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream s(line);
    while (std::getline(s, cell, '\t')) cells.push_back(cell);
    if (!line.empty() && line.back() == '\t') cells.push_back("");
    return cells;
  };
  NumberTable t;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<std::string> cells = split(line);
    if (t.columns.empty()) {
      LM_CHECK(cells.size() >= 2,
               "table: " << path << " line " << n << ": a header needs at least two columns, got '" << line << "'");
      t.columns = cells;
      continue;
    }
    LM_CHECK(cells.size() == t.columns.size(), "table: " << path << " line " << n << " has " << cells.size()
                                                         << " cells, the header " << t.columns.size());
    std::vector<double> row;
    for (size_t j = 0; j < cells.size(); ++j) {
      if (cells[j] == "-" || cells[j] == "nan" || cells[j].empty()) {
        row.push_back(NAN);
        continue;
      }
      size_t used = 0;
      double v = NAN;
      try {
        v = std::stod(cells[j], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      LM_CHECK(used == cells[j].size(), "table: " << path << " line " << n << ", column '" << t.columns[j] << "': '"
                                                  << cells[j] << "' is not a number");
      row.push_back(v);
    }
    t.rows.push_back(row);
  }
  LM_CHECK(!t.columns.empty(), "table: " << path << " is empty (no header line)");
  return t;
}

void plot_number_table(const std::string& tsv_path, const std::string& png_path, const TableChartOptions& o) {
  const NumberTable t = read_number_table(tsv_path);
  LM_CHECK(!t.rows.empty(), "plot-table: " << tsv_path << " has a header but no rows");
  std::vector<plot::Series> series;
  for (size_t j = 1; j < t.columns.size(); ++j) {
    plot::Series s{t.columns[j], {}, {}, {}};
    for (const auto& row : t.rows) {
      s.x.push_back(row[0]);
      s.y.push_back(row[j]);
    }
    series.push_back(s);
  }
  plot::LineChartOptions lo;
  lo.title = o.title;
  lo.x_label = o.x_label.empty() ? t.columns[0] : o.x_label;
  lo.y_label = o.y_label;
  lo.log_x = o.log_x;
  lo.y_range = o.y_range;
  lo.markers = true;
  plot::line_chart(png_path, series, lo);
}

}  // namespace lm
