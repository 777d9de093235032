#pragma once
// Pipeline<M, Schedule>: the model, a Sequential, is cut into S stages on S ranks and every batch
// into M micro-batches (PipelineOptions::micro_batches sets another count at run time); activations
// flow forward and gradients back with non-blocking messages, the task's loss and metrics are computed on the last stage, and gradients add up over the micro-batches so that a
// step equals the full batch's step (as torchgpipe, FairScale Pipe and DeepSpeed do).
//
//   MpiComm world(session);
//   Trainer<Net, Pipeline<4, OneFOneB>> t(model, sgd, {}, Pipeline<4, OneFOneB>(world));
//   Trainer<Net, DataParallel<MpiAllreduce>, Pipeline<4>> h(model, sgd, {},
//       DataParallel<MpiAllreduce>(world), Pipeline<4>(world, {.stages = 2}));
//
// With more ranks than stages the world is a grid: stage = rank % S, replica = rank / S; the S
// consecutive ranks of a replica form one pipeline and DataParallel averages each stage's
// gradients over the ranks that hold that stage (docs/policies.md, "pipeline grid").
//
// The model may be on any device. Messages stay in its memory: an MpiComm for a model in host
// memory (Cpu, HostEmulated), an NcclComm for one on a GPU (each rank's stage on its own GPU;
// the first stage takes the batch to its device a micro-batch at a time). Activations go up on one
// communicator and gradients down on another, both in micro-batch order, so a communicator
// without tags that runs its messages in order on one stream (NCCL) never has a message wait
// behind one going the other way.
//
// A parameter that layers on several stages use (a layer applied at places on different stages, a
// weight tied to one on another stage) has a copy on each of them, whose gradients are summed over
// those stages before every step (detail/stage_shared_parameters.hpp; after DataParallel's average
// over the replicas, before MixedPrecision's unscaling), so the stages train it as the serial model
// does; clip_grad_norm counts it once. gather_model() brings every stage's trained layers to rank 0.
//
// With a timeline active (core/timeline.hpp) each micro-batch's forward and backward, each send
// (posted to seen complete), each blocking receive and the step's closing wait for its sends
// (idle) are spans.
#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdio>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/backward.hpp"
#include "ptrain/comm/any_comm.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/core/timeline.hpp"
#include "ptrain/nn/sequential.hpp"
#include "ptrain/parallel/detail/pipeline_partition.hpp"
#include "ptrain/parallel/detail/pipeline_schedule.hpp"
#include "ptrain/parallel/detail/stage_shared_parameters.hpp"
#include "ptrain/parallel/checkpoint_part.hpp"
#include "ptrain/parallel/detail/uneven_inputs.hpp"
#include "ptrain/parallel/pipeline_grid.hpp"
#include "ptrain/tasks/epoch_totals.hpp"
#include "ptrain/tasks/task.hpp"

namespace ptrain {

struct PipelineOptions {
  int stages = 0;                       // 0: one stage per rank of the world
  std::vector<std::size_t> cut_points;  // first layer of stages 1..S-1; empty: balance parameters
  bool checkpoint = false;              // keep only each micro-batch's input; recompute in backward
  int micro_batches = 0;                // micro-batches per batch; 0: the type's M (a flag: --chunks)
  bool print_plan = true;               // rank 0 prints the grid and the split at setup
  // What the ranks do when their loaders give different numbers of batches in an epoch
  // (detail/uneven_inputs.hpp): train the fewest, or end every rank.
  UnevenInputs uneven_inputs = UnevenInputs::shortest;
  // Read by Pipeline<M, RuntimeSchedule>; with a schedule in the type it must be left at gpipe.
  ScheduleKind schedule = ScheduleKind::gpipe;
};

// What the last step measured on this stage.
struct PipelineStepStats {
  int peak_live_micro_batches = 0;       // micro-batches whose activations were held at once
  std::int64_t peak_activation_bytes = 0;  // bytes in the model's memory above the step's start, less gradients
  double wait_seconds = 0;               // blocked on messages from the neighbouring stages
  double step_seconds = 0;
};

template <int MicroBatches, class Schedule = GPipe>
class Pipeline {
  static_assert(MicroBatches >= 1, "Pipeline<M>: M, the number of micro-batches per batch, must be at least 1");
  static_assert(PipelineSchedule<Schedule>,
                "Pipeline<M, Schedule>: Schedule must be ptrain::GPipe, ptrain::OneFOneB or ptrain::RuntimeSchedule");

