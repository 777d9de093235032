#pragma once
// A timeline of where each rank's time goes, as Horovod's timeline shows it: spans of forward,
// backward, the wait for gradient reductions, the optimizer, the wait for data, each gradient
// bucket's reduction from its launch to its completion, pipeline sends, receives and idle time.
// chrome_trace_json renders the ranks' spans as Chrome trace JSON (chrome://tracing,
// ui.perfetto.dev): pid = rank, tid = track, one complete ("X") event per span.
//
// Off unless TrainerOptions::timeline names a file: the Trainer makes its Timeline the thread's
// active one while fit runs, and the code deep in the policies (gradient buckets, pipeline
// messages) records only when active_timeline() is not null. Off, a would-be span costs that check.
//
// Times are microseconds on the system clock (steady within a run: the system clock's reading at
// construction plus the steady clock's progress), so ranks on different hosts line up as well as
// their clocks agree.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

enum class SpanKind : int { data, forward, backward, gradient_wait, optimizer, bucket, send, receive, idle };

struct TimelineEvent {
  int rank = 0;
  SpanKind kind = SpanKind::forward;
  int index = -1;  // the bucket, or the pipeline's micro-batch; -1 for none
  double start_us = 0, end_us = 0;
};

class Timeline {
 public:
  static constexpr std::size_t flat_size = 4;  // doubles per event in flat()

  Timeline() {
    const double system = micros(std::chrono::system_clock::now().time_since_epoch());
    offset_us_ = system - micros(std::chrono::steady_clock::now().time_since_epoch());
  }

  double now() const { return micros(std::chrono::steady_clock::now().time_since_epoch()) + offset_us_; }
  void add(SpanKind kind, int index, double start_us, double end_us) {
    events_.push_back({0, kind, index, start_us, end_us});
  }
  const std::vector<TimelineEvent>& events() const { return events_; }
  void clear() { events_.clear(); }

  // The events as doubles (kind, index, start, end), for gathering them over a sum-reduce; times
  // near 1.8e15 us keep a quarter-microsecond resolution in a double.
  std::vector<double> flat() const {
    std::vector<double> values;
    values.reserve(events_.size() * flat_size);
    for (const auto& e : events_)
      values.insert(values.end(), {double(static_cast<int>(e.kind)), double(e.index), e.start_us, e.end_us});
    return values;
  }
  static std::vector<TimelineEvent> from_flat(std::span<const double> values, int rank) {
    check(values.size() % flat_size == 0, "Timeline: ", values.size(), " values are not whole events of ", flat_size);
    std::vector<TimelineEvent> events;
    for (std::size_t i = 0; i < values.size(); i += flat_size) {
      const int kind = static_cast<int>(values[i]);
      check(kind >= 0 && kind <= static_cast<int>(SpanKind::idle), "Timeline: event ", i / flat_size,
            " of rank ", rank, " has an unknown kind ", values[i]);
      events.push_back({rank, static_cast<SpanKind>(kind), static_cast<int>(values[i + 1]), values[i + 2], values[i + 3]});
    }
    return events;
  }

 private:
  template <class Duration>
  static double micros(Duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  }

  double offset_us_ = 0;
  std::vector<TimelineEvent> events_;
};

namespace detail {
inline thread_local Timeline* thread_timeline = nullptr;
}  // namespace detail

// The timeline this thread records into, or null (the usual case: no timeline asked for).
inline Timeline* active_timeline() { return detail::thread_timeline; }

// Makes timeline (null: none) the thread's active one for the scope's life.
class ActiveTimeline {
 public:
  explicit ActiveTimeline(Timeline* timeline) : previous_(detail::thread_timeline) { detail::thread_timeline = timeline; }
  ~ActiveTimeline() { detail::thread_timeline = previous_; }
  ActiveTimeline(const ActiveTimeline&) = delete;
  ActiveTimeline& operator=(const ActiveTimeline&) = delete;

 private:
  Timeline* previous_;
};

// Records [construction, destruction) into timeline when it is not null.
class TimelineSpan {
 public:
  TimelineSpan(Timeline* timeline, SpanKind kind, int index = -1)
      : timeline_(timeline), kind_(kind), index_(index), start_(timeline ? timeline->now() : 0) {}
  ~TimelineSpan() {
    if (timeline_) timeline_->add(kind_, index_, start_, timeline_->now());
  }
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;

 private:
  Timeline* timeline_;
  SpanKind kind_;
  int index_;
  double start_;
};

namespace detail {

struct TimelineTrack {
  int id;
  std::string name;
};

// Spans that may overlap get tracks of their own (a bucket's reduction runs beside backward and
// beside the next bucket's); the rest nest on the compute track.
inline TimelineTrack timeline_track(const TimelineEvent& e) {
  switch (e.kind) {
    case SpanKind::data: return {1, "data"};
    case SpanKind::receive:
    case SpanKind::idle: return {2, "pipeline wait"};
    case SpanKind::bucket: return {10 + e.index, "bucket " + std::to_string(e.index)};
    case SpanKind::send: return {1000 + e.index, "send mb " + std::to_string(e.index)};
    default: return {0, "compute"};
  }
}

inline std::string timeline_name(const TimelineEvent& e) {
  static const char* const names[] = {"data",   "forward", "backward", "gradient wait", "optimizer",
                                      "bucket", "send",    "receive",  "idle"};
  std::string name = names[static_cast<int>(e.kind)];
  if (e.index < 0) return name;
  return name + (e.kind == SpanKind::bucket ? " " : " mb ") + std::to_string(e.index);
}

}  // namespace detail

// Chrome trace JSON of events (every rank's), times from the earliest start.
std::string chrome_trace_json(const std::vector<TimelineEvent>& events);

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE std::string chrome_trace_json(const std::vector<TimelineEvent>& events) {
  double origin = 0;
  for (std::size_t i = 0; i < events.size(); ++i)
    if (i == 0 || events[i].start_us < origin) origin = events[i].start_us;
  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  const auto append = [&](const std::string& event) {
    json += (first ? "\n" : ",\n") + event;
    first = false;
  };
  std::set<int> named_ranks;
  std::set<std::pair<int, int>> named_tracks;  // (rank, track)
  char line[256];
  for (const auto& e : events) {
    const detail::TimelineTrack track = detail::timeline_track(e);
    if (named_ranks.insert(e.rank).second) {
      std::snprintf(line, sizeof line,
                    "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", e.rank,
                    e.rank);
      append(line);
      std::snprintf(line, sizeof line, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                    e.rank, e.rank);
      append(line);
    }
    if (named_tracks.emplace(e.rank, track.id).second) {
      std::snprintf(line, sizeof line,
                    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", e.rank,
                    track.id, track.name.c_str());
      append(line);
    }
    std::snprintf(line, sizeof line, "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
                  detail::timeline_name(e).c_str(), e.rank, track.id, e.start_us - origin, e.end_us - e.start_us);
    append(line);
  }
  return json + "\n]}\n";
}
#endif

}  // namespace ptrain
