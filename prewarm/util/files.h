// Files the way a shared cache volume needs them.
//
// AtomicFile: the content goes to a temp file in the target's directory; Commit() fsyncs it,
// sets its mode, renames it over the target and fsyncs the directory. Destroying an AtomicFile
// without Commit() removes the temp file: a crash or an error leaves no partial target (a
// SIGKILL can leave the temp file, which `prewarm gc` removes after an hour).
//
// FileLock: flock(2) on a lock file that is never deleted (the same family FlyDSL uses, so both
// coexist on one volume). Shared to read, exclusive to write. Released on destruction.
//
// Thread safety: each object is used by one thread; distinct objects are independent (flock
// locks belong to the open file, so two threads of one process exclude each other too).
#ifndef PREWARM_UTIL_FILES_H_
#define PREWARM_UTIL_FILES_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace prewarm {

// Errors name the path and the system's reason (errno text); ENOSPC and EDQUOT say "disk full".
// ResourceExhausted for a full disk and for this process's own limits (EMFILE, ENFILE, ENOMEM:
// too few file descriptors, no memory), which say nothing about the file.
absl::Status ErrnoStatus(std::string_view what, std::string_view path, int err);

absl::StatusOr<std::string> ReadFile(const std::string& path);

// A file in a volume others write to (the cache): opened without following a symlink and
// without blocking (a FIFO or device in its place is not waited on), required to be a regular
// file of at most max_bytes, and read up to `prefix` bytes (all of it when prefix < 0). NotFound
// when absent; FailedPrecondition naming the path and what it is otherwise (a symlink, a FIFO,
// a directory, a device); OutOfRange when larger than max_bytes. `size` receives the file's size.
absl::StatusOr<std::string> ReadOwnFile(const std::string& path, int64_t max_bytes, int64_t prefix,
                                        int64_t* size);
// What a file of mode `mode` (from stat or lstat) is, for messages about files that should have
// been regular: "a symlink", "a directory", "a FIFO", "a socket", "a device", "a regular file".
std::string_view FileKindName(unsigned mode);

// An input file the user named (`flag` PATH): OK when it is a regular file (symlinks followed) of
// at most max_bytes; else InvalidArgument saying what it is instead (a directory, a FIFO, a
// device: reading a FIFO or a device could block or never end) or how large it is.
absl::Status CheckInputFile(std::string_view flag, const std::string& path, int64_t max_bytes);
// Creates the directory and its parents (mode 0755 less umask).
absl::Status MakeDirs(const std::string& path);
absl::Status FsyncDir(const std::string& dir);

// A directory held open. Everything done inside it goes through its descriptor (openat,
// mkdirat, renameat, unlinkat, fstatat), one path component at a time and never through a
// symlink: a name that another process swaps for a symlink meanwhile is refused, so nothing
// reached from it can leave it. The cache store and gc work this way below the cache root.
class DirFd {
 public:
  // Opens `path` as a directory; the path itself may go through symlinks (it is the one the
  // user named). NotFound when absent; FailedPrecondition when not a directory.
  static absl::StatusOr<DirFd> Open(const std::string& path);
  DirFd(DirFd&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }
  DirFd& operator=(DirFd&& other) noexcept;
  ~DirFd();

  // The subdirectory `name` (one component), opened without following a symlink, created
  // first (mode 0755 less umask) when `create`. NotFound when absent; FailedPrecondition naming
  // it when it is a symlink or not a directory.
  absl::StatusOr<DirFd> Sub(std::string_view name, bool create) const;
  // The names it holds, without "." and "..".
  absl::StatusOr<std::vector<std::string>> List() const;
  // lstat of one name (a symlink is described, not followed).
  absl::StatusOr<struct stat> Stat(std::string_view name) const;
  // unlinkat: a file, or (`directory`) an empty directory.
  absl::Status Remove(std::string_view name, bool directory = false) const;
  // A regular file of at most max_bytes, as ReadOwnFile.
  absl::StatusOr<std::string> ReadFile(std::string_view name, int64_t max_bytes, int64_t prefix,
                                       int64_t* size) const;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view name) const;

 private:
  DirFd(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;  // for messages
};

// Marker in temp file names: "<target>.tmp.<pid>.<random>".
inline constexpr std::string_view kTempMarker = ".tmp.";

class AtomicFile {
 public:
  // Opens the temp file. Fails (with the directory named) when it cannot be created.
  static absl::StatusOr<AtomicFile> Create(const std::string& target, mode_t final_mode);
  // The same for `name` in `dir`: the temp file is created, renamed and removed through the
  // directory's descriptor, never through a symlink.
  static absl::StatusOr<AtomicFile> Create(const DirFd& dir, std::string_view name,
                                           mode_t final_mode);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  ~AtomicFile();

  absl::Status Write(std::string_view data);
  absl::Status Commit();
  const std::string& temp_path() const { return temp_path_; }

 private:
  AtomicFile(int dir_fd, std::string dir_path, std::string name, std::string temp, int fd,
             mode_t mode)
      : dir_fd_(dir_fd),
        dir_path_(std::move(dir_path)),
        name_(std::move(name)),
        temp_name_(std::move(temp)),
        temp_path_(StrCatPath(dir_path_, temp_name_)),
        fd_(fd),
        mode_(mode) {}
  static std::string StrCatPath(const std::string& dir, const std::string& name);
  int dir_fd_ = -1;  // owned (a dup)
  std::string dir_path_;
  std::string name_;
  std::string temp_name_;
  std::string temp_path_;
  int fd_ = -1;
  mode_t mode_;
  bool committed_ = false;
};

class FileLock {
 public:
  enum class Mode { kShared, kExclusive };
  // Blocks until the lock is held. Creates the lock file when it can; on a read-only volume a
  // shared lock is taken on the existing file, or NotFound/PermissionDenied is returned. An
  // existing lock file this user cannot open for writing (another user's, 0644) is locked through
  // a read-only descriptor (flock(2) does not need write access on a local file system).
  static absl::StatusOr<FileLock> Acquire(const std::string& path, Mode mode);
  // Like Acquire but returns Unavailable at once when another holder has it.
  static absl::StatusOr<FileLock> TryAcquire(const std::string& path, Mode mode);
  // The lock file `name` in `dir`, opened (created) through the directory, never a symlink.
  static absl::StatusOr<FileLock> Acquire(const DirFd& dir, std::string_view name, Mode mode);
  static absl::StatusOr<FileLock> TryAcquire(const DirFd& dir, std::string_view name, Mode mode);
  // A reader's lock: `name` in `dir` only where that lock file exists, opened read-only and
  // never created (a reader writes nothing: a lock file it made as root would later keep the
  // volume's owner from locking the entry to repair it). NotFound when there is none (the
  // rename discipline still makes the read whole); Unavailable when busy and `wait` is false.
  static absl::StatusOr<FileLock> AcquireExisting(const DirFd& dir, std::string_view name,
                                                  Mode mode, bool wait);
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  static absl::StatusOr<FileLock> Take(int dir_fd, const std::string& name, const std::string& path,
                                       Mode mode, bool wait, bool create = true);
  int fd_ = -1;
};

}  // namespace prewarm

#endif  // PREWARM_UTIL_FILES_H_
