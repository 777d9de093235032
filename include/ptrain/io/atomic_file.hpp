#pragma once
// Nothing is half-written: every file ptrain writes (weights, logs, tensor caches, images) goes
// through write_atomically. It writes a temporary beside the target, fsyncs it, renames it over
// the target (atomic within one file system, POSIX) and fsyncs the directory, so that after a crash
// or a power cut a reader finds the old file or the new one, whole. The temporary is removed when
// the writer throws, and when SIGINT, SIGTERM or SIGHUP ends the process mid-write
// (detail/partial_files.hpp). Streaming writers (a tensor cache written as batches are ready) write
// through the same stream.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "ptrain/core/error.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/io/detail/file_descriptor_buffer.hpp"
#include "ptrain/io/detail/partial_files.hpp"

namespace ptrain::io {

// A rename or a new entry is durable once its directory is: fsync the directory. File systems
// that cannot (EINVAL) have nothing more to do. context starts the error message (the target).
void sync_directory(const std::filesystem::path& dir, const std::string& context = "");

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE void sync_directory(const std::filesystem::path& dir, const std::string& context) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  check(fd >= 0, context, "cannot open the directory ", dir.string(), " to fsync it: ", std::strerror(errno));
  const int synced = ::fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
  ::close(fd);
  check(synced == 0, context, "fsync of the directory ", dir.string(), " failed: ", std::strerror(synced));
}
#endif

namespace detail {

// <target>.tmp.<pid>.<n>: unique among the processes and threads writing one target.
std::filesystem::path temporary_beside(const std::filesystem::path& target);

// The temporary of one write: open until commit() puts it in place; removed if that never happens.
class AtomicFile {
 public:
  explicit AtomicFile(const std::filesystem::path& target);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  std::streambuf& buffer() { return *buffer_; }

  void commit();

 private:
  [[noreturn]] void fail_with_errno(const std::string& what, int error = errno) const {
    fail(target_.string(), ": ", what, ": ", std::strerror(error));
  }

  std::filesystem::path target_, temporary_;
  PartialFileRecord record_;
  int fd_ = -1;
  std::optional<FileDescriptorBuffer> buffer_;
  bool committed_ = false;
};

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE std::filesystem::path temporary_beside(const std::filesystem::path& target) {
  static std::atomic<unsigned long> serial{0};
  return target.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
}

PTRAIN_PREBUILT_INLINE AtomicFile::AtomicFile(const std::filesystem::path& target)
    : target_(target), temporary_(temporary_beside(target)), record_(temporary_.string()) {
  do fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) fail_with_errno("cannot create the temporary file " + temporary_.string());
  buffer_.emplace(fd_);
}

PTRAIN_PREBUILT_INLINE AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

PTRAIN_PREBUILT_INLINE void AtomicFile::commit() {
  if (buffer_->pubsync() != 0 || buffer_->error() != 0)
    fail_with_errno("writing " + temporary_.string() + " failed", buffer_->error());
  if (::fsync(fd_) != 0) fail_with_errno("fsync of " + temporary_.string() + " failed");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_with_errno("closing " + temporary_.string() + " failed");
  if (::rename(temporary_.c_str(), target_.c_str()) != 0)
    fail_with_errno("cannot rename " + temporary_.string() + " into place");
  committed_ = true;
  record_.release();
  sync_directory(target_.has_parent_path() ? target_.parent_path() : ".", target_.string() + ": ");
}
#endif

}  // namespace detail

// Calls write(std::ostream&) to fill path, atomically (see above). Whatever write throws leaves the
// old file, if any, as it was and no temporary behind.
template <class Write>
void write_atomically(const std::filesystem::path& path, Write&& write) {
  if (path.has_parent_path()) {
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
    check(!error, path.string(), ": cannot create its directory ", path.parent_path().string(), ": ", error.message());
  }
  detail::AtomicFile file(path);
  std::ostream out(&file.buffer());
  write(out);
  file.commit();
}

}  // namespace ptrain::io
