#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/narrow.hpp>
#include <ptrain/device/host_emulated.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(narrow_test)

BOOST_AUTO_TEST_CASE(narrow_keeps_the_extents_along_a_dimension) {
  // x[i, j, k] = 100 i + 10 j + k
  std::vector<double> values;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) values.push_back(100 * i + 10 * j + k);
  const Var<double> x(Tensor<double>::from(Shape{2, 4, 3}, values));
  const Var<double> y = narrow(x, 1, 1, 2);
  BOOST_TEST(y.shape() == (Shape{2, 2, 3}));
  BOOST_TEST(y.value().to_vector() ==
             (std::vector<double>{10, 11, 12, 20, 21, 22, 110, 111, 112, 120, 121, 122}));
  BOOST_TEST(narrow(x, -1, 2, 1).value().to_vector() ==
             (std::vector<double>{2, 12, 22, 32, 102, 112, 122, 132}));
  BOOST_TEST(narrow(x, 0, 1, 1).value().to_vector() ==
             std::vector<double>(values.begin() + 12, values.end()));
}

BOOST_AUTO_TEST_CASE(narrow_gradient_on_every_dimension) {
  for (int dim = 0; dim < 3; ++dim) {
    const auto r = gradcheck([dim](const auto& v) { return narrow(v[0], dim, 1, 2); }, {random_tensor({3, 4, 3}, 7)});
    BOOST_TEST(r.ok, "dim " << dim << ": " << r.report);
  }
}

BOOST_AUTO_TEST_CASE(narrow_gradient_on_host_emulated) {
  for (int dim = 0; dim < 3; ++dim) {
    const auto r = gradcheck_on<HostEmulated>(
        [dim](const auto& v) { return narrow(v[0], dim, 0, 2); }, {random_tensor({2, 5, 3}, 8)});
    BOOST_TEST(r.ok, "dim " << dim << ": " << r.report);
  }
}

BOOST_AUTO_TEST_CASE(narrow_outside_the_input_names_the_extents) {
  const Var<double> x(random_tensor({2, 3}, 1));
  BOOST_CHECK_EXCEPTION(narrow(x, 1, 2, 2), Error, [](const Error& e) {
    return std::string(e.what()).find("narrow: extents [2, 4) of dimension 1 are outside the input of shape [2, 3]") !=
           std::string::npos;
  });
  BOOST_CHECK_THROW(narrow(x, 2, 0, 1), Error);
}

BOOST_AUTO_TEST_SUITE_END()
