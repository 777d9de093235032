#pragma once
// Inception v3 as torchvision builds it (same parameter names, shapes and order; 299x299 input,
// transform_input=False), with optional auxiliary logits. The network is a Sequential of its
// torchvision children plus a parameter-free flatten, so a pipeline can cut it.
#include <initializer_list>
#include <memory>
#include <string>

#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/batch_norm.hpp"
#include "ptrain/nn/conv.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

// conv (no bias) + BatchNorm2d(eps=0.001) + ReLU. Weights: trunc_normal_(std, a=-2, b=2) as
// torchvision's init (std 0.1, 0.01 for the aux head's conv1).
template <class T = float, class D = Cpu>
class BasicConv2d : public Module<T, D> {
 public:
  BasicConv2d(std::int64_t in, std::int64_t out, std::int64_t kernel_h, std::int64_t kernel_w,
              const Conv2dOptions& options = {}, double init_std = 0.1) {
    conv_ = this->register_module("conv", make<Conv2d<T, D>>(in, out, kernel_h, kernel_w, options, false));
    init::on_host(conv_->weight.value(),
                  [init_std](Tensor<T>& w) { init::trunc_normal(w, 0.0, init_std, -2.0, 2.0); });
    bn_ = this->register_module("bn", make<BatchNorm2d<T, D>>(out, 0.001));
  }
  Var<T, D> forward(const Var<T, D>& x) override { return bn_->forward_relu(conv_->forward(x)); }

 private:
  std::shared_ptr<Conv2d<T, D>> conv_;
  std::shared_ptr<BatchNorm2d<T, D>> bn_;
};

namespace detail {
// The parts every Inception block shares: registering its convolutions under torchvision's flat
// names (branch7x7_2, ...) and the pools of the pooling branch.
template <class T, class D>
class InceptionBlock : public Module<T, D> {
 protected:
  using ConvPtr = std::shared_ptr<BasicConv2d<T, D>>;

  ConvPtr conv(const std::string& name, std::int64_t in, std::int64_t out, std::int64_t kernel,
               const Conv2dOptions& options = {}) {
    return conv(name, in, out, kernel, kernel, options);
  }
  ConvPtr conv(const std::string& name, std::int64_t in, std::int64_t out, std::int64_t kernel_h, std::int64_t kernel_w,
               const Conv2dOptions& options = {}) {
    return this->register_module(name, make<BasicConv2d<T, D>>(in, out, kernel_h, kernel_w, options));
  }
  static Conv2dOptions pad(std::int64_t pad_h, std::int64_t pad_w) {
    Conv2dOptions o;
    o.pad_h = pad_h;
    o.pad_w = pad_w;
    return o;
  }
  static Conv2dOptions stride2() { return Conv2dOptions::square(2); }

  // The convolutions one after the other.
  static Var<T, D> chain(Var<T, D> x, std::initializer_list<ConvPtr> convs) {
    for (const auto& c : convs) x = c->forward(x);
    return x;
  }
  static Var<T, D> avg_pool_3x3(const Var<T, D>& x) { return avg_pool2d(x, 3, 1, 1); }
  static Var<T, D> max_pool_3x3_stride2(const Var<T, D>& x) { return max_pool2d(x, 3, 2); }
};
}  // namespace detail

// 35x35 block: 1x1, 5x5, double 3x3 and pooled branches; 224 + pool_features channels out.
template <class T = float, class D = Cpu>
class InceptionA : public detail::InceptionBlock<T, D> {
 public:
  InceptionA(std::int64_t in, std::int64_t pool_features) {
    b1x1_ = this->conv("branch1x1", in, 64, 1);
    b5x5_1_ = this->conv("branch5x5_1", in, 48, 1);
    b5x5_2_ = this->conv("branch5x5_2", 48, 64, 5, this->pad(2, 2));
    b3x3dbl_1_ = this->conv("branch3x3dbl_1", in, 64, 1);
    b3x3dbl_2_ = this->conv("branch3x3dbl_2", 64, 96, 3, this->pad(1, 1));
    b3x3dbl_3_ = this->conv("branch3x3dbl_3", 96, 96, 3, this->pad(1, 1));
    pool_ = this->conv("branch_pool", in, pool_features, 1);
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    return concat<T, D>({b1x1_->forward(x), this->chain(x, {b5x5_1_, b5x5_2_}),
                      this->chain(x, {b3x3dbl_1_, b3x3dbl_2_, b3x3dbl_3_}), pool_->forward(this->avg_pool_3x3(x))},
                     1);
  }

