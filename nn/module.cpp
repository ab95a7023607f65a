// module.cpp: parameter registry of Module (module.h).
#include "nn/module.h"

namespace lm {

void Module::register_parameter(const std::string& name, Var& param, Tensor init, bool weight_decay) {
  for (auto& p : params_) LM_CHECK(p.first != name, "Module: parameter '" << name << "' registered twice");
  LM_CHECK(name.find('.') == std::string::npos, "Module: parameter name '" << name << "' must not contain '.'");
  param = Var(std::move(init), true);
  params_.emplace_back(name, &param);
  decay_.push_back(weight_decay);
}

bool Module::decays(const Var* param) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].second == param) return decay_[i];
  for (auto& c : children_)
    if (c.second->decays(param)) return true;
  return false;
}

void Module::register_module(const std::string& name, Module& child) {
  for (auto& c : children_) LM_CHECK(c.first != name, "Module: child '" << name << "' registered twice");
  children_.emplace_back(name, &child);
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Var*>>& out) {
  for (auto& p : params_) out.emplace_back(prefix + p.first, p.second);
  for (auto& c : children_) c.second->collect(prefix + c.first + ".", out);
}

std::vector<std::pair<std::string, Var*>> Module::named_parameters() {
  std::vector<std::pair<std::string, Var*>> out;
  collect("", out);
  return out;
}

std::vector<Var*> Module::parameters() {
  std::vector<Var*> out;
  for (auto& p : named_parameters()) out.push_back(p.second);
  return out;
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (auto& p : named_parameters()) n += p.second->numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

void Module::zero_grad() {
  for (auto& p : named_parameters()) p.second->zero_grad();
}

void Module::to(Device device) {
  for (auto& p : named_parameters()) *p.second = Var(p.second->value().to(device), true);
}

void Module::to(DType dtype) {
  LM_CHECK(is_floating(dtype), "Module::to: parameters must be f32 or f64, not " << dtype_name(dtype));
  for (auto& p : named_parameters()) *p.second = Var(p.second->value().to(dtype).contiguous(), true);
}

}  // namespace lm