 public:
  static constexpr int micro_batches = MicroBatches;
  using schedule = Schedule;
  // Each stage runs its own part of the model (train/policy.hpp, SplitsModel).
  static constexpr bool splits_model = true;

  // Not for C = Pipeline: nvcc would test Communicator<Pipeline> inside Pipeline's own move.
  template <class C>
    requires(!std::same_as<std::remove_cvref_t<C>, Pipeline> && Communicator<C>)
  explicit Pipeline(C& world, PipelineOptions options = {}) : Pipeline(AnyComm::borrow(world), std::move(options)) {}

  // Every rank checks the grid before the collective splits, so a bad one fails everywhere.
  Pipeline(AnyComm world, PipelineOptions options)
      : options_(std::move(options)),
        world_rank_(world.rank()),
        grid_(make_grid(world.size(), options_.stages)),
        up_(world.split(grid_.replica_of(world_rank_), grid_.stage_of(world_rank_))),
        down_(world.split(grid_.replica_of(world_rank_), grid_.stage_of(world_rank_))),
        world_(std::move(world)) {
    check(options_.micro_batches >= 0, "Pipeline: micro_batches ", options_.micro_batches,
          " (expected 0 for the type's M, or at least 1)");
    check(std::same_as<Schedule, RuntimeSchedule> || options_.schedule == ScheduleKind::gpipe,
          "Pipeline<M, Schedule>: PipelineOptions::schedule is read only by Pipeline<M, RuntimeSchedule>; the type "
          "already names the schedule");
  }

  int stage() const { return grid_.stage_of(world_rank_); }
  int stages() const { return grid_.stages; }
  int replica() const { return grid_.replica_of(world_rank_); }
  int replicas() const { return grid_.replicas; }
  bool is_first_stage() const { return stage() == 0; }
  bool is_last_stage() const { return stage() == stages() - 1; }
  const PipelineStepStats& last_step() const { return stats_; }

  // Trainer point: the grid, for the data-parallel policy to split its communicator by stage.
  PipelineGrid pipeline_grid() const { return grid_; }

  // Trainer point: this rank's stage of the model (its layers, under their names in the whole
  // model); the other points and the other policies work on it.
  template <class Model>
  Module<typename Model::scalar_type, typename Model::device_type>& partition(Model& model, bool data_parallel) {
    using T = typename Model::scalar_type;
    using D = typename Model::device_type;
    static_assert(std::derived_from<Model, Sequential<T, D>>,
                  "Pipeline: the model must be a ptrain::Sequential (or derive from one); a pipeline cuts it "
                  "between its top-level layers");
    check(std::string(up_.memory_name()) == memory_of_t<D>::name, "Pipeline: the model is on ", D::name,
          " but the pipeline's communicator moves ", up_.memory_name(), " memory; give the Pipeline ",
          std::string(memory_of_t<D>::name) == "cpu" ? "an MpiComm (or SelfComm)" : "an NcclComm",
          " for a model on ", D::name);
    check(grid_.replicas == 1 || data_parallel, "Pipeline: ", grid_.replicas * grid_.stages, " ranks make ",
          grid_.replicas, " copies of the ", grid_.stages,
          "-stage pipeline; add DataParallel to the Trainer to average their gradients, or use as many stages as ranks");
    std::vector<std::int64_t> parameters;
    for (const auto& [name, layer] : model.children()) parameters.push_back(layer->parameter_count());
    ranges_ = options_.cut_points.empty() ? detail::balanced_stages(parameters, grid_.stages)
                                          : detail::stages_at(options_.cut_points, model.size(), grid_.stages);
    auto local = std::make_shared<Sequential<T, D>>();
    const auto [begin, end] = ranges_[static_cast<std::size_t>(stage())];
    for (std::size_t i = begin; i < end; ++i) local->push_back(model.children()[i].first, model.children()[i].second);
    sharing_ = std::make_shared<detail::StageSharedParameters<T, D>>(model, ranges_, stage());
    if (options_.print_plan && world_rank_ == 0) print_plan(model, parameters);
    stage_module_ = local;
    return *local;
  }