 private:
  typename detail::InceptionBlock<T, D>::ConvPtr b1x1_, b5x5_1_, b5x5_2_, b3x3dbl_1_, b3x3dbl_2_, b3x3dbl_3_, pool_;
};

// 35x35 -> 17x17 reduction: strided 3x3, strided double 3x3 and max-pool branches.
template <class T = float, class D = Cpu>
class InceptionB : public detail::InceptionBlock<T, D> {
 public:
  explicit InceptionB(std::int64_t in) {
    b3x3_ = this->conv("branch3x3", in, 384, 3, this->stride2());
    b3x3dbl_1_ = this->conv("branch3x3dbl_1", in, 64, 1);
    b3x3dbl_2_ = this->conv("branch3x3dbl_2", 64, 96, 3, this->pad(1, 1));
    b3x3dbl_3_ = this->conv("branch3x3dbl_3", 96, 96, 3, this->stride2());
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    return concat<T, D>(
        {b3x3_->forward(x), this->chain(x, {b3x3dbl_1_, b3x3dbl_2_, b3x3dbl_3_}), this->max_pool_3x3_stride2(x)}, 1);
  }

 private:
  typename detail::InceptionBlock<T, D>::ConvPtr b3x3_, b3x3dbl_1_, b3x3dbl_2_, b3x3dbl_3_;
};

// 17x17 block with factorised 7x7 convolutions (1x7 and 7x1) of channels_7x7 channels; 768 out.
template <class T = float, class D = Cpu>
class InceptionC : public detail::InceptionBlock<T, D> {
 public:
  InceptionC(std::int64_t in, std::int64_t c7) {
    b1x1_ = this->conv("branch1x1", in, 192, 1);
    b7x7_1_ = this->conv("branch7x7_1", in, c7, 1);
    b7x7_2_ = this->conv("branch7x7_2", c7, c7, 1, 7, this->pad(0, 3));
    b7x7_3_ = this->conv("branch7x7_3", c7, 192, 7, 1, this->pad(3, 0));
    b7x7dbl_1_ = this->conv("branch7x7dbl_1", in, c7, 1);
    b7x7dbl_2_ = this->conv("branch7x7dbl_2", c7, c7, 7, 1, this->pad(3, 0));
    b7x7dbl_3_ = this->conv("branch7x7dbl_3", c7, c7, 1, 7, this->pad(0, 3));
    b7x7dbl_4_ = this->conv("branch7x7dbl_4", c7, c7, 7, 1, this->pad(3, 0));
    b7x7dbl_5_ = this->conv("branch7x7dbl_5", c7, 192, 1, 7, this->pad(0, 3));
    pool_ = this->conv("branch_pool", in, 192, 1);
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    return concat<T, D>({b1x1_->forward(x), this->chain(x, {b7x7_1_, b7x7_2_, b7x7_3_}),
                      this->chain(x, {b7x7dbl_1_, b7x7dbl_2_, b7x7dbl_3_, b7x7dbl_4_, b7x7dbl_5_}),
                      pool_->forward(this->avg_pool_3x3(x))},
                     1);
  }

 private:
  typename detail::InceptionBlock<T, D>::ConvPtr b1x1_, b7x7_1_, b7x7_2_, b7x7_3_, b7x7dbl_1_, b7x7dbl_2_, b7x7dbl_3_,
      b7x7dbl_4_, b7x7dbl_5_, pool_;
};

// 17x17 -> 8x8 reduction: 3x3 and 7x7-then-3x3 strided branches and a max-pool.
template <class T = float, class D = Cpu>
class InceptionD : public detail::InceptionBlock<T, D> {
 public:
  explicit InceptionD(std::int64_t in) {
    b3x3_1_ = this->conv("branch3x3_1", in, 192, 1);
    b3x3_2_ = this->conv("branch3x3_2", 192, 320, 3, this->stride2());
    b7x7x3_1_ = this->conv("branch7x7x3_1", in, 192, 1);
    b7x7x3_2_ = this->conv("branch7x7x3_2", 192, 192, 1, 7, this->pad(0, 3));
    b7x7x3_3_ = this->conv("branch7x7x3_3", 192, 192, 7, 1, this->pad(3, 0));
    b7x7x3_4_ = this->conv("branch7x7x3_4", 192, 192, 3, this->stride2());
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    return concat<T, D>({this->chain(x, {b3x3_1_, b3x3_2_}), this->chain(x, {b7x7x3_1_, b7x7x3_2_, b7x7x3_3_, b7x7x3_4_}),
                      this->max_pool_3x3_stride2(x)},
                     1);
  }

