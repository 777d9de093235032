// The Device concept (device/device.hpp): an archetype with exactly the documented members
// satisfies it, every device of the library does, and types missing a member do not.
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <cstring>

#include <ptrain/device/device.hpp>
#include <ptrain/kernels/executor_for.hpp>
#include <ptrain/tensor/tensor.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(device_concept_test)

namespace {

struct ExecutorArchetype {};

// The documented members and nothing else.
struct DeviceArchetype {
  static constexpr const char* name = "archetype";
  using executor = ExecutorArchetype;
  template <class T>
  static T* allocate(std::size_t count) {
    return count ? new T[count] : nullptr;
  }
  template <class T>
  static void deallocate(T* p, std::size_t) {
    delete[] p;
  }
  template <class T>
  static void copy_to_host(T* host_dst, const T* src, std::size_t count) {
    if (count) std::memcpy(host_dst, src, count * sizeof(T));
  }
  template <class T>
  static void copy_from_host(T* dst, const T* host_src, std::size_t count) {
    if (count) std::memcpy(dst, host_src, count * sizeof(T));
  }
  template <class T>
  static void copy(T* dst, const T* src, std::size_t count) {
    if (count) std::memcpy(dst, src, count * sizeof(T));
  }
  template <class T>
  static void fill(T* dst, T value, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = value;
  }
};

// Storage without an executor: it could hold tensors, but no op could run on it.
struct StorageOnly {
  static constexpr const char* name = "storage-only";
  template <class T>
  static T* allocate(std::size_t) {
    return nullptr;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_archetype_and_every_device_satisfy_it) {
  static_assert(Device<DeviceArchetype>);
  static_assert(Device<Cpu>);
  static_assert(Device<HostEmulated>);
  static_assert(std::is_same_v<kernels::executor_for<Cpu>, kernels::CpuExecutor>);
  static_assert(std::is_same_v<kernels::executor_for<HostEmulated>, kernels::HostExecutor>);
  static_assert(std::is_same_v<kernels::executor_for<DeviceArchetype>, ExecutorArchetype>);
  // A tensor lives on the archetype as on any device.
  Tensor<float, DeviceArchetype> t({2, 3});
  t.fill(1.5f);
  for (float v : t.to_vector()) BOOST_TEST(v == 1.5f);
}

BOOST_AUTO_TEST_CASE(what_is_not_a_device) {
  static_assert(!Device<int>);
  static_assert(!Device<StorageOnly>);
  static_assert(!Device<void>);
}

BOOST_AUTO_TEST_SUITE_END()