  const std::vector<detail::StageRange>& stage_ranges() const { return ranges_; }
  // The parameters that several stages hold a copy of (after partition), with those stages.
  std::vector<detail::StageSharing::Shared> shared_parameters() const {
    return sharing_ ? sharing_->shared() : std::vector<detail::StageSharing::Shared>{};
  }

  // Trainer point: the gradients of the parameters that several stages hold summed over them.
  template <class T, class D>
  bool before_optimizer_step(Module<T, D>&) {
    if (sharing_ && !sharing_->shared().empty()) {
      const TimelineSpan span(active_timeline(), SpanKind::gradient_wait);
      sharing_->sum_gradients(up_);
    }
    return true;
  }

  // Trainer point: of the optimizer's parameters, those whose gradients this rank adds to the global
  // norm that clip_grad_norm clips to: a parameter several stages hold is counted on the first.
  template <class U, class D>
  std::vector<Var<U, D>> gradient_norm_parameters(std::vector<Var<U, D>> params) const {
    if (!sharing_ || sharing_->shared().empty()) return params;
    check(std::any_of(params.begin(), params.end(), [&](const Var<U, D>& p) { return sharing_->is_shared(p.node().get()); }),
          "Pipeline: clip_grad_norm counts the parameters that several stages share once, which needs an optimizer over "
          "the model's own parameters; this one steps others (MixedPrecision's masters?), so the norm cannot be taken");
    std::erase_if(params, [&](const Var<U, D>& p) { return !sharing_->counted_here(p.node().get()); });
    return params;
  }

  // Every stage's layers as trained, from the first replica, into the whole model on rank 0 (to
  // save it whole); every rank calls it. The model must be the one partitioned.
  template <class Model>
  void gather_model(Model& model) {
    using T = typename Model::scalar_type;
    using D = typename Model::device_type;
    if (replica() != 0) return;
    constexpr int tag = 0;
    for (int s = 1; s < stages(); ++s) {
      if (stage() != 0 && stage() != s) continue;
      Sequential<T, D> part;
      for (std::size_t i = ranges_[static_cast<std::size_t>(s)].begin; i < ranges_[static_cast<std::size_t>(s)].end; ++i)
        part.push_back(model.children()[i].first, model.children()[i].second);
      const auto move = [&]<class U>(Tensor<U, D>& t) {
        const auto n = static_cast<std::size_t>(t.numel());
        if (stage() == 0) up_.irecv(std::span<U>(t.data(), n), s, tag).wait();
        else up_.isend(std::span<const U>(t.data(), n), 0, tag).wait();
      };
      for (auto& [name, p] : part.named_parameters()) move(p.value());
      for (auto& [name, p] : part.named_float_parameters()) move(p.value());
      for (auto& [name, b] : part.named_buffers()) move(*b);
      for (auto& [name, b] : part.named_float_buffers()) move(*b);
    }
  }

  // Trainer point: the step's forwards and backwards in the schedule's order. before_backward(last)
  // runs before each backward; last is true for the one that ends the step (gradient reductions).
  // The first stage takes each micro-batch of the host batch to D with the Trainer's upload; every
  // stage gets the targets (the task cuts them into micro-batches; the last stage scores them).
  template <class T, class D, class TaskType, class BeforeBackward>
  EpochTotals forward_backward(Module<T, D>& local, const Tensor<T>& inputs,
                               const typename TaskType::target_type& targets, const TaskType& task, double loss_scale,
                               BeforeBackward&& before_backward, BatchUpload<D>& upload) {
    const auto start = Clock::now();
    Run<T, D, TaskType> run(*this, local, inputs, upload, targets, task, micro_batches_per_batch(), loss_scale);
    const auto actions = detail::stage_actions(schedule_kind(), stage(), stages(), run.pieces());
    int backwards_left = run.pieces();
    for (const auto& action : actions) {
      if (action.kind == detail::PipelineAction::forward) {
        run.forward(action.micro_batch, true);
      } else {
        before_backward(--backwards_left == 0);
        run.backward(action.micro_batch);
      }
    }
    run.finish();
    stats_ = run.stats;
    stats_.step_seconds = seconds_since(start);
    return run.totals;
  }

