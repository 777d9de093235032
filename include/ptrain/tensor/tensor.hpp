#pragma once
// Tensor<T, Device>: a contiguous, row-major block of T with a runtime shape. Copies share
// storage (like torch.Tensor); clone() copies the data. reshape() and slice() are views.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/device/cpu.hpp"

namespace ptrain {

template <class T, class Device = Cpu>
class Tensor {
 public:
  using value_type = T;
  using device_type = Device;
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  Tensor() = default;
  explicit Tensor(const Shape& shape) : shape_(shape) {
    const auto n = static_cast<std::size_t>(shape.numel());
    storage_ = std::shared_ptr<T>(Device::template allocate<T>(n), Deallocate{n});
  }

  static Tensor empty(const Shape& shape) { return Tensor(shape); }
  static Tensor full(const Shape& shape, T value) {
    Tensor t(shape);
    t.fill(value);
    return t;
  }
  static Tensor zeros(const Shape& shape) { return full(shape, T(0)); }
  static Tensor ones(const Shape& shape) { return full(shape, T(1)); }
  static Tensor from(const Shape& shape, const std::vector<T>& values) {
    check(static_cast<std::int64_t>(values.size()) == shape.numel(), "Tensor::from: ", values.size(),
          " values for shape ", shape, " which holds ", shape.numel());
    Tensor t(shape);
    Device::copy_from_host(t.data(), values.data(), values.size());
    return t;
  }

  bool defined() const { return storage_ != nullptr || (shape_.rank() > 0 && shape_.numel() == 0); }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  std::int64_t size(int dim) const { return shape_.at(dim); }
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * sizeof(T); }

  T* data() { return storage_.get() + offset_; }
  const T* data() const { return storage_.get() + offset_; }
  // True when both tensors view the same allocation.
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }
  // The allocation this tensor views (its copies and views share it): its address, and the bytes
  // asked of the device for it (0: none; Cpu's live-byte count moved by as much; a caching
  // allocator may hold a rounded-up block). A memory census counts each allocation once by these.
  const void* storage_address() const { return storage_.get(); }
  std::size_t storage_bytes() const {
    const auto* deallocate = std::get_deleter<Deallocate>(storage_);
    return deallocate ? deallocate->count * sizeof(T) : 0;
  }

  // A view with another shape and the same elements; one extent may be -1.
  Tensor reshape(std::initializer_list<std::int64_t> extents) const {
    Shape s;
    int inferred = -1;
    std::int64_t known = 1;
    for (auto e : extents) {
      if (e == -1) {
        check(inferred < 0, "reshape: more than one -1 in the new shape");
        inferred = s.rank();
        s.push_back(0);
      } else {
        s.push_back(e);
        known *= e;
      }
    }
    if (inferred >= 0) {
      check(known > 0 && numel() % known == 0, "reshape: cannot infer -1 from ", shape_, " into ", s);
      s[inferred] = numel() / known;
    }
    return reshape(s);
  }
  Tensor reshape(const Shape& s) const {
    check(s.numel() == numel(), "reshape: shape ", shape_, " (", numel(), " elements) cannot become ", s);
    Tensor t = *this;
    t.shape_ = s;
    return t;
  }
  // Rows [begin, end) of the first dimension, as a view.
  Tensor slice(std::int64_t begin, std::int64_t end) const {
    check(rank() >= 1 && 0 <= begin && begin <= end && end <= size(0), "slice: [", begin, ", ", end,
          ") out of range for shape ", shape_);
    Tensor t = *this;
    const std::int64_t row = size(0) ? numel() / size(0) : 0;
    t.offset_ += begin * row;
    t.shape_[0] = end - begin;
    return t;
  }

  Tensor clone() const {
    Tensor t(shape_);
    Device::copy(t.data(), data(), static_cast<std::size_t>(numel()));
    return t;
  }
  void copy_from(const Tensor& src) {
    check(src.numel() == numel(), "copy_from: ", src.shape(), " into ", shape_);
    Device::copy(data(), src.data(), static_cast<std::size_t>(numel()));
  }
  void fill(T value) { Device::fill(data(), value, static_cast<std::size_t>(numel())); }
  void zero() { fill(T(0)); }

  std::vector<T> to_vector() const {
    std::vector<T> out(static_cast<std::size_t>(numel()));
    Device::copy_to_host(out.data(), data(), out.size());
    return out;
  }
  // A copy on another device (or another tensor on the same one): see copy_across below.
  template <class Other>
  Tensor<T, Other> to() const {
    Tensor<T, Other> out(shape_);
    copy_across(*this, out);
    return out;
  }

  // Host-only element access and Eigen views.
  T& operator[](std::int64_t i) requires std::is_same_v<Device, Cpu> { return data()[i]; }
  const T& operator[](std::int64_t i) const requires std::is_same_v<Device, Cpu> { return data()[i]; }
  Eigen::Map<Array> array() requires std::is_same_v<Device, Cpu> { return {data(), numel()}; }
  Eigen::Map<const Array> array() const requires std::is_same_v<Device, Cpu> { return {data(), numel()}; }
  // The tensor as a rows x (numel/rows) row-major matrix.
  Eigen::Map<RowMatrix> matrix(std::int64_t rows) requires std::is_same_v<Device, Cpu> {
    return {data(), rows, rows ? numel() / rows : 0};
  }
  Eigen::Map<const RowMatrix> matrix(std::int64_t rows) const requires std::is_same_v<Device, Cpu> {
    return {data(), rows, rows ? numel() / rows : 0};
  }

 private:
  // The storage's deleter, which keeps the allocation's element count.
  struct Deallocate {
    std::size_t count;
    void operator()(T* p) const { Device::template deallocate<T>(p, count); }
  };

  std::shared_ptr<T> storage_;
  std::int64_t offset_ = 0;
  Shape shape_;
};

