// A scaling model past this machine: latency and bandwidth (alpha-beta) per collective, fitted on
// this machine, checked against measured data-parallel step times, then stated link figures put
// in their place to predict step time and efficiency at 8 to 1,024 GPUs.
//
//   bench_scaling_model measure [LINK]  under `mpiexec -n N` (bench/run_scaling_model.sh: N = 1..4
//                                        over shared memory, LINK shm; 2 network-namespace hosts
//                                        over TCP, LINK tcp)
//   bench_scaling_model predict FILE    one process: reads the measure lines from FILE
//
// measure, per N:
//   bench=scaling_collective link=L ranks=N op=allreduce|reduce_scatter|all_gather|send_recv
//       bytes=B seconds=T   the median over repeats of the slowest rank's time (MpiComm's
//       collectives; send_recv: half a ping-pong between ranks 0 and 1, the others asleep)
//   bench=scaling_fit link=L ranks=N op=... alpha_us=... bandwidth_gbps=... steps=... volume=...
//       least squares (relative) of T = steps x alpha + volume x B / bandwidth over the sizes, with
//       the ring algorithms' counts: allreduce steps 2(N-1), volume 2(N-1)/N; reduce-scatter and
//       all-gather (B the whole buffer) N-1 and (N-1)/N; send/recv 1 and 1.
//   bench=scaling_step link=shm ranks=N kind=data_parallel|compute seconds=T  (shm only) a
//       4 x Linear(1024, 1024) fp32 MLP (4,198,400 parameters, 16.8 MB of gradients), 32 rows a
//       rank, SGD: DataParallel<MpiAllreduce> steps, and (kind=compute) the same steps without
//       DataParallel on every rank at once; medians of the slowest rank over PTRAIN_BENCH_STEPS
//       (default 6) after 2 warm-ups.
//
// predict:
//   bench=scaling_check ranks=N measured_s=... predicted_s=... error_pct=...
//       predicted = the 1-rank compute time x max(1, N / cores) (one thread a rank; N ranks share
//       this machine's cores) + the fitted allreduce of the gradients' bytes at N. No overlap is
//       assumed: with every core busy computing there is none to progress MPI on. Also
//       predicted_nrank_compute_s: the compute time measured at N ranks + the same allreduce.
//   bench=scaling_predict model=resnet50|transformer_lm strategy=data_parallel|zero1|zero2|zero3|
//       data_x_pipeline gpus=G step_ms=... comm_ms=... efficiency=...   on A100 nodes (below)
//   bench=scaling_published ... beside bench=scaling_vs_published ...: the model on the
//       publications' hardware next to their reported figures.
//
// The model (per step, Ψ parameters, W bytes a gradient/parameter element on the wire, compute T
// = T_f + T_b with T_b = 2/3 T; a ring over R ranks moves 2(R-1)/R x S for an allreduce, (R-1)/R x S
// for a reduce-scatter or an all-gather, through bandwidth b, with latency 2(g-1)a_intra +
// 2(R/g-1)a_inter (allreduce; half for the others): one ring step per GPU inside a node, one per
// node between them, as NCCL's rings cross each node once):
//   data_parallel  T_f + max(T_b, AR(WΨ))                 gradients reduced during backward
//   zero1          T_f + max(T_b, AR(WΨ)) + AG(WΨ)        then the stepped parameters gathered
//   zero2          T_f + max(T_b, RS(WΨ)) + AG(WΨ)
//   zero3          max(T_f, AG(WΨ)) + max(T_b, AG(WΨ) + RS(WΨ))  parameters gathered for forward
//                  and again for backward, overlapped with compute
//   data_x_pipeline S = 4 stages inside a node (NVLink), M = 4S micro-batches, each replica S x the
//                  per-GPU batch: (M + S - 1)(T/M + 2 p2p(micro-batch activations)) + AR(WΨ/S)
//                  over the N/S replicas of a stage (the S stages' rings share the node's NICs)
// Efficiency = T / step: the per-GPU throughput against one GPU's (weak scaling, as both papers);
// efficiency_no_overlap = T / (T + every collective), the bound where nothing overlaps.
// Bandwidth between nodes b = min(intra-node, NICs a node x NIC) (NCCL runs one ring per NIC).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ptrain/models/resnet.hpp>
#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/mpi.hpp>

#include "mpi_timing.hpp"

