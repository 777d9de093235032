// relu(linear(x, W, b)) and its backward, checked against values worked out by hand.
#include <cmath>
#include <cstdio>
#include <vector>

#include <ptrain/ptrain.hpp>

int main() {
  using ptrain::Tensor;
  using ptrain::Var;
  Var<float> x(Tensor<float>::from({1, 2}, {1, 2}), true);
  Var<float> w(Tensor<float>::from({3, 2}, {1, 0, 3, 4, -1, -1}), true);
  Var<float> b(Tensor<float>::from({3}, {0.5f, -1, 0}), true);
  Var<float> y = ptrain::relu(ptrain::linear(x, w, b));
  ptrain::backward(y, Tensor<float>::ones(y.shape()));

  // pre-activation [1.5, 10, -3]; the third unit is cut by relu, so it passes no gradient.
  const std::vector<std::vector<float>> got{y.value().to_vector(), x.grad().to_vector(), w.grad().to_vector(),
                                            b.grad().to_vector()};
  const std::vector<std::vector<float>> want{{1.5f, 10, 0}, {4, 4}, {1, 2, 1, 2, 0, 0}, {1, 1, 0}};
  const char* names[] = {"y", "dL/dx", "dL/dW", "dL/db"};
  int bad = 0;
  for (std::size_t k = 0; k < want.size(); ++k)
    for (std::size_t i = 0; i < want[k].size(); ++i)
      if (got[k].size() != want[k].size() || std::abs(got[k][i] - want[k][i]) > 1e-6f) {
        std::fprintf(stderr, "%s[%zu] = %g, expected %g\n", names[k], i, i < got[k].size() ? got[k][i] : NAN,
                     want[k][i]);
        ++bad;
      }
  if (bad) return 1;
  std::printf("package consumer: y = [%g, %g, %g], dL/dx = [%g, %g] as expected\n", got[0][0], got[0][1], got[0][2],
              got[1][0], got[1][1]);
  return 0;
}