 private:
  typename detail::InceptionBlock<T, D>::ConvPtr b3x3_1_, b3x3_2_, b7x7x3_1_, b7x7x3_2_, b7x7x3_3_, b7x7x3_4_;
};

// 8x8 block whose 3x3 branches split into parallel 1x3 and 3x1 convolutions; 2048 out.
template <class T = float, class D = Cpu>
class InceptionE : public detail::InceptionBlock<T, D> {
 public:
  explicit InceptionE(std::int64_t in) {
    b1x1_ = this->conv("branch1x1", in, 320, 1);
    b3x3_1_ = this->conv("branch3x3_1", in, 384, 1);
    b3x3_2a_ = this->conv("branch3x3_2a", 384, 384, 1, 3, this->pad(0, 1));
    b3x3_2b_ = this->conv("branch3x3_2b", 384, 384, 3, 1, this->pad(1, 0));
    b3x3dbl_1_ = this->conv("branch3x3dbl_1", in, 448, 1);
    b3x3dbl_2_ = this->conv("branch3x3dbl_2", 448, 384, 3, this->pad(1, 1));
    b3x3dbl_3a_ = this->conv("branch3x3dbl_3a", 384, 384, 1, 3, this->pad(0, 1));
    b3x3dbl_3b_ = this->conv("branch3x3dbl_3b", 384, 384, 3, 1, this->pad(1, 0));
    pool_ = this->conv("branch_pool", in, 192, 1);
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    const Var<T, D> b3x3 = b3x3_1_->forward(x);
    const Var<T, D> b3x3dbl = this->chain(x, {b3x3dbl_1_, b3x3dbl_2_});
    return concat<T, D>(
        {b1x1_->forward(x), b3x3_2a_->forward(b3x3), b3x3_2b_->forward(b3x3), b3x3dbl_3a_->forward(b3x3dbl),
         b3x3dbl_3b_->forward(b3x3dbl), pool_->forward(this->avg_pool_3x3(x))},
        1);
  }

 private:
  typename detail::InceptionBlock<T, D>::ConvPtr b1x1_, b3x3_1_, b3x3_2a_, b3x3_2b_, b3x3dbl_1_, b3x3dbl_2_, b3x3dbl_3a_,
      b3x3dbl_3b_, pool_;
};

// torchvision's InceptionAux (conv0, conv1, fc) as a tap in the chain: forward returns its input
// unchanged and, in training mode, keeps logits(x) for last_logits(); in eval it keeps nothing,
// as torchvision computes aux logits only in training.
template <class T = float, class D = Cpu>
class InceptionAux : public Module<T, D> {
 public:
  InceptionAux(std::int64_t in, std::int64_t num_classes) {
    conv0_ = this->register_module("conv0", make<BasicConv2d<T, D>>(in, 128, 1, 1));
    conv1_ = this->register_module("conv1", make<BasicConv2d<T, D>>(128, 768, 5, 5, Conv2dOptions{}, 0.01));
    fc_ = this->register_module("fc", make<Linear<T, D>>(768, num_classes));
    init::on_host(fc_->weight.value(), [](Tensor<T>& w) { init::trunc_normal(w, 0.0, 0.001, -2.0, 2.0); });
  }
  // [N, 768, 17, 17] -> [N, num_classes].
  Var<T, D> logits(const Var<T, D>& x) {
    Var<T, D> h = conv1_->forward(conv0_->forward(avg_pool2d(x, 5, 3)));
    return fc_->forward(flatten(adaptive_avg_pool2d(h, 1, 1), 1));
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    last_ = this->is_training() ? logits(x) : Var<T, D>();
    return x;
  }
  const Var<T, D>& last_logits() const { return last_; }

 private:
  std::shared_ptr<BasicConv2d<T, D>> conv0_, conv1_;
  std::shared_ptr<Linear<T, D>> fc_;
  Var<T, D> last_;
};