namespace {

using namespace ptrain::bench;  // median, env_int, sleep_at_barrier, slowest

using Clock = std::chrono::steady_clock;

// The ring algorithms' step and volume counts (volume: in units of the whole buffer's bytes).
struct Counts {
  double steps, volume;
};
Counts counts(const std::string& op, int n) {
  const double r = n;
  if (op == "allreduce") return {2 * (r - 1), 2 * (r - 1) / r};
  if (op == "send_recv") return {1, 1};
  return {r - 1, (r - 1) / r};  // reduce_scatter, all_gather
}

struct Fit {
  double alpha = 0, bandwidth = 0;  // seconds, bytes/s
  double time(const std::string& op, int n, double bytes) const {
    const Counts c = counts(op, n);
    return c.steps * alpha + c.volume * bytes / bandwidth;
  }
};

// Least squares of t = steps * alpha + volume * bytes * beta over the points (steps, volume fixed by
// op and n), each point weighted by 1/t^2 (relative errors: the 4 KB point sets alpha, the 16 MB
// ones beta): t = a + b * bytes, alpha = a / steps, 1/beta = volume / b. A negative intercept
// (latency under the noise) is taken as 0.
Fit fit(const std::string& op, int n, const std::vector<std::pair<double, double>>& points) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    const double w = 1 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx), a = (sy - b * sx) / sw;
  const Counts c = counts(op, n);
  return {std::max(a, 0.0) / c.steps, c.volume / b};
}

// ---------------------------------------------------------------------------------------------
// measure

void measure_collectives(ptrain::MpiComm& world, const std::string& link) {
  const int n = world.size(), rank = world.rank();
  const std::vector<std::int64_t> floats{1 << 10, 1 << 14, 1 << 17, 1 << 19, 1 << 21, 1 << 22};
  const std::vector<std::string> ops{"allreduce", "reduce_scatter", "all_gather", "send_recv"};
  for (const std::string& op : ops) {
    std::vector<std::pair<double, double>> points;
    for (std::int64_t count : floats) {
      const std::int64_t whole = count / n * n;  // divisible into blocks
      std::vector<float> buffer(static_cast<std::size_t>(whole), 1.0f), block(static_cast<std::size_t>(whole / n));
      const int repeats = count >= (1 << 21) ? 5 : 15;
      std::vector<double> seconds;
      for (int rep = 0; rep <= repeats; ++rep) {
        world.barrier();
        const auto start = Clock::now();
        if (op == "allreduce") {
          world.allreduce_sum(std::span<float>(buffer));
        } else if (op == "reduce_scatter") {
          world.reduce_scatter_sum(std::span<const float>(buffer), std::span<float>(block));
        } else if (op == "all_gather") {
          world.allgather(std::span<const float>(block), std::span<float>(buffer));
        } else if (rank == 0) {  // send_recv: a ping-pong, half of it
          MPI_Send(buffer.data(), static_cast<int>(whole), MPI_FLOAT, 1, 1, world.handle());
          MPI_Recv(buffer.data(), static_cast<int>(whole), MPI_FLOAT, 1, 1, world.handle(), MPI_STATUS_IGNORE);
        } else if (rank == 1) {
          MPI_Recv(buffer.data(), static_cast<int>(whole), MPI_FLOAT, 0, 1, world.handle(), MPI_STATUS_IGNORE);
          MPI_Send(buffer.data(), static_cast<int>(whole), MPI_FLOAT, 0, 1, world.handle());
        }
        double mine = std::chrono::duration<double>(Clock::now() - start).count();
        if (op == "send_recv") {  // the others sleep meanwhile
          mine = rank > 1 ? 0 : mine / 2;
          sleep_at_barrier(world.handle());
        }
        const double t = slowest(mine, world.handle());
        if (rep > 0) seconds.push_back(t);
      }
      const double bytes = static_cast<double>(whole) * sizeof(float);
      const double t = median(seconds);
      points.emplace_back(bytes, t);
      if (rank == 0)
        std::printf("bench=scaling_collective link=%s ranks=%d op=%s bytes=%.0f seconds=%.6e\n", link.c_str(), n,
                    op.c_str(), bytes, t);
    }
    const Fit f = fit(op, n, points);
    const Counts c = counts(op, n);
    if (rank == 0)
      std::printf("bench=scaling_fit link=%s ranks=%d op=%s alpha_us=%.2f bandwidth_gbps=%.3f steps=%.0f volume=%.3f\n",
                  link.c_str(), n, op.c_str(), f.alpha * 1e6, f.bandwidth / 1e9, c.steps, c.volume);
    std::fflush(stdout);
  }
}

