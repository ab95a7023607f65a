// var.cpp: Var, graph recording and the backward pass.
#include "autograd/var.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "tensor/ops.h"
#include "tensor/storage.h"

namespace lm {

namespace {
thread_local bool g_grad_enabled = true;
}

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

Node::~Node() {
  // A chain a0 <- a1 <- ... <- a100000 would be destroyed recursively (each Node's destructor
  // releasing its parent's). Instead, steal the parents of every node we are the last owner of
  // and release them from a worklist.
  std::vector<std::shared_ptr<Node>> work = std::move(parents);
  while (!work.empty()) {
    std::shared_ptr<Node> n = std::move(work.back());
    work.pop_back();
    if (n.use_count() == 1) {
      for (auto& p : n->parents) work.push_back(std::move(p));
      n->parents.clear();
    }
  }
}

Var::Var(Tensor value, bool requires_grad) : node_(std::make_shared<Node>()) {
  LM_CHECK(value.defined(), "Var: cannot wrap an undefined tensor");
  LM_CHECK(!requires_grad || is_floating(value.dtype()),
           "Var: only f32/f64 tensors can require grad, got " << describe(value));
  node_->value = std::move(value);
  node_->requires_grad = requires_grad;
  node_->op = "leaf";
}

const Tensor& Var::value() const {
  LM_CHECK(node_, "Var: undefined");
  return node_->value;
}
Tensor& Var::value() {
  LM_CHECK(node_, "Var: undefined");
  return node_->value;
}
const Tensor& Var::grad() const {
  LM_CHECK(node_, "Var: undefined");
  return node_->grad;
}
const std::string& Var::op() const {
  LM_CHECK(node_, "Var: undefined");
  return node_->op;
}

void Var::zero_grad() {
  LM_CHECK(node_, "zero_grad: Var is undefined");
  node_->grad = Tensor();
}

void Var::set_grad(Tensor g) {
  LM_CHECK(node_, "set_grad: Var is undefined");
  LM_CHECK(!g.defined() || (g.shape() == shape() && g.dtype() == dtype() && g.device() == device()),
           "set_grad: gradient " << describe(g) << " does not match " << describe(value()));
  node_->grad = std::move(g);
}

Var Var::detach() const { return Var(value(), false); }

void Var::set_requires_grad(bool on) {
  LM_CHECK(node_ && node_->is_leaf(),
           "set_requires_grad: only leaves can change requires_grad (this Var comes from '" << op() << "')");
  LM_CHECK(!on || is_floating(node_->value.dtype()),
           "set_requires_grad: " << describe(node_->value) << " is not a float tensor");
  node_->requires_grad = on;
}

namespace {
using ProfileClock = std::chrono::steady_clock;
bool g_profiling = false;
ProfileClock::time_point g_last_record;
std::map<std::string, OpTotals>& profile_totals() {
  static std::map<std::string, OpTotals> totals;
  return totals;
}
double seconds_since(ProfileClock::time_point t) {
  return std::chrono::duration<double>(ProfileClock::now() - t).count();
}
// CUDA kernels run after their launch returns: while profiling, wait for the device at each
// timestamp, so an op's time is its kernels' time, not the next synchronising op's.
void profile_sync(const Tensor& t) {
  if (t.defined() && t.device() == Device::CUDA) cuda_synchronize();
}
}  // namespace

void set_op_profiling(bool on) {
  if (on) {
    profile_totals().clear();
    g_last_record = ProfileClock::now();
  }
  g_profiling = on;
}

std::vector<OpTotals> op_profile() {
  std::vector<OpTotals> out;
  for (auto& kv : profile_totals()) out.push_back(kv.second);
  std::sort(out.begin(), out.end(), [](const OpTotals& a, const OpTotals& b) {
    return a.forward_s + a.backward_s > b.forward_s + b.backward_s;
  });
  return out;
}

Var make_op_result(const char* op, Tensor value, const std::vector<Var>& inputs, BackwardFn fn) {
  if (g_profiling) {
    profile_sync(value);
    OpTotals& t = profile_totals()[op];
    t.op = op;
    t.calls += 1;
    t.forward_s += seconds_since(g_last_record);
    g_last_record = ProfileClock::now();
  }
  Var out(std::move(value), false);
  out.node_->op = op;
  if (!g_grad_enabled) return out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].requires_grad()) {
      out.node_->parents.push_back(inputs[i].node());
      out.node_->parent_slot.push_back(static_cast<int>(i));
    }
  }
  if (out.node_->parents.empty()) return out;
  out.node_->requires_grad = true;
  out.node_->backward = std::move(fn);
  return out;
}