  // Trainer point: an evaluation batch through the stages, forward only, in one piece.
  template <class T, class D, class TaskType>
  EpochTotals evaluate_batch(Module<T, D>& local, const Tensor<T>& inputs,
                             const typename TaskType::target_type& targets, const TaskType& task,
                             BatchUpload<D>& upload) {
    NoGradGuard no_grad;
    Run<T, D, TaskType> run(*this, local, inputs, upload, targets, task, 1, 1.0);
    run.forward(0, false);
    run.finish();
    return run.totals;
  }

  // Trainer point: before each training epoch, the number of batches every rank of the world
  // trains, agreed from each rank's own count: a stage with a batch more than its neighbours would
  // wait for messages they never send.
  std::int64_t agree_steps(std::int64_t local_steps) {
    return steps_agreement_.agree(
        local_steps, world_.size(), [&](std::span<const double> mine, std::span<double> all) { world_.allgather(mine, all); },
        is_main());
  }

  // Trainer point: only the last stage computes the loss and the metrics; their sums come to every stage.
  void reduce(std::span<double> sums) { up_.allreduce_sum(sums); }

  bool is_main() const { return world_rank_ == 0; }

  // Trainer point: each stage saves its own layers, part `stage` of the pipeline's stages.
  CheckpointPart checkpoint_part() const { return {.index = stage(), .count = stages()}; }

 private:
  using Clock = std::chrono::steady_clock;
  static PipelineGrid make_grid(int world_size, int stages) {
    PipelineGrid grid;
    grid.stages = stages == 0 ? world_size : stages;
    check(grid.stages >= 1, "Pipeline: stages must be at least 1, got ", grid.stages);
    check(world_size % grid.stages == 0, "Pipeline: a world of ", world_size, " ranks cannot be cut into ",
          grid.stages, "-stage pipelines; the world size must be a multiple of the number of stages");
    grid.replicas = world_size / grid.stages;
    return grid;
  }
  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

  // Message tags per micro-batch: its activation's shape, the activation, the gradient.
  static constexpr int shape_tag(int i) { return 3 * i; }
  static constexpr int activation_tag(int i) { return 3 * i + 1; }
  static constexpr int gradient_tag(int i) { return 3 * i + 2; }
  static constexpr int micro_batch_of(int tag) { return tag / 3; }
  static constexpr std::size_t max_rank = 8;
  static constexpr std::int64_t header_size = max_rank + 1;  // the rank, then each extent

  // One step (or evaluation batch) on this stage; its tensors and messages are on D.
  template <class T, class D, class TaskType>
  struct Run {
    using Targets = typename TaskType::target_type;
    struct MicroBatch {
      Var<T, D> input, output, loss;
      bool live = false;
    };
    struct Outgoing {
      AnyRequest request;
      Tensor<T, D> tensor;
      Tensor<double, D> shape;
      int micro_batch = 0;
      double posted_us = -1;  // on the active timeline
    };