using Mlp = ptrain::Sequential<float>;
constexpr std::int64_t mlp_width = 1024, mlp_layers = 4, mlp_rows = 32;

std::shared_ptr<Mlp> make_mlp() {
  ptrain::manual_seed(1);
  auto net = std::make_shared<Mlp>();
  for (std::int64_t layer = 0; layer < mlp_layers; ++layer) {
    net->push_back(ptrain::make<ptrain::Linear<float>>(mlp_width, mlp_width));
    net->push_back(ptrain::make<ptrain::ReLU<float>>());
  }
  return net;
}

template <class Trainer>
double median_step(Trainer& trainer, ptrain::MpiComm& world, const ptrain::Tensor<float>& x,
                   const std::vector<std::int64_t>& y, int steps) {
  std::vector<double> seconds;
  for (int step = 0; step < steps + 2; ++step) {
    world.barrier();
    const auto start = Clock::now();
    trainer.train_step(x, y);
    const double t = slowest(std::chrono::duration<double>(Clock::now() - start).count(), world.handle());
    if (step >= 2) seconds.push_back(t);
  }
  return median(seconds);
}

void measure_steps(ptrain::MpiComm& world) {
  const int steps = env_int("PTRAIN_BENCH_STEPS", 6);
  ptrain::Rng rng(7 + static_cast<std::uint64_t>(world.rank()));
  ptrain::Tensor<float> x({mlp_rows, mlp_width});
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(rng.normal());
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < mlp_rows; ++i) y.push_back(static_cast<std::int64_t>(rng.below(mlp_width)));
  const ptrain::TrainerOptions quiet{.progress_bar = false, .print_epochs = false};
  const auto sgd = [](Mlp& net) {
    return std::make_shared<ptrain::Sgd<float>>(net.parameters(), ptrain::SgdOptions{.lr = 0.01});
  };
  double compute = 0, data_parallel = 0;
  {
    auto net = make_mlp();
    ptrain::Trainer<Mlp> trainer(net, sgd(*net), quiet);
    compute = median_step(trainer, world, x, y, steps);
  }
  {
    using DP = ptrain::DataParallel<ptrain::MpiAllreduce>;
    auto net = make_mlp();
    ptrain::Trainer<Mlp, DP> trainer(net, sgd(*net), quiet, DP(world));
    data_parallel = median_step(trainer, world, x, y, steps);
  }
  const double params = static_cast<double>(make_mlp()->parameter_count());
  if (world.rank() == 0) {
    std::printf("bench=scaling_step link=shm ranks=%d kind=compute rows_per_rank=%lld parameters=%.0f seconds=%.6e\n",
                world.size(), static_cast<long long>(mlp_rows), params, compute);
    std::printf("bench=scaling_step link=shm ranks=%d kind=data_parallel rows_per_rank=%lld parameters=%.0f "
                "gradient_bytes=%.0f seconds=%.6e\n",
                world.size(), static_cast<long long>(mlp_rows), params, params * 4, data_parallel);
    std::fflush(stdout);
  }
}

// ---------------------------------------------------------------------------------------------
// predict

using Fields = std::map<std::string, std::string>;

Fields parse(const std::string& line) {
  Fields f;
  std::istringstream in(line);
  for (std::string word; in >> word;)
    if (const auto eq = word.find('='); eq != std::string::npos) f[word.substr(0, eq)] = word.substr(eq + 1);
  return f;
}

// One cluster: g GPUs a node, NVLink (or PCIe) inside, NICs between nodes.
struct Cluster {
  const char* name;
  int gpus_per_node;
  double intra_bandwidth, intra_alpha;  // bytes/s a direction a GPU, seconds a ring step
  double nic_bandwidth, nics_per_node, inter_alpha;
};