void Var::backward() const {
  LM_CHECK(node_, "backward: Var is undefined");
  LM_CHECK(numel() == 1, "backward: called without a gradient on a Var of shape "
                             << shape_str(shape())
                             << "; only single-element outputs (like a loss) get the implicit "
                                "gradient 1. Pass dL/d(output) with that shape instead.");
  Tensor one(shape(), dtype(), device());
  one.fill_(1.0);
  backward(one);
}

namespace {
// True when t is the only tensor using its storage and covers all of it, contiguously.
bool owns_whole_buffer(const Tensor& t) {
  return t.defined() && t.storage().use_count() == 1 && t.offset() == 0 && t.is_contiguous() &&
         static_cast<size_t>(t.numel()) * dtype_size(t.dtype()) == t.storage()->nbytes();
}
}  // namespace

void Var::backward(const Tensor& grad_out) const {
  LM_CHECK(node_, "backward: Var is undefined");
  LM_CHECK(node_->requires_grad, "backward: this Var does not require grad (op '"
                                     << node_->op << "'); no input of the computation had requires_grad = true");
  LM_CHECK(
      grad_out.defined() && grad_out.shape() == shape() && grad_out.dtype() == dtype() && grad_out.device() == device(),
      "backward: gradient " << describe(grad_out) << " does not match the output " << describe(value()));

  // 1. Topological order by an iterative depth-first search (parents before children).
  std::vector<Node*> order;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<Node*, size_t>> stack{{node_.get(), 0}};
  visited.insert(node_.get());
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next < n->parents.size()) {
      Node* p = n->parents[next++].get();
      if (visited.insert(p).second) stack.push_back({p, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }

  // 2. Walk children before parents. A node used twice (b = a + a) must collect the gradient
  // from both uses before it passes anything on; the topological order guarantees that.
  std::unordered_map<Node*, Tensor> pending;
  pending[node_.get()] = grad_out;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    auto found = pending.find(n);
    if (found == pending.end()) continue;  // no gradient flows here (e.g. unused output)
    Tensor g = std::move(found->second);
    pending.erase(found);
    if (g_profiling) profile_sync(g);
    const ProfileClock::time_point started = g_profiling ? ProfileClock::now() : ProfileClock::time_point();
    if (n->is_leaf()) {
      // The first gradient is adopted when nothing else can see its memory (a fresh, whole,
      // contiguous buffer: matmul's weight gradient, for one), else copied, so a later in-place
      // change of the leaf's gradient (clipping, accumulation) can never reach another tensor.
      if (n->grad.defined())
        n->grad = add(n->grad, g);
      else if (owns_whole_buffer(g))
        n->grad = std::move(g);
      else
        n->grad = g.contiguous().clone();
      if (g_profiling) {
        profile_sync(n->grad);
        OpTotals& t = profile_totals()["leaf"];
        t.op = "leaf";
        t.backward_s += seconds_since(started);
      }
      continue;
    }
    std::vector<Tensor> grads = n->backward(g);
    for (size_t k = 0; k < n->parents.size(); ++k) {
      Node* p = n->parents[k].get();
      const int slot = n->parent_slot[k];
      LM_CHECK(slot < static_cast<int>(grads.size()) && grads[slot].defined(),
               "backward of '" << n->op << "' returned no gradient for its input " << slot);
      const Tensor& gp = grads[slot];
      LM_CHECK(gp.shape() == p->value.shape() && gp.dtype() == p->value.dtype(),
               "backward of '" << n->op << "' returned a gradient " << describe(gp) << " for input " << slot
                               << " of shape " << describe(p->value));
      auto acc = pending.find(p);
      if (acc == pending.end())
        pending.emplace(p, gp);
      else
        acc->second = add(acc->second, gp);
    }
    if (g_profiling) {
      profile_sync(g);
      OpTotals& t = profile_totals()[n->op];
      t.op = n->op;
      t.backward_s += seconds_since(started);
    }
  }
  if (g_profiling) g_last_record = ProfileClock::now();  // the next forward op starts from here
}

}  // namespace lm
