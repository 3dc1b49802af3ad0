#include "prewarm/util/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "prewarm/util/strings.h"

namespace prewarm {

absl::Status ErrnoStatus(std::string_view what, std::string_view path, int err) {
  std::string reason = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) reason = StrCat("disk full (", reason, ")");
  const std::string msg = StrCat(what, " ", path, ": ", reason);
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

std::string_view FileKindName(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symlink";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a device";
}

absl::Status CheckInputFile(std::string_view flag, const std::string& path, int64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        StrCat(flag, " ", path, ": cannot open the file (", std::strerror(errno), ")"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        StrCat(flag, " ", path, ": ", FileKindName(st.st_mode), ", not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(StrCat(flag, " ", path, ": ", st.st_size,
                                             " bytes, more than the ", max_bytes,
                                             " such a file can need"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path, errno);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus("cannot read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::StatusOr<std::string> ReadOwnFile(const std::string& path, int64_t max_bytes, int64_t prefix,
                                        int64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::FailedPreconditionError(StrCat(path, ": a symlink (not followed in the cache)"));
    }
    return ErrnoStatus("cannot open", path, err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(StrCat(path, ": ", FileKindName(st.st_mode)));
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return absl::FailedPreconditionError(
        StrCat(path, ": ", st.st_size, " bytes, more than the ", max_bytes, " allowed"));
  }
  if (size != nullptr) *size = st.st_size;
  const int64_t want = prefix < 0 ? st.st_size : std::min<int64_t>(prefix, st.st_size);
  std::string out(static_cast<size_t>(want), '\0');
  int64_t got = 0;
  while (got < want) {
    const ssize_t n = ::read(fd, out.data() + got, static_cast<size_t>(want - got));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus("cannot read", path, err);
    }
    if (n == 0) break;  // shrank while read: the decoder sees it truncated
    got += n;
  }
  ::close(fd);
  out.resize(static_cast<size_t>(got));
  return out;
}

absl::Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return ErrnoStatus("cannot create directory", path, ec.value());
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) return ErrnoStatus("cannot fsync directory", dir, err);
  return absl::OkStatus();
}

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& target, mode_t final_mode) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string temp = StrCat(target, kTempMarker, ::getpid(), ".", rng() % 1000000007);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return ErrnoStatus("cannot write in", std::filesystem::path(target).parent_path().string(),
                       errno);
  }
  return AtomicFile(target, temp, fd, final_mode);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : target_(std::move(other.target_)),
      temp_path_(std::move(other.temp_path_)),
      fd_(other.fd_),
      mode_(other.mode_),
      committed_(other.committed_) {
  other.fd_ = -1;
  other.committed_ = true;  // the moved-from object owns nothing
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

absl::Status AtomicFile::Write(std::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("cannot write", temp_path_, errno);
    off += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::Commit() {
  if (::fsync(fd_) != 0) return ErrnoStatus("cannot fsync", temp_path_, errno);
  if (::fchmod(fd_, mode_) != 0) return ErrnoStatus("cannot chmod", temp_path_, errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return ErrnoStatus("cannot close", temp_path_, errno);
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    return ErrnoStatus("cannot rename into", target_, errno);
  }
  committed_ = true;
  return FsyncDir(std::filesystem::path(target_).parent_path().string());
}

absl::StatusOr<FileLock> FileLock::Take(const std::string& path, Mode mode, bool wait) {
  // O_NOFOLLOW: a lock that is a symlink (dangling or not) would create or lock its target,
  // wherever it points.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && mode == Mode::kShared && (errno == EROFS || errno == EACCES)) {
    fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) return ErrnoStatus("cannot open lock file", path, errno);
  const int op = (mode == Mode::kShared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB);
  while (::flock(fd, op) != 0) {
    const int err = errno;
    if (err == EINTR) continue;
    ::close(fd);
    if (err == EWOULDBLOCK) return absl::UnavailableError(StrCat("lock busy: ", path));
    return ErrnoStatus("cannot lock", path, err);
  }
  return FileLock(fd);
}

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path, Mode mode) {
  return Take(path, mode, /*wait=*/true);
}

absl::StatusOr<FileLock> FileLock::TryAcquire(const std::string& path, Mode mode) {
  return Take(path, mode, /*wait=*/false);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace prewarm
