// StorageCensus counts the bytes the allocator handed each tensor's storage (Cpu's live-byte
// count moves by as much), each allocation once: views and copies of a tensor add nothing, a
// clone adds its own, an undefined tensor nothing; a later set gets none of an earlier set's. Cpu
// also keeps the high-water mark of its live bytes, which the census's users read beside it.
#include <cstdint>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/core/half.hpp>
#include <ptrain/tensor/storage_census.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(storage_census_test)

using ptrain::bfloat16;  // beside the global one of OpenBLAS's cblas.h, where a kernel header includes it

BOOST_AUTO_TEST_CASE(a_tensor_s_storage_bytes_are_what_the_allocator_counted) {
  const std::int64_t before = Cpu::live_bytes();
  const Tensor<bfloat16> t({3, 5});
  BOOST_TEST(Cpu::live_bytes() - before == 30);
  BOOST_TEST(t.storage_bytes() == 30u);
  BOOST_TEST(t.slice(1, 2).storage_bytes() == 30u);  // a view holds the whole allocation
  BOOST_TEST(Tensor<float>().storage_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(each_allocation_is_counted_once) {
  const Tensor<float> a({4, 4}), b({10});
  const Tensor<float> view = a.reshape({16}), copy = a, clone = a.clone();
  StorageCensus census;
  BOOST_TEST(census.count(std::vector<Tensor<float>>{a, view, copy, Tensor<float>()}) == 64);
  BOOST_TEST(census.count(std::vector<Tensor<float>>{a.slice(0, 1), b, clone}) == 40 + 64);
  BOOST_TEST(census.count(b) == 0);
  BOOST_TEST(census.total() == 64 + 40 + 64);
}

BOOST_AUTO_TEST_CASE(cpu_keeps_the_peak_of_its_live_bytes_since_a_reset) {
  Cpu::reset_peak_live_bytes();
  const std::int64_t before = Cpu::live_bytes();
  BOOST_TEST(Cpu::peak_live_bytes() == before);
  { const Tensor<double> a({100}), b({50}); }
  const Tensor<double> c({10});
  BOOST_TEST(Cpu::peak_live_bytes() == before + 1200);
  BOOST_TEST(Cpu::live_bytes() == before + 80);
  Cpu::reset_peak_live_bytes();
  BOOST_TEST(Cpu::peak_live_bytes() == before + 80);
}

BOOST_AUTO_TEST_SUITE_END()
