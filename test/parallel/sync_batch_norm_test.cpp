// convert_sync_batchnorm in one process: which layers it converts, and a converted model in a
// world of R identical replicas (MirrorComm) against the plain model on the R-fold batch.
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include "../common/compare.hpp"
#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/comm/self_comm.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/parallel/sync_batch_norm.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(sync_batch_norm_test)

namespace {

// A world of `size` ranks that all hold what this one holds: a sum over ranks is size times the
// value. Only allreduce_sum is meaningful; it counts its calls and bytes.
class MirrorComm {
 public:
  struct Request {
    void wait() {}
    bool test() { return true; }
  };
  explicit MirrorComm(int size) : size_(size) {}
  int rank() const { return 0; }
  int size() const { return size_; }
  std::uint64_t bytes_sent() const { return bytes_; }
  int calls() const { return calls_; }

  template <MutableCommBuffer B>
  void allreduce_sum(B&& buffer) {
    auto values = as_span(buffer);
    if constexpr (std::is_same_v<comm_scalar_t<B>, double> || std::is_same_v<comm_scalar_t<B>, float>)
      for (auto& v : values) v *= static_cast<comm_scalar_t<B>>(size_);
    else
      fail("MirrorComm: allreduce_sum of half types is not used here");
    bytes_ += values.size_bytes();
    ++calls_;
  }
  template <MutableCommBuffer B>
  Request iallreduce_sum(B&& buffer) {
    allreduce_sum(buffer);
    return {};
  }
  template <CommBuffer S, MutableCommBuffer R>
  void reduce_scatter_sum(S&&, R&&) { unused(); }
  template <CommBuffer S, MutableCommBuffer R>
  Request ireduce_scatter_sum(S&&, R&&) { return unused(); }
  template <CommBuffer S, MutableCommBuffer R>
  void allgather(S&&, R&&) { unused(); }
  template <CommBuffer S, MutableCommBuffer R>
  Request iallgather(S&&, R&&) { return unused(); }
  template <MutableCommBuffer B>
  void broadcast(B&&, int) { unused(); }
  template <MutableCommBuffer B>
  Request ibroadcast(B&&, int) { return unused(); }
  template <CommBuffer B>
  void send(B&&, int, int) { unused(); }
  template <CommBuffer B>
  Request isend(B&&, int, int) { return unused(); }
  template <MutableCommBuffer B>
  void recv(B&&, int, int) { unused(); }
  template <MutableCommBuffer B>
  Request irecv(B&&, int, int) { return unused(); }
  void barrier() {}
  MirrorComm split(int, int) { return MirrorComm(size_); }

 private:
  static Request unused() { fail("MirrorComm: only allreduce_sum is used by SyncBatchNorm"); }
  int size_;
  int calls_ = 0;
  std::uint64_t bytes_ = 0;
};
static_assert(Communicator<MirrorComm>);

template <class T>
std::shared_ptr<Sequential<T>> small_model() {
  auto model = make<Sequential<T>>();
  model->push_back(make<Conv2d<T>>(2, 3, 3, Conv2dOptions::square(1, 1)));
  model->push_back(make<BatchNorm2d<T>>(3));
  model->push_back(make<ReLU<T>>());
  model->push_back(make<Flatten<T>>());
  model->push_back(make<Linear<T>>(3 * 4 * 4, 5));
  model->push_back(make<BatchNorm2d<T>>(5));  // BatchNorm1d on [N, C]
  return model;
}

// Parameters as a function of their place, the same for every model built by small_model.
template <class T>
void set_parameters(Module<T>& model) {
  int k = 0;
  for (auto& named : model.named_parameters()) {
    Var<T>& p = named.second;
    ++k;
    for (std::int64_t i = 0; i < p.numel(); ++i)
      p.value()[i] = static_cast<T>(0.4 * std::sin(0.9 * static_cast<double>(i) + k));
  }
}

// The first n rows of t, repeated `times` along the batch.
template <class T>
Tensor<T> repeat_rows(const Tensor<T>& t, int times) {
  Shape s = t.shape();
  s[0] *= times;
  Tensor<T> out(s);
  for (int r = 0; r < times; ++r) out.slice(r * t.size(0), (r + 1) * t.size(0)).copy_from(t);
  return out;
}

using ptrain::test::worst_error;

}  // namespace