// Public link figures (A100 nodes as DGX A100):
// - NVLink 3: 600 GB/s total a GPU (12 links x 50 GB/s), 300 GB/s each direction: NVIDIA A100
//   Tensor Core GPU datasheet / architecture whitepaper (2020).
// - InfiniBand HDR: 200 Gb/s = 25 GB/s a port; DGX A100 has 8 single-port ConnectX-6 HDR adapters
//   for the compute fabric, one a GPU: NVIDIA DGX A100 datasheet (2020).
// - Latency a ring step: 5 us inside a node, 10 us between nodes. An assumption of the order of
//   NCCL's small-message allreduce latencies, not a datasheet figure.
constexpr Cluster a100{"a100_nvlink3_hdr_ib", 8, 300e9, 5e-6, 25e9, 8, 10e-6};
// The Horovod paper's cluster (Sergeev & Del Balso 2018, arXiv:1802.05799, section 6): 128
// servers of 4 Pascal GPUs, a 25 Gbit/s RoCE network (3.125 GB/s a server). Inside a server PCIe 3
// x16, 16 GB/s (16 GB/s is PCIe 3.0 x16's nominal rate; the paper does not state the topology).
constexpr Cluster horovod_cluster{"horovod_p100_25gbe_roce", 4, 16e9, 10e-6, 3.125e9, 1, 20e-6};
// The PyTorch DDP paper's cluster (Li et al. 2020, "PyTorch Distributed: Experiences on
// Accelerating Data Parallel Training", VLDB 13(12), arXiv:2006.15704, section 5): 32 servers of 8
// V100 GPUs connected by NVLink, servers by a 100 Gbit/s NIC (12.5 GB/s). NVLink 2 on V100: 300
// GB/s total, 150 GB/s each direction (NVIDIA V100 datasheet).
constexpr Cluster ddp_cluster{"ddp_v100_nvlink2_100gb", 8, 150e9, 5e-6, 12.5e9, 1, 10e-6};

// A ring over r ranks placed `per_node` a node (r / per_node nodes), sharing the node's NICs with
// `sharing` other rings.
struct Ring {
  const Cluster& c;
  int r, per_node;
  double sharing = 1;
  double bandwidth() const {
    if (r <= per_node) return c.intra_bandwidth;
    return std::min(c.intra_bandwidth, c.nics_per_node * c.nic_bandwidth / sharing);
  }
  double latency_steps_alpha() const {  // an allreduce's; halved for reduce-scatter and all-gather
    const int inside = std::min(r, per_node), nodes = (r + per_node - 1) / per_node;
    return 2 * (inside - 1) * c.intra_alpha + 2 * (nodes - 1) * c.inter_alpha;
  }
  double allreduce(double bytes) const {
    if (r <= 1) return 0;
    return latency_steps_alpha() + 2.0 * (r - 1) / r * bytes / bandwidth();
  }
  double half(double bytes) const {  // reduce-scatter or all-gather of a whole buffer of `bytes`
    if (r <= 1) return 0;
    return latency_steps_alpha() / 2 + 1.0 * (r - 1) / r * bytes / bandwidth();
  }
};

struct Workload {
  const char* name;
  double parameters;
  double wire_bytes;         // a gradient (and a parameter) element on the wire
  double compute_s;          // forward + backward + step of the per-GPU batch on one GPU
  double activation_bytes;   // a pipeline cut's activations for the per-GPU batch
};

struct Prediction {
  double step = 0, comm = 0;
  double no_overlap = 0;  // compute, then every collective: the pessimistic bound
};

Prediction predict(const Cluster& c, const Workload& w, const std::string& strategy, int gpus) {
  const double t = w.compute_s, tf = t / 3, tb = t - tf, bytes = w.parameters * w.wire_bytes;
  const Ring ring{c, gpus, c.gpus_per_node};
  Prediction p;
  if (strategy == "data_parallel") {
    p.comm = ring.allreduce(bytes);
    p.step = tf + std::max(tb, p.comm);
  } else if (strategy == "zero1") {
    p.comm = ring.allreduce(bytes) + ring.half(bytes);
    p.step = tf + std::max(tb, ring.allreduce(bytes)) + ring.half(bytes);
  } else if (strategy == "zero2") {
    p.comm = 2 * ring.half(bytes);
    p.step = tf + std::max(tb, ring.half(bytes)) + ring.half(bytes);
  } else if (strategy == "zero3") {
    p.comm = 3 * ring.half(bytes);
    p.step = std::max(tf, ring.half(bytes)) + std::max(tb, 2 * ring.half(bytes));
  } else {  // data_x_pipeline
    const int stages = 4, micro = 4 * stages;
    const int replicas = std::max(1, gpus / stages);
    const Ring replica_ring{c, replicas, std::max(1, c.gpus_per_node / stages), static_cast<double>(stages)};
    const double micro_bytes = w.activation_bytes / micro * stages;  // a replica's batch is S x the per-GPU one
    const double p2p = c.intra_alpha + micro_bytes / c.intra_bandwidth;
    const double reduce = replica_ring.allreduce(bytes / stages);
    p.comm = (micro + stages - 1) * 2 * p2p + reduce;
    p.step = p.no_overlap = (micro + stages - 1) * (t / micro + 2 * p2p) + reduce;
    return p;  // nothing overlapped already
  }
  p.no_overlap = t + p.comm;
  return p;
}