struct InceptionV3Options {
  std::int64_t num_classes = 1000;
  bool aux_logits = true;
  double dropout = 0.5;
};

// Input [N, 3, 299, 299] (no transform_input). forward returns the main logits [N, num_classes];
// with aux_logits, a forward in training mode also leaves the auxiliary logits in aux_logits()
// (add them to the loss, torchvision uses weight 0.4). They stay until the next forward, which
// keeps their graph alive.
template <class T = float, class D = Cpu>
class InceptionV3 : public Sequential<T, D> {
 public:
  explicit InceptionV3(InceptionV3Options options = {}) {
    auto conv = [](std::int64_t in, std::int64_t out, std::int64_t kernel, const Conv2dOptions& o = {}) {
      return make<BasicConv2d<T, D>>(in, out, kernel, kernel, o);
    };
    this->push_back("Conv2d_1a_3x3", conv(3, 32, 3, Conv2dOptions::square(2)));
    this->push_back("Conv2d_2a_3x3", conv(32, 32, 3));
    this->push_back("Conv2d_2b_3x3", conv(32, 64, 3, Conv2dOptions::square(1, 1)));
    this->push_back("maxpool1", make<MaxPool2d<T, D>>(3, 2));
    this->push_back("Conv2d_3b_1x1", conv(64, 80, 1));
    this->push_back("Conv2d_4a_3x3", conv(80, 192, 3));
    this->push_back("maxpool2", make<MaxPool2d<T, D>>(3, 2));
    this->push_back("Mixed_5b", make<InceptionA<T, D>>(192, 32));
    this->push_back("Mixed_5c", make<InceptionA<T, D>>(256, 64));
    this->push_back("Mixed_5d", make<InceptionA<T, D>>(288, 64));
    this->push_back("Mixed_6a", make<InceptionB<T, D>>(288));
    this->push_back("Mixed_6b", make<InceptionC<T, D>>(768, 128));
    this->push_back("Mixed_6c", make<InceptionC<T, D>>(768, 160));
    this->push_back("Mixed_6d", make<InceptionC<T, D>>(768, 160));
    this->push_back("Mixed_6e", make<InceptionC<T, D>>(768, 192));
    if (options.aux_logits) {
      aux_ = make<InceptionAux<T, D>>(768, options.num_classes);
      this->push_back("AuxLogits", aux_);
    }
    this->push_back("Mixed_7a", make<InceptionD<T, D>>(768));
    this->push_back("Mixed_7b", make<InceptionE<T, D>>(1280));
    this->push_back("Mixed_7c", make<InceptionE<T, D>>(2048));
    this->push_back("avgpool", make<AdaptiveAvgPool2d<T, D>>(1));
    this->push_back("dropout", make<Dropout<T, D>>(options.dropout));
    this->push_back("flatten", make<Flatten<T, D>>(1));
    auto fc = make<Linear<T, D>>(2048, options.num_classes);
    init::on_host(fc->weight.value(), [](Tensor<T>& w) { init::trunc_normal(w, 0.0, 0.1, -2.0, 2.0); });
    this->push_back("fc", fc);
  }

  // The auxiliary logits of the last forward in training mode; undefined without the aux head,
  // in eval mode, or before any forward.
  Var<T, D> aux_logits() const { return aux_ ? aux_->last_logits() : Var<T, D>(); }

 private:
  std::shared_ptr<InceptionAux<T, D>> aux_;
};

template <class T = float, class D = Cpu>
std::shared_ptr<InceptionV3<T, D>> inception_v3(InceptionV3Options options = {}) {
  return std::make_shared<InceptionV3<T, D>>(options);
}

}  // namespace ptrain

PTRAIN_PREBUILT_MODELS_FD(ptrain::BasicConv2d)
PTRAIN_PREBUILT_MODELS_FD(ptrain::InceptionA)
PTRAIN_PREBUILT_MODELS_FD(ptrain::InceptionB)
PTRAIN_PREBUILT_MODELS_FD(ptrain::InceptionC)
PTRAIN_PREBUILT_MODELS_FD(ptrain::InceptionD)
PTRAIN_PREBUILT_MODELS_FD(ptrain::InceptionE)
PTRAIN_PREBUILT_MODELS_FD(ptrain::InceptionAux)
PTRAIN_PREBUILT_MODELS_FD(ptrain::InceptionV3)