BOOST_AUTO_TEST_CASE(every_batch_norm_is_found_and_a_world_of_one_is_left_alone) {
  auto resnet = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  MirrorComm two(2);
  BOOST_TEST(convert_sync_batchnorm(*resnet, two) == 20u);  // stem, 2 per block, 3 downsamples
  std::size_t synced = 0, plain = 0;
  auto count = [&](auto&& self, const Module<float>& m) -> void {
    if (auto* bn = dynamic_cast<const BatchNorm2d<float>*>(&m)) (bn->synchronised() ? synced : plain) += 1;
    for (const auto& [name, child] : m.children()) self(self, *child);
  };
  count(count, *resnet);
  BOOST_TEST(synced == 20u);
  BOOST_TEST(plain == 0u);

  auto model = small_model<double>();
  SelfComm self;
  BOOST_TEST(convert_sync_batchnorm(*model, self) == 2u);
  synced = 0;
  for (const auto& [name, child] : model->children())
    if (auto* bn = dynamic_cast<BatchNorm2d<double>*>(child.get())) synced += bn->synchronised();
  BOOST_TEST(synced == 0u);
  // A batch norm that is the model itself.
  BatchNorm2d<double> alone(4);
  BOOST_TEST(convert_sync_batchnorm(alone, two) == 1u);
  BOOST_TEST(alone.synchronised());
  alone.set_sync({});
  BOOST_TEST(!alone.synchronised());
}

using Scalars = boost::mpl::list<double, float>;

BOOST_AUTO_TEST_CASE_TEMPLATE(a_mirrored_world_equals_the_plain_model_on_the_repeated_batch, T, Scalars) {
  const double tolerance = std::is_same_v<T, double> ? 1e-11 : 2e-5;
  constexpr int world = 3;
  auto model = small_model<T>(), reference = small_model<T>();
  set_parameters(*model);
  set_parameters(*reference);
  MirrorComm comm(world);
  BOOST_REQUIRE(convert_sync_batchnorm(*model, comm) == 2u);

  for (int step = 0; step < 2; ++step) {
    BOOST_TEST_CONTEXT("step " << step) {
      Tensor<T> x(Shape{4, 2, 4, 4}), gy(Shape{4, 5});
      const Tensor<double> xd = random_tensor(x.shape(), 10 + step, -1, 2), gyd = random_tensor(gy.shape(), 20 + step);
      for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<T>(xd[i]);
      for (std::int64_t i = 0; i < gy.numel(); ++i) gy[i] = static_cast<T>(gyd[i]);
      model->zero_grad();
      reference->zero_grad();
      Var<T> xs(x.clone(), true), xr(repeat_rows(x, world), true);
      const int calls = comm.calls();
      Var<T> ys = model->forward(xs), yr = reference->forward(xr);
      BOOST_TEST(comm.calls() - calls == 4);  // two per batch norm
      backward(ys, gy.clone());
      backward(yr, repeat_rows(gy, world));
      BOOST_TEST(comm.calls() - calls == 6);  // and one each in backward
      BOOST_TEST(worst_error(ys.value(), yr.value().slice(0, 4)) <= tolerance);
      BOOST_TEST(worst_error(xs.grad(), xr.grad().slice(0, 4)) <= tolerance);
      const auto mine = model->named_parameters(), theirs = reference->named_parameters();
      for (std::size_t i = 0; i < mine.size(); ++i) {
        BOOST_TEST_CONTEXT(mine[i].first) {
          Tensor<T> summed = mine[i].second.grad().clone();  // what averaging over the world would sum
          summed.array() *= static_cast<T>(world);
          BOOST_TEST(worst_error(summed, theirs[i].second.grad()) <= tolerance);
        }
      }
      auto buffers = model->named_buffers(), reference_buffers = reference->named_buffers();
      for (std::size_t i = 0; i < buffers.size(); ++i)
        BOOST_TEST_CONTEXT(buffers[i].first) {
          BOOST_TEST(worst_error(*buffers[i].second, *reference_buffers[i].second) <= tolerance);
        }
    }
  }

  model->eval();
  reference->eval();
  const int calls = comm.calls();
  const Tensor<double> xd = random_tensor({4, 2, 4, 4}, 30);
  Tensor<T> x(xd.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<T>(xd[i]);
  Var<T> ye = model->forward(Var<T>(x)), yre = reference->forward(Var<T>(x));
  BOOST_TEST(worst_error(ye.value(), yre.value()) <= tolerance);
  BOOST_TEST(comm.calls() == calls);
}

BOOST_AUTO_TEST_SUITE_END()