    Run(Pipeline& p, Module<T, D>& local, const Tensor<T>& inputs, BatchUpload<D>& upload, const Targets& targets,
        const TaskType& task, int pieces, double loss_scale)
        : p(p), local(local), inputs(inputs), upload(upload), task(task), loss_scale(loss_scale),
          baseline_bytes(held_bytes()) {
      // As torch.chunk: a batch smaller than M makes fewer micro-batches (every stage sees the same targets).
      const std::int64_t batch = task.rows(targets);
      check(batch > 0, "Pipeline: an empty batch");
      pieces = static_cast<int>(std::min<std::int64_t>(pieces, batch));
      micro.resize(static_cast<std::size_t>(pieces));
      if (p.is_first_stage())
        check(inputs.rank() >= 1 && inputs.size(0) == batch, "Pipeline: the batch has targets for ", batch,
              " rows but inputs of shape ", inputs.shape());
      // The rows that do not divide evenly go one each to the first micro-batches (20 in 8: 3, 3, 3, 3,
      // 2, 2, 2, 2): interleaved sizes (2, 3, 2, 3, ...) would pair a stage's larger micro-batches with
      // its neighbour's smaller ones at every 1F1B step, and each would wait on the other.
      const std::int64_t rows = batch / pieces, extra = batch % pieces;
      for (std::int64_t i = 0; i <= pieces; ++i) bounds.push_back(i * rows + std::min(i, extra));
      for (int i = 0; i < pieces; ++i) pieces_targets.push_back(task.slice(targets, bounds[i], bounds[i + 1]));
      batch_weight = task.loss_weight(targets);
    }

    int pieces() const { return static_cast<int>(micro.size()); }
    // The micro-batch's share of the batch's mean loss (its loss weight over the batch's), times the
    // Trainer's scale; the task applies it in float to the loss's gradient, so fp16 models take 65536 too.
    double weight_of(int i) const {
      return batch_weight > 0 ? task.loss_weight(targets_of(i)) / batch_weight * loss_scale : 0.0;
    }
    const Targets& targets_of(int i) const { return pieces_targets[static_cast<std::size_t>(i)]; }

    void forward(int i, bool training) {
      const TimelineSpan span(active_timeline(), SpanKind::forward, i);
      progress_sends();
      MicroBatch& m = micro[static_cast<std::size_t>(i)];
      m.input = p.is_first_stage() ? Var<T, D>(upload(inputs.slice(bounds[i], bounds[i + 1])))
                                   : Var<T, D>(receive_activation(i), training);
      Var<T, D> output;
      if (p.options_.checkpoint && training) {
        NoGradGuard no_grad;
        output = local.forward(m.input);
      } else {
        output = local.forward(m.input);
      }
      const bool keep_graph = training && !p.options_.checkpoint;
      if (p.is_last_stage()) {
        const Var<T, D> loss = task.loss(output, targets_of(i), weight_of(i));
        totals += batch_totals(task, output, targets_of(i), loss);
        if (keep_graph) m.loss = loss;
      } else {
        send(output.value(), i);
        if (keep_graph) m.output = output;
      }
      if (!training) m.input = {};
      m.live = training;
      int live = 0;
      for (const auto& mb : micro) live += mb.live ? 1 : 0;
      stats.peak_live_micro_batches = std::max(stats.peak_live_micro_batches, live);
      stats.peak_activation_bytes = std::max(stats.peak_activation_bytes, held_bytes() - baseline_bytes);
    }

    // Bytes alive in D's memory but for the parameters' gradients (allocated by the first
    // backward and kept): what the step's micro-batches and messages hold.
    std::int64_t held_bytes() const {
      std::int64_t gradients = 0;
      for (const auto& param : local.parameters())
        if (param.grad().defined()) gradients += param.grad().numel() * static_cast<std::int64_t>(sizeof(T));
      if constexpr (requires { D::live_bytes(); })
        return D::live_bytes() - gradients;
      else
        return static_cast<std::int64_t>(D::memory_stats().in_use_bytes) - gradients;
    }

    void backward(int i) {
      const TimelineSpan span(active_timeline(), SpanKind::backward, i);
      progress_sends();
      MicroBatch& m = micro[static_cast<std::size_t>(i)];
      check(m.live, "Pipeline: backward of micro-batch ", i, " before its forward (schedule error)");
      if (p.options_.checkpoint) {  // recompute this stage's forward, now recording the graph
        const Var<T, D> output = local.forward(m.input);
        if (p.is_last_stage())
          m.loss = task.loss(output, targets_of(i), weight_of(i));
        else
          m.output = output;
      }
      if (p.is_last_stage()) {
        if (m.loss.requires_grad()) ptrain::backward(m.loss);
      } else {
        Tensor<T, D> grad = receive(p.down_, m.output.shape(), p.stage() + 1, gradient_tag(i));
        if (m.output.requires_grad()) ptrain::backward(m.output, std::move(grad));
      }
      if (!p.is_first_stage())
        send_gradient(m.input.grad().defined() ? m.input.grad() : Tensor<T, D>::zeros(m.input.shape()), i);
      m = MicroBatch{};
    }

