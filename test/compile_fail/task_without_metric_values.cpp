// Must not compile: the task has every member of ptrain::Task but metric_values, which turns the
// summed metric state into the epoch's values.
#include <span>
#include <string>
#include <vector>

#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

struct Regression {
  using target_type = std::vector<std::int64_t>;
  std::int64_t rows(const target_type& t) const { return static_cast<std::int64_t>(t.size()); }
  target_type slice(const target_type& t, std::int64_t b, std::int64_t e) const { return {t.begin() + b, t.begin() + e}; }
  double loss_weight(const target_type& t) const { return static_cast<double>(t.size()); }
  ptrain::Var<float> loss(const ptrain::Var<float>& output, const target_type& t, double grad_scale) const {
    return ptrain::cross_entropy(output, std::span<const std::int64_t>(t), 0.0, grad_scale);
  }
  std::size_t state_size() const { return 0; }
  void accumulate(const ptrain::Tensor<float>&, const target_type&, double, std::span<double>) const {}
  std::vector<std::string> metric_names() const { return {}; }
};

int main() {
  auto model = std::make_shared<ptrain::Sequential<float>>(
      std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{ptrain::make<ptrain::Linear<float>>(2, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{});
  ptrain::Trainer<ptrain::Sequential<float>, Regression> trainer(model, sgd, {}, Regression{});
}
