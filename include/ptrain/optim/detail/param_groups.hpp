#pragma once
// The parameter groups an optimizer steps (optimizer.hpp says what they promise): every group's
// parameters in one list, each group's range of it, its learning rate (current and initial) and
// weight decay, and the group scalars of a saved state.
#include <charconv>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/optim/detail/params.hpp"
#include "ptrain/optim/optimizer.hpp"

namespace ptrain::detail {

template <class T, class D>
class ParamGroups {
 public:
  struct Group {
    std::size_t begin = 0, end = 0;  // its parameters' range of params()
    double lr = 0;
    double initial_lr = 0;
    double weight_decay = 0;
  };

  // lr and weight_decay: the optimizer's options, for the groups that leave theirs unset.
  ParamGroups(const char* optimizer, std::vector<ParamGroup<T, D>> groups, double lr, double weight_decay) {
    check(!groups.empty(), optimizer, ": got no parameter groups");
    for (std::size_t g = 0; g < groups.size(); ++g) {
      auto& group = groups[g];
      check(groups.size() == 1 || !group.params.empty(), optimizer, ": parameter group ", g, " has no parameters");
      const double group_lr = group.lr.value_or(lr);
      const double decay = group.weight_decay.value_or(weight_decay);
      check(std::isfinite(group_lr) && group_lr >= 0, optimizer, ": parameter group ", g, " has learning rate ",
            group_lr, ", expected a finite value >= 0");
      check(std::isfinite(decay) && decay >= 0, optimizer, ": parameter group ", g, " has weight_decay ", decay,
            ", expected a finite value >= 0");
      const std::size_t begin = params_.size();
      for (auto& p : group.params) params_.push_back(std::move(p));
      groups_.push_back({begin, params_.size(), group_lr, group_lr, decay});
    }
    check_params(optimizer, params_);
  }

  const std::vector<Var<T, D>>& params() const { return params_; }
  std::vector<Var<T, D>>& params() { return params_; }
  std::size_t size() const { return groups_.size(); }
  const Group& operator[](std::size_t g) const { return groups_.at(g); }

  double lr() const { return groups_[0].lr; }
  // Any finite value is taken (a schedule stepped once past its end may go below 0, as in
  // PyTorch); step() refuses to use a negative one.
  void set_group_lr(const char* optimizer, std::size_t g, double lr) {
    check(g < groups_.size(), optimizer, ": parameter group ", g, " of ", groups_.size());
    check_hyper(std::isfinite(lr), optimizer, "learning rate", lr, "a finite value");
    groups_[g].lr = lr;
  }
  void set_lr(const char* optimizer, double lr) {
    check_hyper(std::isfinite(lr), optimizer, "learning rate", lr, "a finite value");
    const double base = groups_[0].initial_lr;
    check(groups_.size() == 1 || base > 0, optimizer, ": set_lr scales every group's initial rate by lr / group 0's "
          "initial rate, which is 0; set each group's rate with set_group_lr");
    groups_[0].lr = lr;
    for (std::size_t g = 1; g < groups_.size(); ++g) groups_[g].lr = groups_[g].initial_lr * (lr / base);
  }

  // One group saves "lr" alone, as before groups existed.
  void save(std::vector<std::pair<std::string, double>>& scalars) const {
    scalars.emplace_back("lr", groups_[0].lr);
    if (groups_.size() > 1) scalars.emplace_back("groups", static_cast<double>(groups_.size()));
    for (std::size_t g = 1; g < groups_.size(); ++g) scalars.emplace_back("group." + std::to_string(g) + ".lr", groups_[g].lr);
  }

  // The learning rates a saved state's scalars give (the current ones where it names none), its
  // group count checked before its group names, in whatever order the scalars come.
  class Loading {
   public:
    explicit Loading(const ParamGroups& groups) : count_(groups.size()) {}
    // Takes "lr", "groups" and "group.<g>.lr"; false for any other key.
    bool take(const char* optimizer, const std::string& key, double value) {
      if (key == "groups") {
        saved_count_ = value;
        return true;
      }
      if (key != "lr" && !(key.starts_with("group.") && key.ends_with(".lr"))) return false;
      check_hyper(std::isfinite(value), optimizer, "saved learning rate", value, "a finite value");
      rates_.emplace_back(key, value);
      return true;
    }
    void apply(const char* optimizer, ParamGroups& groups) const {
      const double saved = saved_count_.value_or(1);
      check(saved == static_cast<double>(count_), optimizer, ": the saved state has ",
            saved == 1 ? std::string("one parameter group") : exact_count(saved) + " parameter groups",
            ", this optimizer ", count_);
      std::vector<double> lrs;
      for (const auto& g : groups.groups_) lrs.push_back(g.lr);
      for (const auto& [key, value] : rates_) {
        std::size_t g = 0;
        if (key != "lr") {
          const char* first = key.data() + 6;
          const char* last = key.data() + key.size() - 3;
          const auto [end, error] = std::from_chars(first, last, g);
          check(error == std::errc() && end == last && g >= 1 && g < count_, optimizer, ": state scalar '", key,
                "' does not name a parameter group of the ", count_, " (group 0's rate is 'lr')");
        }
        lrs[g] = value;
      }
      for (std::size_t g = 0; g < count_; ++g) groups.groups_[g].lr = lrs[g];
    }

   private:
    static std::string exact_count(double n) {
      return n == std::floor(n) && n >= 0 && n < 1e15 ? std::to_string(static_cast<long long>(n)) : std::to_string(n);
    }

    std::size_t count_;
    std::optional<double> saved_count_;
    std::vector<std::pair<std::string, double>> rates_;
  };

 private:
  std::vector<Var<T, D>> params_;
  std::vector<Group> groups_;
};

// The group API every optimizer offers (optimizer.hpp), over the groups it steps: an optimizer
// derives from it and reads groups_ in step(), state() and load_state().
template <class T, class D>
class GroupedOptimizer {
 public:
  double lr() const { return groups_.lr(); }
  void set_lr(double lr) { groups_.set_lr(optimizer_, lr); }
  std::size_t group_count() const { return groups_.size(); }
  double group_lr(std::size_t g) const { return groups_[g].lr; }
  void set_group_lr(std::size_t g, double lr) { groups_.set_group_lr(optimizer_, g, lr); }
  double group_weight_decay(std::size_t g) const { return groups_[g].weight_decay; }
  const std::vector<Var<T, D>>& params() const { return groups_.params(); }
  // Drops the gradients (the default, so a parameter left out of the next backward is skipped),
  // or zeroes them in place.
  void zero_grad(bool set_to_none = true) { zero_grads(groups_.params(), set_to_none); }

 protected:
  // lr and weight_decay: the optimizer's options, for the groups that leave theirs unset.
  GroupedOptimizer(const char* optimizer, std::vector<ParamGroup<T, D>> groups, double lr, double weight_decay)
      : optimizer_(optimizer), groups_(optimizer, std::move(groups), lr, weight_decay) {}

  const char* optimizer_;
  ParamGroups<T, D> groups_;
};

// One group of every parameter, with the options' rate and weight decay.
template <class T, class D>
std::vector<ParamGroup<T, D>> one_group(std::vector<Var<T, D>> params) {
  std::vector<ParamGroup<T, D>> groups(1);
  groups[0].params = std::move(params);
  return groups;
}

}  // namespace ptrain::detail

PTRAIN_PREBUILT_CLASSES_FD(ptrain::detail::ParamGroups)