    // Waits for every message this stage sent.
    void finish() {
      const auto start = Clock::now();
      const TimelineSpan span(active_timeline(), SpanKind::idle);
      for (auto& o : outgoing) {
        o.request.wait();
        sent(o);
      }
      outgoing.clear();
      stats.wait_seconds += seconds_since(start);
    }

    // The header (rank, then each extent) comes to the host; the activation stays on D.
    Tensor<T, D> receive_activation(int i) {
      const std::vector<double> header = receive<double>(p.up_, Shape{header_size}, p.stage() - 1, shape_tag(i)).to_vector();
      std::vector<std::int64_t> dims;
      for (std::size_t d = 0; d < static_cast<std::size_t>(header[0]); ++d)
        dims.push_back(static_cast<std::int64_t>(header[d + 1]));
      return receive(p.up_, Shape(dims.begin(), dims.end()), p.stage() - 1, activation_tag(i));
    }
    template <class U = T>
    Tensor<U, D> receive(AnyComm& comm, const Shape& shape, int source, int tag) {
      Tensor<U, D> t(shape);
      const TimelineSpan span(active_timeline(), SpanKind::receive, micro_batch_of(tag));
      wait(comm.irecv(std::span<U>(t.data(), static_cast<std::size_t>(t.numel())), source, tag));
      return t;
    }
    void send(const Tensor<T, D>& activation, int i) {
      check(activation.rank() <= static_cast<int>(max_rank), "Pipeline: stage ", p.stage(),
            " outputs a tensor of shape ", activation.shape(), "; at most ", max_rank, " dimensions can be sent");
      std::vector<double> header(max_rank + 1, 0.0);
      header[0] = activation.rank();
      for (int d = 0; d < activation.rank(); ++d) header[static_cast<std::size_t>(d) + 1] = static_cast<double>(activation.size(d));
      Outgoing& o = outgoing.emplace_back();
      o.micro_batch = i;
      o.posted_us = timeline_now();
      o.shape = Tensor<double, D>::from(Shape{header_size}, header);
      o.request = p.up_.isend(span_of(o.shape), p.stage() + 1, shape_tag(i));
      post(p.up_, activation, p.stage() + 1, activation_tag(i));
    }
    void send_gradient(const Tensor<T, D>& grad, int i) { post(p.down_, grad, p.stage() - 1, gradient_tag(i)); }
    // The tensor is held until its message is done.
    void post(AnyComm& comm, const Tensor<T, D>& tensor, int dest, int tag) {
      Outgoing& o = outgoing.emplace_back();
      o.micro_batch = micro_batch_of(tag);
      o.posted_us = timeline_now();
      o.tensor = tensor;
      o.request = comm.isend(span_of(o.tensor), dest, tag);
    }
    template <class U>
    static std::span<const U> span_of(const Tensor<U, D>& t) {
      return {t.data(), static_cast<std::size_t>(t.numel())};
    }

    void wait(AnyRequest request) {
      const auto start = Clock::now();
      request.wait();
      stats.wait_seconds += seconds_since(start);
    }
    // MPI moves a large message only while either side is inside an MPI call: nudge the sends,
    // and free the buffers of those that are done.
    void progress_sends() {
      std::erase_if(outgoing, [](Outgoing& o) {
        if (!o.request.test()) return false;
        sent(o);
        return true;
      });
    }
    // A send's span: from its posting to the first moment this rank sees it complete.
    static void sent(const Outgoing& o) {
      if (Timeline* timeline = active_timeline(); timeline && o.posted_us >= 0)
        timeline->add(SpanKind::send, o.micro_batch, o.posted_us, timeline->now());
    }
    static double timeline_now() {
      const Timeline* timeline = active_timeline();
      return timeline ? timeline->now() : -1;
    }

