#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <ptrain/data/loader.hpp>

using namespace ptrain;
BOOST_AUTO_TEST_SUITE(loader_test)

using Indices = std::vector<std::int64_t>;

namespace {

// n examples [C, H, W]; element j of example i is i * 1000 + j; target 10 + i.
TensorDataset ramp_dataset(std::int64_t n, std::int64_t c = 1, std::int64_t h = 2, std::int64_t w = 2) {
  Tensor<float> inputs(Shape{n, c, h, w});
  const std::int64_t per = c * h * w;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < per; ++j) inputs[i * per + j] = static_cast<float>(i * 1000 + j);
  Indices targets(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) targets[static_cast<std::size_t>(i)] = 10 + i;
  return TensorDataset(inputs, targets);
}

// Slow to read: each get() sleeps, and counts how often it was called.
struct SlowDataset {
  TensorDataset inner;
  std::chrono::microseconds delay;
  std::shared_ptr<std::atomic<int>> reads = std::make_shared<std::atomic<int>>(0);
  std::int64_t size() const { return inner.size(); }
  Example get(std::int64_t i) const {
    ++*reads;
    std::this_thread::sleep_for(delay);
    return inner.get(i);
  }
};

// Sleeps a different time for each index, to shuffle which worker finishes first.
struct JitteryDataset {
  TensorDataset inner;
  std::int64_t size() const { return inner.size(); }
  Example get(std::int64_t i) const {
    std::this_thread::sleep_for(std::chrono::microseconds((i * 7919) % 300));
    return inner.get(i);
  }
};

struct FailingDataset {
  TensorDataset inner;
  std::int64_t bad;
  std::int64_t size() const { return inner.size(); }
  Example get(std::int64_t i) const {
    check(i != bad, "FailingDataset: record ", i, " is corrupt");
    return inner.get(i);
  }
};

// Each example's index as the first element tells which example a row came from.
// Segmentation examples: input [1, 2, 2] filled with i, target map [2, 2] = 10 i + pixel; the
// example `without_map` has none.
struct MapDataset {
  std::int64_t n;
  std::int64_t without_map = -1;
  std::int64_t size() const { return n; }
  Example get(std::int64_t i) const {
    Tensor<std::int64_t> map(Shape{2, 2});
    for (std::int64_t p = 0; p < 4; ++p) map[p] = 10 * i + p;
    if (i == without_map) map = {};
    return {Tensor<float>::full(Shape{1, 2, 2}, static_cast<float>(i)), 0, map};
  }
};

template <class L>
void check_rows_match_indices(const Batch& batch, const L& loader) {
  const std::int64_t per = batch.size() ? batch.inputs.numel() / batch.size() : 0;
  for (std::int64_t r = 0; r < batch.size(); ++r) {
    const std::int64_t i = batch.indices[static_cast<std::size_t>(r)];
    BOOST_REQUIRE(batch.targets[static_cast<std::size_t>(r)] ==
                  loader.dataset().targets()[static_cast<std::size_t>(i)]);
    for (std::int64_t j = 0; j < per; ++j)
      BOOST_REQUIRE(batch.inputs[r * per + j] == static_cast<float>(i * 1000 + j));
  }
}

template <class L>
std::vector<Batch> one_epoch(L& loader) {
  std::vector<Batch> batches;
  for (auto& batch : loader) batches.push_back(batch);
  return batches;
}

Indices order_of(const std::vector<Batch>& batches) {
  Indices order;
  for (const auto& b : batches) order.insert(order.end(), b.indices.begin(), b.indices.end());
  return order;
}

}  // namespace