int predict_main(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "bench_scaling_model predict: cannot read %s\n", path.c_str());
    return 1;
  }
  std::map<std::pair<std::string, int>, std::map<std::string, Fit>> fits;  // (link, ranks) -> op -> fit
  std::map<int, double> compute, data_parallel;
  double gradient_bytes = 0;
  for (std::string line; std::getline(in, line);) {
    Fields f = parse(line);
    if (f["bench"] == "scaling_fit") {
      fits[{f["link"], std::stoi(f["ranks"])}][f["op"]] =
          Fit{std::stod(f["alpha_us"]) * 1e-6, std::stod(f["bandwidth_gbps"]) * 1e9};
    } else if (f["bench"] == "scaling_step") {
      const int n = std::stoi(f["ranks"]);
      (f["kind"] == "compute" ? compute : data_parallel)[n] = std::stod(f["seconds"]);
      if (f.count("gradient_bytes")) gradient_bytes = std::stod(f["gradient_bytes"]);
    }
  }
  // The fitted figures, once more, side by side.
  for (const auto& [key, ops] : fits)
    for (const auto& [op, f] : ops)
      std::printf("bench=scaling_fitted link=%s ranks=%d op=%s alpha_us=%.2f bandwidth_gbps=%.3f\n",
                  key.first.c_str(), key.second, op.c_str(), f.alpha * 1e6, f.bandwidth / 1e9);

  // The model against this machine's data-parallel steps at 2-4 ranks.
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  double worst = 0;
  if (compute.count(1))
    for (const auto& [n, measured] : data_parallel) {
      if (n < 2 || !fits.count({"shm", n})) continue;
      const double reduce = fits[{"shm", n}]["allreduce"].time("allreduce", n, gradient_bytes);
      const double predicted = compute[1] * std::max(1.0, n / cores) + reduce;
      const double error = (predicted - measured) / measured * 100;
      worst = std::max(worst, std::abs(error));
      // The same with the compute time measured at N ranks (all busy, no communication): what the
      // machine's sharing costs beyond N / cores (other users, memory bandwidth) left out.
      const double shared = compute.count(n) ? compute[n] + reduce : 0.0;
      std::printf("bench=scaling_check ranks=%d cores=%.0f compute_1rank_s=%.4f compute_nrank_s=%.4f allreduce_s=%.4f "
                  "predicted_s=%.4f measured_s=%.4f error_pct=%.1f predicted_nrank_compute_s=%.4f "
                  "error_nrank_compute_pct=%.1f\n",
                  n, cores, compute[1], compute.count(n) ? compute[n] : 0.0, reduce, predicted, measured, error, shared,
                  (shared - measured) / measured * 100);
    }
  std::printf("bench=scaling_check_summary worst_abs_error_pct=%.1f\n", worst);

  // Predictions on A100 nodes.
  // Compute times (stated figures, not measured here: this CPU is ~1000x slower than the GPUs):
  // - ResNet-50: 2,600 images/s on one A100 (AMP, channels-last, timm's benchmark.py; reported in
  //   github.com/huggingface/pytorch-image-models/issues/1491), batch 256 a GPU: 98.5 ms a step.
  //   Activations at a pipeline cut (after layer2: 28 x 28 x 512) in bf16: 0.80 MB an image.
  // - The transformer LM (the tutorial model: emsize 256, nhid 1024, 4 layers, 28,782 tokens, its
  //   parameters counted below): 6 x parameters x tokens FLOPs at 40% of the A100's 312 TFLOP/s
  //   dense bf16 (datasheet peak; 40% an assumed utilisation), 128 sequences of 35 tokens a GPU.
  //   A cut's activations: 35 x 256 bf16 a sequence.
  const double resnet_params = static_cast<double>(ptrain::resnet50<float>()->parameter_count());
  const double lm_params = static_cast<double>(
      ptrain::TransformerLM<float>({.ntoken = 28782, .ninp = 256, .nhead = 8, .nhid = 1024, .nlayers = 4})
          .parameter_count());
  const double lm_tokens = 128.0 * 35;
  const std::vector<Workload> workloads{
      {"resnet50", resnet_params, 2, 256 / 2600.0, 256 * 28.0 * 28 * 512 * 2},
      {"transformer_lm", lm_params, 2, 6 * lm_params * lm_tokens / (0.4 * 312e12), 128 * 35.0 * 256 * 2}};
  for (const Workload& w : workloads)
    std::printf("bench=scaling_workload model=%s parameters=%.0f wire_bytes=%.0f compute_ms=%.2f cluster=%s\n", w.name,
                w.parameters, w.wire_bytes, w.compute_s * 1e3, a100.name);
  const std::vector<std::string> strategies{"data_parallel", "zero1", "zero2", "zero3", "data_x_pipeline"};
  for (const Workload& w : workloads)
    for (const std::string& s : strategies)
      for (int gpus = 8; gpus <= 1024; gpus *= 2) {
        const Prediction p = predict(a100, w, s, gpus);
        std::printf("bench=scaling_predict model=%s strategy=%s gpus=%d step_ms=%.2f comm_ms=%.2f efficiency=%.3f "
                    "efficiency_no_overlap=%.3f\n",
                    w.name, s.c_str(), gpus, p.step * 1e3, p.comm * 1e3, w.compute_s / p.step,
                    w.compute_s / p.no_overlap);
      }

  // The publications, and the model on their hardware.
  // Horovod (Sergeev & Del Balso 2018, arXiv:1802.05799, section 6 and its figure of images/s on up
  // to 512 GPUs): "90% scaling efficiency for both Inception V3 and ResNet-101, and 68% scaling
  // efficiency for VGG-16", TensorFlow, fp32 gradients, 128 servers x 4 Pascal GPUs, 25 Gbit/s RoCE.
  // The paper gives no single-GPU rates; assumed here (P100, batch 64, tf_cnn_benchmarks' order of
  // magnitude): Inception V3 140 images/s, ResNet-101 130 images/s.
  // PyTorch DDP (Li et al. 2020, arXiv:2006.15704, abstract and section 5): "near-linear scalability
  // using 256 GPUs" for ResNet50 and BERT, NCCL, fp32 gradients, 32 servers x 8 V100 (NVLink),
  // 100 Gbit/s between servers; the figures are plots (per-iteration latency), not a table: the
  // "near-linear" claim is read here as efficiency 0.9. Assumed single-V100 rates (not from the
  // paper): ResNet-50 fp32 370 images/s at batch 32 a GPU; BERT-base (110 M parameters; the paper's
  // BERT size is not restated here) at 32 sequences of 128 tokens a GPU, 6 x parameters x tokens
  // FLOPs at 50% of the V100's 15.7 TFLOP/s fp32 peak.
  struct Published {
    const char* source;
    const Cluster& cluster;
    Workload w;
    int gpus;
    double efficiency;
  };
  const std::vector<Published> published{
      {"horovod_2018", horovod_cluster, {"inception_v3", 23.8e6, 4, 64 / 140.0, 0}, 512, 0.90},
      {"horovod_2018", horovod_cluster, {"resnet101", 44.5e6, 4, 64 / 130.0, 0}, 512, 0.90},
      {"horovod_2018", horovod_cluster, {"vgg16", 138.4e6, 4, 64 / 150.0, 0}, 512, 0.68},
      {"pytorch_ddp_2020", ddp_cluster, {"resnet50", resnet_params, 4, 32 / 370.0, 0}, 256, 0.90},
      {"pytorch_ddp_2020", ddp_cluster, {"bert_base", 110e6, 4, 6 * 110e6 * 32 * 128 / (0.5 * 15.7e12), 0}, 256, 0.90}};
  for (const Published& p : published) {
    const Prediction with = predict(p.cluster, p.w, "data_parallel", p.gpus);
    std::printf("bench=scaling_vs_published source=%s cluster=%s model=%s gpus=%d published_efficiency=%.2f "
                "predicted_efficiency=%.3f predicted_efficiency_no_overlap=%.3f compute_ms=%.1f allreduce_ms=%.1f\n",
                p.source, p.cluster.name, p.w.name, p.gpus, p.efficiency, p.w.compute_s / with.step,
                p.w.compute_s / with.no_overlap, p.w.compute_s * 1e3, with.comm * 1e3);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "measure";
  if (mode == "predict") return predict_main(argc > 2 ? argv[2] : "/dev/stdin");
  const std::string link = argc > 2 ? argv[2] : "shm";
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    if (world.size() > 1) measure_collectives(world, link);
    if (link == "shm") measure_steps(world);
  });
}
