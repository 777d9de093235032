// The timeline recorder: spans only where a timeline is active, the flat form the ranks' spans
// travel in, and the Chrome trace JSON (read back by a JSON parser: tracks named per rank, times
// from the earliest span).
#include <boost/test/unit_test.hpp>

#include <string>

#include <ptrain/core/timeline.hpp>

#include "../common/chrome_trace.hpp"
#include "../common/files.hpp"

using namespace ptrain;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(timeline_test)

BOOST_AUTO_TEST_CASE(spans_are_recorded_only_into_a_timeline) {
  Timeline timeline;
  { const TimelineSpan off(nullptr, SpanKind::forward); }
  BOOST_TEST(timeline.events().empty());
  BOOST_TEST(active_timeline() == nullptr);
  {
    const ActiveTimeline active(&timeline);
    BOOST_TEST(active_timeline() == &timeline);
    const TimelineSpan span(active_timeline(), SpanKind::bucket, 3);
  }
  BOOST_TEST(active_timeline() == nullptr);
  BOOST_REQUIRE(timeline.events().size() == 1u);
  const TimelineEvent& e = timeline.events()[0];
  BOOST_TEST((e.kind == SpanKind::bucket));
  BOOST_TEST(e.index == 3);
  BOOST_TEST(e.end_us >= e.start_us);
  BOOST_TEST(e.start_us > 1.6e15);  // microseconds since 1970, after 2020
}

BOOST_AUTO_TEST_CASE(flat_form_round_trips_and_rejects_an_unknown_kind) {
  Timeline timeline;
  timeline.add(SpanKind::send, 1, 10.5, 20.25);
  timeline.add(SpanKind::idle, -1, 30, 31);
  const auto events = Timeline::from_flat(timeline.flat(), 4);
  BOOST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0].rank == 4);
  BOOST_TEST((events[0].kind == SpanKind::send));
  BOOST_TEST(events[0].index == 1);
  BOOST_TEST(events[0].start_us == 10.5);
  BOOST_TEST(events[0].end_us == 20.25);
  BOOST_TEST((events[1].kind == SpanKind::idle));
  const std::vector<double> bad{42, 0, 1, 2};
  const std::string message = error_of([&] { Timeline::from_flat(bad, 1); });
  BOOST_TEST(contains(message, "event 0 of rank 1 has an unknown kind 42"), message);
  BOOST_TEST(contains(error_of([&] { Timeline::from_flat(std::vector<double>{1, 2, 3}, 0); }), "not whole events"));
}

BOOST_AUTO_TEST_CASE(chrome_trace_names_tracks_per_rank) {
  const std::vector<TimelineEvent> events{{0, SpanKind::forward, -1, 1000, 1500},
                                          {0, SpanKind::bucket, 2, 1200, 1900},
                                          {1, SpanKind::receive, 0, 1100, 1300},
                                          {1, SpanKind::send, 1, 1400, 1450}};
  const auto path = temp_dir("timeline") / "trace.json";
  write_bytes(path, [&] {
    const std::string json = chrome_trace_json(events);
    return std::vector<char>(json.begin(), json.end());
  }());
  const ChromeTrace trace = read_chrome_trace(path);
  BOOST_REQUIRE(trace.spans.size() == 4u);
  BOOST_TEST(trace.spans[0].name == "forward");
  BOOST_TEST(trace.spans[0].ts == 0.0);  // from the earliest span
  BOOST_TEST(trace.spans[0].dur == 500.0);
  BOOST_TEST(trace.spans[1].name == "bucket 2");
  BOOST_TEST(trace.spans[1].ts == 200.0);
  BOOST_TEST(trace.spans[2].name == "receive mb 0");
  BOOST_TEST(trace.spans[2].pid == 1);
  BOOST_TEST(trace.spans[3].name == "send mb 1");
  BOOST_TEST(trace.track_names.at({0, 0}) == "compute");
  BOOST_TEST(trace.track_names.at({0, 12}) == "bucket 2");
  BOOST_TEST(trace.track_names.at({1, 2}) == "pipeline wait");
  BOOST_TEST(trace.track_names.at({1, 1001}) == "send mb 1");
}

BOOST_AUTO_TEST_SUITE_END()