    Pipeline& p;
    Module<T, D>& local;
    const Tensor<T>& inputs;
    BatchUpload<D>& upload;
    const TaskType& task;
    std::vector<Targets> pieces_targets;
    double batch_weight = 0, loss_scale;
    std::int64_t baseline_bytes;
    std::vector<MicroBatch> micro;
    std::vector<std::int64_t> bounds;
    std::deque<Outgoing> outgoing;
    EpochTotals totals;
    PipelineStepStats stats;
  };

  int micro_batches_per_batch() const { return options_.micro_batches > 0 ? options_.micro_batches : MicroBatches; }
  ScheduleKind schedule_kind() const {
    if constexpr (std::same_as<Schedule, RuntimeSchedule>) return options_.schedule;
    else return std::same_as<Schedule, GPipe> ? ScheduleKind::gpipe : ScheduleKind::one_f_one_b;
  }

  template <class Model>
  void print_plan(const Model& model, const std::vector<std::int64_t>& parameters) const {
    char line[256];
    std::snprintf(line, sizeof line, "pipeline: %d rank(s) = %d stage(s) x %d data-parallel replica(s); %s, %d micro-batches%s",
                  grid_.stages * grid_.replicas, grid_.stages, grid_.replicas, detail::schedule_name(schedule_kind()), micro_batches_per_batch(),
                  options_.checkpoint ? ", activation checkpointing" : "");
    log_line(line);
    for (int s = 0; s < grid_.stages; ++s) {
      const auto [begin, end] = ranges_[static_cast<std::size_t>(s)];
      std::string names;
      std::int64_t count = 0;
      for (std::size_t i = begin; i < end; ++i) {
        names += (i == begin ? "" : " ") + model.children()[i].first;
        count += parameters[i];
      }
      std::string ranks;
      for (int r = 0; r < grid_.replicas; ++r) ranks += (r ? "," : "") + std::to_string(r * grid_.stages + s);
      std::snprintf(line, sizeof line, "  stage %d (ranks %s): layers %zu-%zu [%s], %lld parameters", s,
                    ranks.c_str(), begin, end - 1, names.c_str(), static_cast<long long>(count));
      log_line(line);
    }
    // Shared parameters by the layer run on several stages that holds them, or one by one.
    const auto on_stages = [](const std::vector<int>& stages) {
      std::string text = "a copy on stages ";
      for (std::size_t i = 0; i < stages.size(); ++i) text += (i ? "," : "") + std::to_string(stages[i]);
      return text + ", gradients summed over them";
    };
    std::vector<std::string> layers_said;
    for (const auto& shared : sharing_->shared()) {
      std::string layer;
      for (std::size_t i = ranges_.front().begin; i < ranges_.back().end; ++i) {
        const std::string& name = model.children()[i].first;
        if (shared.name.starts_with(name + ".") && stages_running(model, name) > 1) layer = name;
      }
      if (layer.empty()) {
        log_line("  " + shared.name + ": " + on_stages(shared.stages));
      } else if (std::find(layers_said.begin(), layers_said.end(), layer) == layers_said.end()) {
        layers_said.push_back(layer);
        log_line("  layer " + layer + " (its parameters): " + on_stages(shared.stages));
      }
    }
  }
  // How many stages run a layer of this name.
  template <class Model>
  int stages_running(const Model& model, const std::string& layer) const {
    int count = 0;
    for (const auto& [begin, end] : ranges_) {
      bool here = false;
      for (std::size_t i = begin; i < end; ++i) here = here || model.children()[i].first == layer;
      count += here ? 1 : 0;
    }
    return count;
  }

  PipelineOptions options_;
  int world_rank_ = 0;
  PipelineGrid grid_;
  AnyComm up_, down_;  // this replica's stages, ranked by stage: activations up, gradients down
  AnyComm world_;
  detail::StepAgreement steps_agreement_{"Pipeline", options_.uneven_inputs};
  std::vector<detail::StageRange> ranges_;
  std::shared_ptr<void> stage_module_;
  std::shared_ptr<detail::StageSharing> sharing_;
  PipelineStepStats stats_;
};

}  // namespace ptrain
