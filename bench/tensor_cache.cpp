// What a tensor cache saves: the epoch time of an ImageFolder of JPEG files decoded and resized
// every epoch, against reading the same examples, resized once, from a tensor cache. Both go
// through the DataLoader (shuffled batches of 64, the same worker threads); best of `epochs`.
//
//   bench_tensor_cache [images=512] [size=256] [resized=128] [workers=2] [epochs=3]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include <ptrain/core/rng.hpp>
#include <ptrain/data/geometric_transforms.hpp>
#include <ptrain/data/image_folder.hpp>
#include <ptrain/data/loader.hpp>
#include <ptrain/data/tensor_cache.hpp>
#include <ptrain/io/image.hpp>

namespace {

namespace fs = std::filesystem;

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A photo-like image: smooth colour gradients, an object-sized disc and some sensor noise, so
// that JPEG sizes (about 20-30 KB at 256x256, quality 90) are those of real photos.
ptrain::io::Image photo(std::int64_t size, std::int64_t seed, ptrain::Rng& rng) {
  ptrain::io::Image image(size, size, 3);
  const double cx = rng.uniform(0.3, 0.7) * size, cy = rng.uniform(0.3, 0.7) * size, r = rng.uniform(0.1, 0.3) * size;
  for (std::int64_t y = 0; y < size; ++y)
    for (std::int64_t x = 0; x < size; ++x) {
      const bool inside = (x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r;
      for (int c = 0; c < 3; ++c) {
        const double base = inside ? 200 - 60 * c : 40 + (seed * 17 + 50 * c) % 80 + 100.0 * (x + c * y) / (2 * size);
        image.at(y, x, c) = static_cast<std::uint8_t>(std::clamp(base + rng.normal(0, 6), 0.0, 255.0));
      }
    }
  return image;
}

template <class D>
double best_epoch_seconds(ptrain::DataLoader<D>& loader, int epochs, std::int64_t expected) {
  double best = 1e30;
  for (int e = 0; e < epochs; ++e) {
    const double t0 = seconds();
    std::int64_t rows = 0;
    for (const ptrain::Batch& batch : loader) rows += batch.size();
    best = std::min(best, seconds() - t0);
    if (rows != expected) std::fprintf(stderr, "epoch saw %ld examples, expected %ld\n", rows, expected);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ptrain;
  const std::int64_t images = argc > 1 ? std::atol(argv[1]) : 512;
  const std::int64_t size = argc > 2 ? std::atol(argv[2]) : 256;
  const std::int64_t resized = argc > 3 ? std::atol(argv[3]) : 128;
  const int workers = argc > 4 ? std::atoi(argv[4]) : 2;
  const int epochs = argc > 5 ? std::atoi(argv[5]) : 3;

  const fs::path root = fs::temp_directory_path() / ("ptrain_bench_tensor_cache_" + std::to_string(::getpid()));
  Rng rng(1);
  std::uintmax_t jpeg_bytes = 0;
  for (std::int64_t i = 0; i < images; ++i) {
    const fs::path path = root / "images" / ("class" + std::to_string(i % 4)) / (std::to_string(i) + ".jpg");
    io::write_jpeg(path, photo(size, i, rng), 90);
    jpeg_bytes += fs::file_size(path);
  }

  const ImageFolder folder(root / "images");
  const Resize resize(resized, resized);
  LoaderOptions options{.batch_size = 64, .shuffle = true, .seed = 7, .num_workers = workers};
  DataLoader decoding(folder, options, resize);
  const double jpeg_epoch = best_epoch_seconds(decoding, epochs, images);

  const fs::path cache_path = root / "images.cache";
  const double t0 = seconds();
  write_tensor_cache(cache_path, folder, resize, {.num_workers = workers});
  const double t1 = seconds();
  const TensorCache cache(cache_path, Shape{3, resized, resized});
  const double t2 = seconds();
  DataLoader cached(cache, options);
  const double cache_epoch = best_epoch_seconds(cached, epochs, images);

  std::printf(
      "bench=tensor_cache source=jpeg images=%ld size=%ld resized=%ld workers=%d jpeg_mb=%.1f epoch_ms=%.1f "
      "images_per_sec=%.0f\n",
      images, size, resized, workers, static_cast<double>(jpeg_bytes) / 1e6, jpeg_epoch * 1e3, images / jpeg_epoch);
  std::printf(
      "bench=tensor_cache source=cache images=%ld resized=%ld workers=%d cache_mb=%.1f write_ms=%.1f open_ms=%.1f "
      "epoch_ms=%.1f images_per_sec=%.0f\n",
      images, resized, workers, static_cast<double>(fs::file_size(cache_path)) / 1e6, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
      cache_epoch * 1e3, images / cache_epoch);
  std::printf("bench=tensor_cache epoch_speedup=%.1f break_even_epochs=%.2f\n", jpeg_epoch / cache_epoch,
              (t2 - t0) / (jpeg_epoch - cache_epoch));
  std::error_code ignored;
  fs::remove_all(root, ignored);
}
