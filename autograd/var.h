// var.h: reverse-mode autograd. A Var is a Tensor that remembers how it was made: the Node
// behind it holds the value, the inputs (parents) and a backward function mapping the output's
// gradient to the inputs' gradients. backward() orders the graph topologically with an explicit
// stack (no recursion, so a 100k-op chain is fine) and walks it in reverse. Gradients of leaves
// accumulate across backward() calls until zero_grad(). The ops themselves: autograd/functions.h.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lm {

// Maps the gradient of a node's output to one gradient per parent (undefined = none needed).
// It must capture Tensors only, never Vars, so graphs cannot form reference cycles.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;

struct Node {
  Tensor value;
  Tensor grad;  // leaves only; undefined until the first backward()
  bool requires_grad = false;
  std::string op;                              // "leaf", "add", "matmul", ... (for errors and docs)
  std::vector<std::shared_ptr<Node>> parents;  // inputs that require grad, in argument order
  std::vector<int> parent_slot;                // which BackwardFn output belongs to each parent
  BackwardFn backward;

  bool is_leaf() const { return !backward; }
  ~Node();  // releases long parent chains iteratively (a recursive release would overflow)
};

class Var {
 public:
  Var() = default;
  explicit Var(Tensor value, bool requires_grad = false);

  bool defined() const { return node_ != nullptr; }
  const Tensor& value() const;
  Tensor& value();
  const Tensor& grad() const;  // undefined when no gradient has reached this leaf yet
  bool requires_grad() const { return node_ && node_->requires_grad; }
  bool is_leaf() const { return node_ && node_->is_leaf(); }
  const std::string& op() const;

  // Convenience pass-throughs to the value.
  const Shape& shape() const { return value().shape(); }
  int64_t dim() const { return value().dim(); }
  int64_t size(int64_t d) const { return value().size(d); }
  int64_t numel() const { return value().numel(); }
  DType dtype() const { return value().dtype(); }
  Device device() const { return value().device(); }
  double item() const { return value().item(); }

  // Backpropagate from this Var. The first form needs a single-element Var (seed gradient 1);
  // the second takes dL/d(this) with this Var's shape.
  void backward() const;
  void backward(const Tensor& grad_out) const;
  void zero_grad();                 // drop the accumulated gradient of this leaf
  void set_grad(Tensor g);          // replace it (optimizers' clipping); shape must match
  Var detach() const;               // same value, cut from the graph, requires_grad false
  void set_requires_grad(bool on);  // leaves only

  const std::shared_ptr<Node>& node() const { return node_; }

 private:
  std::shared_ptr<Node> node_;
  friend Var make_op_result(const char*, Tensor, const std::vector<Var>&, BackwardFn);
};

// Record an op: `inputs` are the Vars it read; `fn` returns one gradient per input (in the same
// order; undefined Tensors for inputs that need none). If grad mode is off or no input requires
// grad, the result is a plain Var and `fn` is dropped.
Var make_op_result(const char* op, Tensor value, const std::vector<Var>& inputs, BackwardFn fn);

// Per-op time totals, for finding where a training step spends its time (bench_train prints them).
// While profiling is on, each op is charged forward the time from the previous op's record to its
// own (make_op_result runs right after an op computed its value, and a model's forward is ops back
// to back, so this is the op's own time plus the little glue between ops), and backward the time
// of its backward function plus the gradient sums it causes. Leaves' gradient accumulation is
// charged to "leaf". Meant for one thread driving the graph (the ops' own threads are fine). On
// CUDA each record waits for the device first, so the GPU's time lands on the op that queued it
// (and the step runs without overlap between host and device while profiling).
struct OpTotals {
  std::string op;
  int64_t calls = 0;
  double forward_s = 0, backward_s = 0;
};
void set_op_profiling(bool on);      // turning it on starts a fresh profile
std::vector<OpTotals> op_profile();  // the totals so far, largest forward + backward first

// Grad mode: while a NoGradGuard lives (on this thread), ops record nothing.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace lm
