// trainer_schedule.cpp: the learning-rate schedule of a run (trainer.h): the rate at a schedule
// position, and where the schedule stands by steps or, under --time-limit, by the clock
// (schedule_position, ScheduleClock, RunClock). Not the formulas of one-cycle and cosine
// (nn/optim.h), nor the loop that asks for the rate (trainer.cpp).
#include <algorithm>
#include <cmath>

#include "nn/optim.h"
#include "tensor/check.h"
#include "train/trainer.h"
#include "train/trainer_internal.h"

namespace lm {

int64_t schedule_position(int64_t step, int64_t total, double elapsed_s, double limit_s) {
  LM_CHECK(total > 0 && step >= 0, "schedule_position: step " << step << " of " << total);
  int64_t s = step;
  if (limit_s > 0) {
    const double by_time = std::floor(std::max(0.0, elapsed_s) / limit_s * static_cast<double>(total));
    s = std::max(s, static_cast<int64_t>(std::min(by_time, static_cast<double>(total))));
  }
  return std::min(s, total - 1);
}

int64_t ScheduleClock::position(int64_t step, int64_t total, double elapsed_s, double limit_s) {
  const int64_t by_clock = schedule_position(step, total, elapsed_s, limit_s);
  const int64_t margin = std::max<int64_t>(1, total / 50);
  if (by_clock - step >= margin) following = true;
  return following ? by_clock : std::min(step, total - 1);
}

namespace trainer_internal {

// The learning rate at schedule position s (schedule_position: steps, or the clock when a time
// limit is set and the clock is further along).
double scheduled_lr(const TrainOptions& o, int64_t s) {
  if (o.schedule == "constant") return o.lr;
  if (o.schedule == "cosine") return lr_warmup_cosine(s, o.steps, o.lr, o.warmup, o.min_lr);
  return lr_one_cycle(s, o.steps, o.lr);
}

int64_t RunClock::position(int64_t step, int64_t steps, double t0, const dist::World& world) {
  double clock_s = t0 - t_start + avg_step;
  follow_root_clock(clock_s, over_limit, world);
  return over_limit ? steps - 1 : schedule.position(step, steps, clock_s, limit_s);
}

}  // namespace trainer_internal
}  // namespace lm
