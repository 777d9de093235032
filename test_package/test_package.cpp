// The packaged headers compile and link with the package's dependencies: the gradient of
// relu(linear(x, W, b)) against hand-worked values and, with the image component, a PNG round trip.
#include <cstdio>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#ifdef PTRAIN_HAS_IMAGE
#include <ptrain/io/png.hpp>
#endif

int main() {
  using ptrain::Tensor;
  using ptrain::Var;
  Var<float> x(Tensor<float>::from({1, 2}, {1, 2}), true);
  Var<float> w(Tensor<float>::from({2, 2}, {1, 0, -1, -1}), true);
  Var<float> y = ptrain::relu(ptrain::linear(x, w));  // pre-activation [1, -3]
  ptrain::backward(y, Tensor<float>::ones(y.shape()));
  const bool gradient_ok = x.grad().to_vector() == std::vector<float>{1, 0} &&
                           w.grad().to_vector() == std::vector<float>{1, 2, 0, 0};
  std::printf("ptrain test_package: dL/dx = [%g, %g] %s\n", x.grad().to_vector()[0], x.grad().to_vector()[1],
              gradient_ok ? "as expected" : "WRONG");
  bool image_ok = true;
#ifdef PTRAIN_HAS_IMAGE
  ptrain::io::Image image(2, 3, 1);
  for (std::size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<std::uint8_t>(40 * i);
  image_ok = ptrain::io::decode_png(ptrain::io::encode_png(image), "round trip").pixels == image.pixels;
  std::printf("ptrain test_package: PNG round trip through libpng %s\n", image_ok ? "as expected" : "WRONG");
#endif
  return gradient_ok && image_ok ? 0 : 1;
}
