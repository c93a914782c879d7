#include "config/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace infergate::config {

codecs::StatusOr<std::string> readTextFile(const std::string& path, size_t max_bytes) {
  auto failed = [&path](int err) {
    std::string message = codecs::strCat("cannot read ", path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::FailedPreconditionError(message);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failed(errno);
  std::string text;
  char chunk[65536];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return failed(err);
    }
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      return absl::FailedPreconditionError(
          codecs::strCat("cannot read ", path, ": larger than ", max_bytes, " bytes"));
    }
  }
  ::close(fd);
  return text;
}

}  // namespace infergate::config