// t with scalar type To: t itself (sharing storage) when it has it already, else a converted
// copy (vectorised between float and the 16-bit types). CPU tensors.
template <class To, class From>
Tensor<To> tensor_cast(const Tensor<From>& t) {
  if constexpr (std::is_same_v<To, From>) {
    return t;
  } else {
    Tensor<To> out(t.shape());
    const auto n = static_cast<std::size_t>(t.numel());
    convert(std::span<const From>(t.data(), n), std::span<To>(out.data(), n));
    return out;
  }
}

// Copies between memory spaces, chosen by overload on the two devices: the host's memory is the
// CPU's, so the CPU's side of a copy is the device's copy_to_host/copy_from_host; two other
// devices meet through the host; a device copies within itself.
template <class T, class From, class To>
void copy_across(const Tensor<T, From>& src, Tensor<T, To>& dst) {
  dst.copy_from(src.template to<Cpu>().template to<To>());
}
template <class T, class D>
void copy_across(const Tensor<T, D>& src, Tensor<T, D>& dst) {
  dst.copy_from(src);
}
template <class T, class To>
void copy_across(const Tensor<T, Cpu>& src, Tensor<T, To>& dst) {
  To::copy_from_host(dst.data(), src.data(), static_cast<std::size_t>(src.numel()));
}
template <class T, class From>
void copy_across(const Tensor<T, From>& src, Tensor<T, Cpu>& dst) {
  From::copy_to_host(dst.data(), src.data(), static_cast<std::size_t>(src.numel()));
}
template <class T>
void copy_across(const Tensor<T, Cpu>& src, Tensor<T, Cpu>& dst) {
  dst.copy_from(src);
}

// A host tensor where D's ops read it: a copy on D; on the CPU, t itself (sharing storage).
template <class D, class T>
Tensor<T, D> on_device(const Tensor<T>& t) {
  return t.template to<D>();
}
template <class D, class T>
  requires std::is_same_v<D, Cpu>
Tensor<T> on_device(const Tensor<T>& t) {
  return t;
}
// t on the host: a copy from another device; on the CPU, t itself (sharing storage).
template <class T, class D>
Tensor<T> on_host(const Tensor<T, D>& t) {
  return t.defined() ? t.template to<Cpu>() : Tensor<T>();
}
template <class T>
Tensor<T> on_host(const Tensor<T>& t) {
  return t;
}

namespace detail {
template <class D>
struct UploaderOf {
  struct type {};
};
template <class D>
  requires requires { typename D::BatchUploader; }
struct UploaderOf<D> {
  using type = typename D::BatchUploader;
};
}  // namespace detail

// How batches reach device D: through D::BatchUploader where the device has one (Cuda's pinned
// staging buffers and copy stream, device/cuda_upload.hpp), else as on_device copies them.
template <class D>
class BatchUpload {
 public:
  template <class T>
  Tensor<T, D> operator()(const Tensor<T>& host) {
    if constexpr (has_uploader) {
      Tensor<T, D> out(host.shape());
      uploader_.upload(out.data(), host.data(), host.bytes());
      return out;
    } else {
      return on_device<D>(host);
    }
  }

 private:
  static constexpr bool has_uploader = requires { typename D::BatchUploader; };
  [[no_unique_address]] typename detail::UploaderOf<D>::type uploader_;
};

template <class T, class D>
void require_shape(const Tensor<T, D>& t, const Shape& expected, const char* what) {
  check(t.shape() == expected, what, ": expected shape ", expected, ", got ", t.shape());
}

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::Tensor)
