// module.h: the base of every layer. A Module owns named parameters (leaf Vars that require
// grad) and named child modules; named_parameters() walks them depth-first and joins names with
// dots ("blocks.0.attn.qkv.weight"). Those names are stable: checkpoints and the PyTorch-parity
// fixtures are keyed by them. Not a graph: forward() signatures differ per layer on purpose.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autograd/var.h"

namespace lm {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;  // parameters are registered by address
  Module& operator=(const Module&) = delete;

  // (name, parameter) pairs in registration order, children after own parameters.
  std::vector<std::pair<std::string, Var*>> named_parameters();
  std::vector<Var*> parameters();
  // Whether AdamW applies weight decay to a parameter (Linear weights only; see Linear).
  bool decays(const Var* param);
  int64_t num_parameters();

  void train(bool on = true);  // dropout and other training-only behaviour
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad();        // drop the accumulated gradient of every parameter
  void to(Device device);  // move every parameter (gradients are dropped)
  void to(DType dtype);    // convert every parameter, e.g. to f64 for reference checks

 protected:
  // Called from constructors with members of the derived class (so they live as long as the
  // Module): `param` becomes a leaf that requires grad, holding `init`.
  void register_parameter(const std::string& name, Var& param, Tensor init, bool weight_decay = false);
  void register_module(const std::string& name, Module& child);

 private:
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Var*>>& out);
  std::vector<std::pair<std::string, Var*>> params_;  // members of the derived class, in order
  std::vector<bool> decay_;                           // parallel to params_
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
};

}  // namespace lm
