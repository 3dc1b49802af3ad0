#include "prewarm/util/files.h"

#include <dirent.h>
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
    // This process's resources, not the file's: too few descriptors, no memory.
    case EMFILE:
    case ENFILE:
    case ENOMEM:
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

namespace {

constexpr int kOwnFileFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

// ReadOwnFile once opened (fd < 0: the open's errno). Closes fd.
absl::StatusOr<std::string> ReadOpened(int fd, const std::string& path, int64_t max_bytes,
                                       int64_t prefix, int64_t* size) {
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
    return absl::OutOfRangeError(
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

}  // namespace

absl::StatusOr<std::string> ReadOwnFile(const std::string& path, int64_t max_bytes, int64_t prefix,
                                        int64_t* size) {
  return ReadOpened(::open(path.c_str(), kOwnFileFlags), path, max_bytes, prefix, size);
}

absl::StatusOr<DirFd> DirFd::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOTDIR) return absl::FailedPreconditionError(StrCat(path, ": not a directory"));
    return ErrnoStatus("cannot open directory", path, err);
  }
  return DirFd(fd, path);
}

DirFd& DirFd::operator=(DirFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

DirFd::~DirFd() {
  if (fd_ >= 0) ::close(fd_);
}

std::string DirFd::PathOf(std::string_view name) const { return StrCat(path_, "/", name); }

absl::StatusOr<DirFd> DirFd::Sub(std::string_view name, bool create) const {
  const std::string n(name);
  const std::string path = PathOf(name);
  if (create && ::mkdirat(fd_, n.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("cannot create directory", path, errno);
  }
  const int fd = ::openat(fd_, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      struct stat st {};
      const bool is_link =
          ::fstatat(fd_, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
      return absl::FailedPreconditionError(
          StrCat(path, ": ",
                 is_link ? "a symlink (prewarm does not go through links in the cache)"
                         : StrCat(FileKindName(st.st_mode), ", not a directory")));
    }
    return ErrnoStatus("cannot open directory", path, err);
  }
  return DirFd(fd, path);
}

absl::StatusOr<std::vector<std::string>> DirFd::List() const {
  const int fd = ::dup(fd_);
  if (fd < 0) return ErrnoStatus("cannot list", path_, errno);
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot list", path_, err);
  }
  ::rewinddir(d);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

absl::StatusOr<struct stat> DirFd::Stat(std::string_view name) const {
  struct stat st {};
  if (::fstatat(fd_, std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus("cannot stat", PathOf(name), errno);
  }
  return st;
}

absl::Status DirFd::Remove(std::string_view name, bool directory) const {
  if (::unlinkat(fd_, std::string(name).c_str(), directory ? AT_REMOVEDIR : 0) != 0) {
    return ErrnoStatus("cannot remove", PathOf(name), errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DirFd::ReadFile(std::string_view name, int64_t max_bytes,
                                            int64_t prefix, int64_t* size) const {
  return ReadOpened(::openat(fd_, std::string(name).c_str(), kOwnFileFlags), PathOf(name),
                    max_bytes, prefix, size);
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

std::string AtomicFile::StrCatPath(const std::string& dir, const std::string& name) {
  return StrCat(dir, "/", name);
}

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& target, mode_t final_mode) {
  const std::filesystem::path p(target);
  const std::string parent = p.has_parent_path() ? p.parent_path().string() : ".";
  absl::StatusOr<DirFd> dir = DirFd::Open(parent);
  if (!dir.ok()) {
    return absl::Status(dir.status().code(),
                        StrCat("cannot write in ", parent, " (", dir.status().message(), ")"));
  }
  return Create(*dir, p.filename().string(), final_mode);
}

absl::StatusOr<AtomicFile> AtomicFile::Create(const DirFd& dir, std::string_view name,
                                              mode_t final_mode) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  const std::string temp = StrCat(name, kTempMarker, ::getpid(), ".", rng() % 1000000007);
  const int dir_fd = ::dup(dir.fd());
  if (dir_fd < 0) return ErrnoStatus("cannot write in", dir.path(), errno);
  const int fd =
      ::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    ::close(dir_fd);
    return ErrnoStatus("cannot write in", dir.path(), err);
  }
  return AtomicFile(dir_fd, dir.path(), std::string(name), temp, fd, final_mode);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : dir_fd_(other.dir_fd_),
      dir_path_(std::move(other.dir_path_)),
      name_(std::move(other.name_)),
      temp_name_(std::move(other.temp_name_)),
      temp_path_(std::move(other.temp_path_)),
      fd_(other.fd_),
      mode_(other.mode_),
      committed_(other.committed_) {
  other.fd_ = -1;
  other.dir_fd_ = -1;
  other.committed_ = true;  // the moved-from object owns nothing
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && dir_fd_ >= 0) ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
  if (dir_fd_ >= 0) ::close(dir_fd_);
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
  if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
    return ErrnoStatus("cannot rename into", StrCatPath(dir_path_, name_), errno);
  }
  committed_ = true;
  if (::fsync(dir_fd_) != 0 && errno != EINVAL) {
    return ErrnoStatus("cannot fsync directory", dir_path_, errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<FileLock> FileLock::Take(int dir_fd, const std::string& name,
                                        const std::string& path, Mode mode, bool wait,
                                        bool create) {
  // O_NOFOLLOW: a lock that is a symlink (dangling or not) would create or lock its target,
  // wherever it points. O_NONBLOCK: a FIFO in its place opened read-only would wait for a writer.
  constexpr int kFlags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  // Read-write where it can (NFS emulates flock with fcntl locks, whose exclusive kind needs a
  // descriptor open for writing); a shared lock that must not create needs only reading.
  int fd = -1;
  if (create) {
    fd = ::openat(dir_fd, name.c_str(), O_RDWR | O_CREAT | kFlags, 0644);
  } else if (mode == Mode::kExclusive) {
    fd = ::openat(dir_fd, name.c_str(), O_RDWR | kFlags);
  }
  // Read-only: a reader's lock (never created), a read-only volume, or a lock file another user
  // made (root's, 0644), which flock(2) locks all the same on a local file system.
  if ((!create && mode == Mode::kShared) || (fd < 0 && (errno == EROFS || errno == EACCES))) {
    fd = ::openat(dir_fd, name.c_str(), O_RDONLY | kFlags);
  }
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::FailedPreconditionError(
          StrCat("lock file ", path, ": a symlink (not followed)"));
    }
    return ErrnoStatus("cannot open lock file", path, err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat lock file", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        StrCat("lock file ", path, ": ", FileKindName(st.st_mode), ", not a regular file"));
  }
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

absl::StatusOr<FileLock> FileLock::AcquireExisting(const DirFd& dir, std::string_view name,
                                                   Mode mode, bool wait) {
  return Take(dir.fd(), std::string(name), dir.PathOf(name), mode, wait, /*create=*/false);
}

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path, Mode mode) {
  return Take(AT_FDCWD, path, path, mode, /*wait=*/true);
}

absl::StatusOr<FileLock> FileLock::TryAcquire(const std::string& path, Mode mode) {
  return Take(AT_FDCWD, path, path, mode, /*wait=*/false);
}

absl::StatusOr<FileLock> FileLock::Acquire(const DirFd& dir, std::string_view name, Mode mode) {
  return Take(dir.fd(), std::string(name), dir.PathOf(name), mode, /*wait=*/true);
}

absl::StatusOr<FileLock> FileLock::TryAcquire(const DirFd& dir, std::string_view name, Mode mode) {
  return Take(dir.fd(), std::string(name), dir.PathOf(name), mode, /*wait=*/false);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace prewarm