BOOST_AUTO_TEST_CASE(batches_follow_the_sampler_order_with_a_partial_last_batch) {
  DataLoader loader(ramp_dataset(10), {.batch_size = 4});
  BOOST_TEST(loader.size() == 3);
  const auto batches = one_epoch(loader);
  BOOST_REQUIRE(batches.size() == 3u);
  BOOST_TEST(batches[0].inputs.shape() == (Shape{4, 1, 2, 2}));
  BOOST_TEST(batches[2].inputs.shape() == (Shape{2, 1, 2, 2}));
  BOOST_TEST(batches[2].targets == (Indices{18, 19}));
  BOOST_TEST(order_of(batches) == (Indices{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  for (std::size_t b = 0; b < batches.size(); ++b) {
    BOOST_TEST(batches[b].index == static_cast<std::int64_t>(b));
    check_rows_match_indices(batches[b], loader);
  }
}

BOOST_AUTO_TEST_CASE(drop_last_drops_the_short_batch) {
  DataLoader loader(ramp_dataset(10), {.batch_size = 4, .shuffle = true, .seed = 3, .drop_last = true});
  BOOST_TEST(loader.size() == 2);
  const auto batches = one_epoch(loader);
  BOOST_REQUIRE(batches.size() == 2u);
  for (const auto& b : batches) BOOST_TEST(b.size() == 4);
  DataLoader exact(ramp_dataset(8), {.batch_size = 4, .drop_last = true});
  BOOST_TEST(one_epoch(exact).size() == 2u);
}

BOOST_AUTO_TEST_CASE(every_index_once_per_epoch) {
  for (int workers : {0, 1, 3}) {
    DataLoader loader(ramp_dataset(103),
                      {.batch_size = 8, .shuffle = true, .seed = 5, .num_workers = workers});
    for (int epoch = 0; epoch < 3; ++epoch) {
      const auto batches = one_epoch(loader);
      BOOST_TEST(batches.size() == 13u);
      Indices order = order_of(batches);
      for (const auto& b : batches) check_rows_match_indices(b, loader);
      std::sort(order.begin(), order.end());
      Indices all(103);
      for (std::int64_t i = 0; i < 103; ++i) all[static_cast<std::size_t>(i)] = i;
      BOOST_TEST(order == all);
    }
  }
}

BOOST_AUTO_TEST_CASE(shuffles_differ_across_epochs_and_reproduce) {
  const LoaderOptions options{.batch_size = 7, .shuffle = true, .seed = 11};
  DataLoader a(ramp_dataset(50), options);
  BOOST_TEST(a.epoch() == -1);
  const Indices a0 = order_of(one_epoch(a));
  BOOST_TEST(a.epoch() == 0);
  const Indices a1 = order_of(one_epoch(a));
  BOOST_TEST(a.epoch() == 1);
  BOOST_TEST(a0 != a1);
  DataLoader b(ramp_dataset(50), options);
  BOOST_TEST(order_of(one_epoch(b)) == a0);
  BOOST_TEST(order_of(one_epoch(b)) == a1);
  // Resuming at epoch 1 gives epoch 1's order without replaying epoch 0.
  DataLoader resumed(ramp_dataset(50), options);
  resumed.set_epoch(1);
  BOOST_TEST(order_of(one_epoch(resumed)) == a1);
  BOOST_TEST(resumed.epoch() == 1);
  DataLoader other(ramp_dataset(50), {.batch_size = 7, .shuffle = true, .seed = 12});
  BOOST_TEST(order_of(one_epoch(other)) != a0);
  // The order is RandomSampler's.
  BOOST_TEST(a0 == RandomSampler(50, 11).indices(0));
}

BOOST_AUTO_TEST_CASE(batch_content_does_not_depend_on_workers_or_timing) {
  const auto transform = Compose{RandomCrop(4, 2), RandomHorizontalFlip()};
  std::vector<std::vector<float>> reference;
  for (int workers : {0, 1, 2, 4}) {
    for (int prefetch : {1, 3}) {
      DataLoader loader(
          JitteryDataset{ramp_dataset(60, 2, 4, 4)},
          {.batch_size = 6, .shuffle = true, .seed = 2, .num_workers = workers, .prefetch = prefetch},
          transform);
      std::vector<std::vector<float>> epochs;
      for (int e = 0; e < 2; ++e)
        for (const auto& b : one_epoch(loader)) epochs.push_back(b.inputs.to_vector());
      if (reference.empty())
        reference = epochs;
      else
        BOOST_TEST((epochs == reference), "workers " << workers << ", prefetch " << prefetch);
    }
  }
  // The augmentation really ran and differs between epochs.
  BOOST_REQUIRE(reference.size() == 20u);
  BOOST_TEST((reference[0] != reference[10]));
}

// A run resumed mid-epoch: set_first_batch(b) gives batches b.. of that epoch, the same content
// (augmentation included) as the whole epoch's, and the next epoch begins at 0 again.
BOOST_AUTO_TEST_CASE(an_epoch_begins_at_the_batch_asked_for) {
  const auto transform = Compose{RandomCrop(4, 2), RandomHorizontalFlip()};
  // Two epochs' batches (their inputs) and their indices in the epoch.
  const auto two_epochs = [](auto& loader) {
    std::pair<std::vector<std::vector<float>>, std::vector<std::int64_t>> out;
    for (int e = 0; e < 2; ++e)
      for (const auto& b : one_epoch(loader)) {
        out.first.push_back(b.inputs.to_vector());
        out.second.push_back(b.index);
      }
    return out;
  };
  for (int workers : {0, 2}) {
    const LoaderOptions options{.batch_size = 6, .shuffle = true, .seed = 2, .num_workers = workers};
    DataLoader whole(ramp_dataset(40, 2, 4, 4), options, transform);
    auto [reference, reference_index] = two_epochs(whole);
    DataLoader resumed(ramp_dataset(40, 2, 4, 4), options, transform);
    resumed.set_first_batch(3);
    const auto [got, got_index] = two_epochs(resumed);
    reference.erase(reference.begin(), reference.begin() + 3);
    reference_index.erase(reference_index.begin(), reference_index.begin() + 3);
    BOOST_TEST((got == reference), "workers " << workers);
    BOOST_TEST(got_index == reference_index, boost::test_tools::per_element());
  }
  DataLoader past_the_end(ramp_dataset(40), {.batch_size = 6});
  past_the_end.set_first_batch(8);
  BOOST_CHECK_THROW(past_the_end.start_epoch(), Error);
}

BOOST_AUTO_TEST_CASE(transform_output_shape_sets_the_batch_shape) {
  DataLoader loader(ramp_dataset(5, 1, 6, 6), {.batch_size = 2}, RandomCrop(4, 3, 0));
  for (const auto& b : loader) BOOST_TEST(b.inputs.shape() == (Shape{b.size(), 1, 4, 3}));
  // The dataset's own storage is untouched by the transform.
  const Example e = loader.dataset().get(4);
  BOOST_TEST(e.input[0] == 4000.0f);
}

BOOST_AUTO_TEST_CASE(next_walks_an_epoch_then_starts_the_next) {
  DataLoader loader(ramp_dataset(5), {.batch_size = 2, .shuffle = true, .seed = 1});
  Indices first;
  int batches = 0;
  while (auto b = loader.next()) {
    first.insert(first.end(), b->indices.begin(), b->indices.end());
    ++batches;
  }
  BOOST_TEST(batches == 3);
  BOOST_TEST(loader.epoch() == 0);
  BOOST_TEST(first == RandomSampler(5, 1).indices(0));
  auto b = loader.next();
  BOOST_REQUIRE(b.has_value());
  BOOST_TEST(loader.epoch() == 1);
  BOOST_TEST(b->indices[0] == RandomSampler(5, 1).indices(1)[0]);
}

BOOST_AUTO_TEST_CASE(prefetch_prepares_batches_ahead_but_bounded) {
  SlowDataset slow{ramp_dataset(100), std::chrono::microseconds(100)};
  const auto reads = slow.reads;
  DataLoader loader(slow, {.batch_size = 2, .num_workers = 1, .prefetch = 3});
  auto first = loader.next();
  BOOST_REQUIRE(first.has_value());
  // Batch 0 consumed; batches 1..3 get prepared and then the worker waits: 4 batches, 8 reads.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reads->load() < 8 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  BOOST_TEST(reads->load() == 8);
  loader.next();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  BOOST_TEST(reads->load() == 10);  // one more batch of room
}

BOOST_AUTO_TEST_CASE(destruction_mid_epoch_does_not_hang) {
  using Clock = std::chrono::steady_clock;
  SlowDataset slow{ramp_dataset(2000), std::chrono::milliseconds(2)};
  for (int workers : {1, 3}) {
    const auto start = Clock::now();
    {
      DataLoader loader(slow, {.batch_size = 50, .num_workers = workers, .prefetch = 4});
      for (auto& batch : loader) {
        BOOST_TEST(batch.size() == 50);
        break;  // leaves the workers mid-batch
      }
    }
    {
      DataLoader loader(slow, {.batch_size = 50, .num_workers = workers});
      loader.start_epoch();  // destroyed before anything is consumed
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // One batch takes 0.1 s; a loader that waited for the epoch would take 4 s.
    BOOST_TEST(seconds < 1.5, "workers " << workers << ": " << seconds << " s");
  }
  // A new epoch abandons the unfinished one.
  DataLoader loader(ramp_dataset(30), {.batch_size = 4, .shuffle = true});
  auto partial = loader.next();
  BOOST_REQUIRE(partial.has_value());
  BOOST_TEST(one_epoch(loader).size() == 8u);
  BOOST_TEST(loader.epoch() == 1);
}

BOOST_AUTO_TEST_CASE(worker_exception_reaches_the_consumer_at_its_batch) {
  for (int workers : {0, 1, 3}) {
    DataLoader loader(FailingDataset{ramp_dataset(40), 13}, {.batch_size = 5, .num_workers = workers});
    BOOST_TEST(loader.next()->index == 0);
    BOOST_TEST(loader.next()->index == 1);
    try {
      loader.next();
      BOOST_FAIL("expected the corrupt record's error");
    } catch (const Error& e) {
      BOOST_TEST(std::string(e.what()) == "FailingDataset: record 13 is corrupt");
    }
    // The failed epoch is over; the next call starts epoch 1 from its first batch.
    auto again = loader.next();
    BOOST_REQUIRE(again.has_value());
    BOOST_TEST(loader.epoch() == 1);
    BOOST_TEST(again->index == 0);
  }
}

BOOST_AUTO_TEST_CASE(distributed_sampler_plugs_in) {
  const std::int64_t n = 23;
  std::vector<int> seen(n, 0);
  for (int rank = 0; rank < 3; ++rank) {
    DataLoader loader(ramp_dataset(n), DistributedSampler(n, 3, rank, true, 4),
                      {.batch_size = 3, .seed = 100u + rank});
    BOOST_TEST(loader.size() == 3);  // 8 indices per rank
    for (const auto& b : loader) {
      check_rows_match_indices(b, loader);
      for (auto i : b.indices) ++seen[static_cast<std::size_t>(i)];
    }
  }
  BOOST_TEST(*std::min_element(seen.begin(), seen.end()) == 1);
  BOOST_TEST(std::count(seen.begin(), seen.end(), 2) == 1);  // 24 = 23 + one padded repeat
}

BOOST_AUTO_TEST_CASE(bad_configurations_and_examples_are_errors) {
  BOOST_CHECK_THROW(DataLoader(ramp_dataset(4), {.batch_size = 0}), Error);
  BOOST_CHECK_THROW(DataLoader(ramp_dataset(4), SequentialSampler(4), {.batch_size = 2, .shuffle = true}),
                    Error);
  // A sampler pointing past the dataset.
  DataLoader past(ramp_dataset(4), SequentialSampler(6), {.batch_size = 2});
  past.next();
  past.next();
  BOOST_CHECK_THROW(past.next(), Error);
  // A transform whose output shape varies within a batch.
  int calls = 0;
  DataLoader ragged(ramp_dataset(4, 1, 4, 4), {.batch_size = 4, .num_workers = 0},
                    [&calls](Tensor<float>& x, Rng& rng) {
                      if (calls++ % 2) RandomCrop(2)(x, rng);
                    });
  try {
    ragged.next();
    BOOST_FAIL("expected a shape error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("has shape [1, 2, 2], expected [1, 4, 4]") != std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(the_dataset_archetype_is_enough) {
  DataLoader loader(DatasetArchetype{}, {.batch_size = 4});
  BOOST_TEST(loader.size() == 0);
  BOOST_TEST(one_epoch(loader).empty());
}

BOOST_AUTO_TEST_CASE(target_maps_batch_as_per_pixel_targets) {
  DataLoader loader(MapDataset{5}, {.batch_size = 2, .shuffle = true, .seed = 4}, RandomHorizontalFlip(1.0));
  for (const Batch& b : loader) {
    BOOST_TEST(b.target_shape == (Shape{b.size(), 2, 2}));
    BOOST_REQUIRE(b.targets.size() == static_cast<std::size_t>(4 * b.size()));
    for (std::int64_t r = 0; r < b.size(); ++r) {
      const std::int64_t i = b.indices[static_cast<std::size_t>(r)];
      // Flipped left-right, as its image.
      const Indices expected{10 * i + 1, 10 * i, 10 * i + 3, 10 * i + 2};
      BOOST_TEST(Indices(b.targets.begin() + 4 * r, b.targets.begin() + 4 * r + 4) == expected,
                 boost::test_tools::per_element());
    }
  }
  // Class targets keep their [B] shape.
  DataLoader plain(ramp_dataset(3), {.batch_size = 3});
  BOOST_TEST(plain.next()->target_shape == (Shape{3}));
  // A batch mixing examples with and without target maps is an error.
  DataLoader mixed(MapDataset{4, 1}, {.batch_size = 2, .num_workers = 0});
  try {
    mixed.next();
    BOOST_ERROR("expected an error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("example 1 has no target map, expected a target map of shape [2, 2]") !=
                   std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
