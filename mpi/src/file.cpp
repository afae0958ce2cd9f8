#include "file.hpp"

#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "collectives.hpp"
#include "datarep.hpp"
#include "datatype.hpp"
#include "errors.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

namespace {

constexpr int kAccessModes = MPI_MODE_RDONLY | MPI_MODE_WRONLY | MPI_MODE_RDWR;
constexpr int kKnownModes = kAccessModes | MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_DELETE_ON_CLOSE |
                            MPI_MODE_UNIQUE_OPEN | MPI_MODE_APPEND | MPI_MODE_SEQUENTIAL;

// The error class of a failed POSIX call on a file, as ROMIO maps errno.
int class_of_errno(int error) {
  switch (error) {
    case ENOENT: case ENOTDIR: return MPI_ERR_NO_SUCH_FILE;
    case EACCES: case EPERM: return MPI_ERR_ACCESS;
    case EEXIST: return MPI_ERR_FILE_EXISTS;
    case EROFS: return MPI_ERR_READ_ONLY;
    case ENOSPC: return MPI_ERR_NO_SPACE;
    case EDQUOT: return MPI_ERR_QUOTA;
    case ENAMETOOLONG: case EISDIR: return MPI_ERR_BAD_FILE;
    case ETXTBSY: return MPI_ERR_FILE_IN_USE;
    default: return MPI_ERR_IO;
  }
}

[[noreturn]] void fail_errno(int error, const char* what, const std::string& path) {
  fail(class_of_errno(error), std::string(what) + " '" + path + "': " + std::strerror(error));
}

// A datatype kept by a view: predefined ones are static, derived ones copied (the program may free its own).
std::shared_ptr<const Datatype> keep(const Datatype& type) {
  if (type.predefined()) return {&type, [](const Datatype*) {}};
  return std::make_shared<const Datatype>(type);
}

// An fcntl lock on [begin, end) of a file descriptor's open file, held for the lifetime of the object;
// a descriptor of -1 locks nothing. Open-file-description locks: two opens in one process exclude each other too.
class RangeLock {
 public:
  RangeLock(int fd, Access how, MPI_Offset begin, MPI_Offset end) : fd_(fd), begin_(begin), end_(end) {
    if (fd_ >= 0) set(how == Access::read ? F_RDLCK : F_WRLCK);
  }
  ~RangeLock() {
    if (fd_ >= 0) set(F_UNLCK);
  }
  RangeLock(const RangeLock&) = delete;
  RangeLock& operator=(const RangeLock&) = delete;

 private:
  void set(short type) {
    struct flock lock {};
    lock.l_type = type;
    lock.l_whence = SEEK_SET;
    lock.l_start = begin_;
    lock.l_len = end_ - begin_;
    while (fcntl(fd_, F_OFD_SETLKW, &lock) != 0) {
      if (errno == EINTR) continue;
      if (type == F_UNLCK) return;  // nothing to undo; the lock goes with the descriptor anyway
      fail(MPI_ERR_IO, std::string("cannot lock a byte range of the file: ") + std::strerror(errno));
    }
  }
  int fd_;
  MPI_Offset begin_, end_;
};

// pread/pwrite until `length` bytes are moved; a read stops early at the end of file. Returns the bytes moved.
std::uint64_t transfer_fully(int fd, Access how, std::byte* data, std::uint64_t length, MPI_Offset offset,
                             const std::string& path) {
  std::uint64_t done = 0;
  while (done < length) {
    const std::size_t chunk = std::size_t(std::min<std::uint64_t>(length - done, 1u << 30));
    const ssize_t n = how == Access::read ? ::pread(fd, data + done, chunk, offset + MPI_Offset(done))
                                          : ::pwrite(fd, data + done, chunk, offset + MPI_Offset(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno(errno, how == Access::read ? "cannot read" : "cannot write", path);
    }
    if (n == 0) break;  // end of file (pwrite of a non-zero count does not return 0)
    done += std::uint64_t(n);
  }
  return done;
}

// What rank 0 tells the others after trying to open the file.
struct OpenReply {
  int error_class;
  int error_number;  // errno of the failed call, 0 when not a POSIX error
  char side_file[PATH_MAX];
};

// The side file for the shared file pointer: beside a regular file (so that every rank that sees the
// file sees it), else in $TMPDIR, as when the file's directory is not writable.
int make_side_file(const std::string& path, bool regular, std::string& side) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const char* tmp = std::getenv("TMPDIR");
  std::vector<std::string> candidates;
  if (regular) candidates.push_back(dir + "/." + base + ".viastack-shfp.XXXXXX");
  candidates.push_back(std::string(tmp && *tmp ? tmp : "/tmp") + "/viastack-shfp.XXXXXX");
  for (std::string& candidate : candidates) {
    if (candidate.size() >= PATH_MAX) continue;
    const int fd = ::mkostemp(candidate.data(), O_CLOEXEC);
    if (fd >= 0) {
      side = candidate;
      return fd;
    }
  }
  return -1;
}

// ROMIO's file system prefix: "ufs:" names the driver this is.
const char* strip_prefix(const char* filename) {
  require(filename != nullptr, MPI_ERR_BAD_FILE, "null file name");
  if (std::strncmp(filename, "ufs:", 4) == 0) filename += 4;
  require(*filename != '\0', MPI_ERR_BAD_FILE, "empty file name");
  return filename;
}

}  // namespace

// ---- views ----

FileView::FileView()
    : etype_(keep(datatype_of(MPI_BYTE))), filetype_(etype_) {}

FileView::FileView(MPI_Offset disp, const Datatype& etype, const Datatype& filetype)
    : disp_(disp), etype_(keep(etype)), filetype_(keep(filetype)) {
  require(disp >= 0, MPI_ERR_ARG, "the displacement must be 0 or more");
  require(etype.size() > 0, MPI_ERR_TYPE, "the etype holds no data");
  require(filetype.size() > 0 && filetype.size() % etype.size() == 0, MPI_ERR_TYPE,
          "the filetype must be made of one or more whole etypes");
  require(filetype.extent() > 0, MPI_ERR_TYPE, "the filetype's extent must be positive");
  tile_bytes_ = filetype.size();
  tile_extent_ = filetype.extent();
  std::uint64_t data = 0;
  auto add_run = [&](std::ptrdiff_t offset, std::size_t length, Scalar) {
    if (length == 0) return true;
    if (!runs_.empty() && runs_.back().offset + std::int64_t(runs_.back().length) == offset) {
      runs_.back().length += length;
    } else {
      require(offset >= 0 && (runs_.empty() || offset >= runs_.back().offset + std::int64_t(runs_.back().length)),
              MPI_ERR_TYPE, "a filetype's bytes must lie at non-negative, increasing, non-overlapping displacements");
      runs_.push_back({offset, length, data});
    }
    data += length;
    return true;
  };
  filetype.layout()->for_each_run(0, add_run);
  // One run filling the whole tile: the data is a plain stream from disp on.
  if (runs_.size() == 1 && runs_[0].offset == 0 && std::int64_t(runs_[0].length) == tile_extent_) runs_.clear();
}

std::size_t FileView::etype_size() const { return etype_->size(); }

std::vector<FileExtent> FileView::extents(std::uint64_t data_offset, std::uint64_t length) const {
  std::vector<FileExtent> out;
  if (length == 0) return out;
  if (runs_.empty()) {
    out.push_back({disp_ + MPI_Offset(data_offset), length});
    return out;
  }
  std::uint64_t tile = data_offset / tile_bytes_;
  const std::uint64_t within = data_offset % tile_bytes_;
  auto run = std::upper_bound(runs_.begin(), runs_.end(), within,
                              [](std::uint64_t at, const Run& r) { return at < r.data_start; }) - 1;
  std::uint64_t skip = within - run->data_start;
  while (length > 0) {
    const MPI_Offset at = disp_ + MPI_Offset(tile) * tile_extent_ + run->offset + MPI_Offset(skip);
    const std::uint64_t n = std::min(run->length - skip, length);
    if (!out.empty() && out.back().offset + MPI_Offset(out.back().length) == at)
      out.back().length += n;
    else
      out.push_back({at, n});
    length -= n;
    skip = 0;
    if (++run == runs_.end()) {
      run = runs_.begin();
      ++tile;
    }
  }
  return out;
}

std::uint64_t FileView::data_before(MPI_Offset file_size) const {
  if (file_size <= disp_) return 0;
  const std::uint64_t bytes = std::uint64_t(file_size - disp_);
  if (runs_.empty()) return bytes;
  const std::uint64_t tiles = bytes / std::uint64_t(tile_extent_);
  const std::int64_t rest = std::int64_t(bytes % std::uint64_t(tile_extent_));
  std::uint64_t data = tiles * tile_bytes_;
  for (const Run& r : runs_)
    if (rest > r.offset) data += std::min<std::uint64_t>(r.length, std::uint64_t(rest - r.offset));
  return data;
}

// ---- opening and closing ----

File::File(const Communicator& comm, std::string path, int amode, Hints hints, ErrhandlerRef errhandler)
    : ompi_file_t{HandleKind::file},
      comm_(std::make_unique<Communicator>(comm.shared_group(), runtime().agree_on_context(comm),
                                           ErrhandlerRef(ErrhandlerKind::returns))),
      path_(std::move(path)),
      amode_(amode),
      hints_(std::move(hints)),
      errhandler_(std::move(errhandler)) {}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
  if (shared_fd_ >= 0) ::close(shared_fd_);
  kind = HandleKind{};  // a stale handle is then recognised as invalid
}

std::unique_ptr<File> File::open(const Communicator& comm, const char* filename, int amode, Hints hints,
                                 ErrhandlerRef errhandler) {
  filename = strip_prefix(filename);

  // Every rank must give the same amode (MPI 3.1, 13.2.1); the checks below then agree everywhere.
  std::uint32_t highest = 0, lowest_inverted = 0;
  allreduce_max_u32(comm, std::uint32_t(amode), highest);
  allreduce_max_u32(comm, ~std::uint32_t(amode), lowest_inverted);
  require(highest == std::uint32_t(amode) && ~lowest_inverted == std::uint32_t(amode), MPI_ERR_NOT_SAME,
          "the ranks gave different amodes");
  require((amode & ~kKnownModes) == 0, MPI_ERR_AMODE, "unknown bits in amode");
  const int access = amode & kAccessModes;
  require(access == MPI_MODE_RDONLY || access == MPI_MODE_WRONLY || access == MPI_MODE_RDWR, MPI_ERR_AMODE,
          "amode needs exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR");
  require(!(access == MPI_MODE_RDONLY && (amode & (MPI_MODE_CREATE | MPI_MODE_EXCL))), MPI_ERR_AMODE,
          "MPI_MODE_RDONLY cannot go with MPI_MODE_CREATE or MPI_MODE_EXCL");
  require(!(access == MPI_MODE_RDWR && (amode & MPI_MODE_SEQUENTIAL)), MPI_ERR_AMODE,
          "MPI_MODE_RDWR cannot go with MPI_MODE_SEQUENTIAL");

  std::unique_ptr<File> file(new File(comm, filename, amode, std::move(hints), std::move(errhandler)));
  const Communicator& members = file->comm();
  int flags = O_CLOEXEC | (access == MPI_MODE_RDONLY ? O_RDONLY : access == MPI_MODE_WRONLY ? O_WRONLY : O_RDWR);
  const Datatype& bytes = datatype_of(MPI_BYTE);

  // Rank 0 creates the file (so that MPI_MODE_EXCL means one creator) and the side file; the others
  // open what it made. Not O_APPEND: MPI_MODE_APPEND only places the file pointers at the end.
  OpenReply reply{};
  if (members.rank() == 0) {
    const int create = (amode & MPI_MODE_CREATE ? O_CREAT : 0) | (amode & MPI_MODE_EXCL ? O_EXCL : 0);
    std::string side;
    struct stat info {};
    file->fd_ = ::open(file->path_.c_str(), flags | create, 0666);
    if (file->fd_ < 0) {
      reply = {class_of_errno(errno), errno, {}};
    } else if (::fstat(file->fd_, &info) != 0 || S_ISDIR(info.st_mode)) {
      reply = {MPI_ERR_BAD_FILE, S_ISDIR(info.st_mode) ? EISDIR : errno, {}};
    } else if ((file->shared_fd_ = make_side_file(file->path_, S_ISREG(info.st_mode), side)) < 0) {
      reply = {MPI_ERR_IO, errno, {}};
    } else {
      std::memcpy(reply.side_file, side.c_str(), side.size() + 1);
      file->store_shared(0);
    }
  }
  bcast(&reply, sizeof reply, bytes, 0, members);
  if (reply.error_class != MPI_SUCCESS) {
    if (reply.error_number != 0)
      fail(reply.error_class, "cannot open '" + file->path_ + "': " + std::strerror(reply.error_number));
    fail(reply.error_class, "cannot open '" + file->path_ + "'");
  }
  int my_error = MPI_SUCCESS, my_errno = 0;
  if (members.rank() != 0) {
    file->fd_ = ::open(file->path_.c_str(), flags);
    if (file->fd_ >= 0) file->shared_fd_ = ::open(reply.side_file, O_RDWR | O_CLOEXEC);
    if (file->fd_ < 0 || file->shared_fd_ < 0) {
      my_errno = errno;
      my_error = class_of_errno(errno);
    }
  }
  std::uint32_t any_error = 0;
  allreduce_max_u32(members, std::uint32_t(my_error), any_error);
  // Everyone has the side file open now (or gives up): its name is no longer needed.
  if (members.rank() == 0) ::unlink(reply.side_file);
  if (my_error != MPI_SUCCESS) fail(my_error, "cannot open '" + file->path_ + "': " + std::strerror(my_errno));
  require(any_error == 0, int(any_error), "another rank could not open the file");

  if (amode & MPI_MODE_APPEND) {
    file->position_ = file->end_position();
    if (members.rank() == 0) file->store_shared(file->position_);
    barrier(members);
  }
  return file;
}

void File::close() {
  if (amode_ & MPI_MODE_DELETE_ON_CLOSE) {
    barrier(*comm_);  // every rank is done with it
    if (comm_->rank() == 0 && ::unlink(path_.c_str()) != 0 && errno != ENOENT)
      fail_errno(errno, "cannot delete", path_);
  }
}

void File::add_hints(const Hints& hints) {
  for (const auto& [key, value] : hints) {
    auto it = std::find_if(hints_.begin(), hints_.end(), [&](const auto& kept) { return kept.first == key; });
    if (it == hints_.end())
      hints_.emplace_back(key, value);
    else
      it->second = value;
  }
}

// ---- collective agreement ----

void File::check_same(std::int64_t value, const char* what) const {
  std::int64_t first = value;
  bcast(&first, 1, datatype_of(MPI_INT64_T), 0, *comm_);
  std::uint32_t differs = 0;
  allreduce_max_u32(*comm_, first != value ? 1 : 0, differs);
  if (differs) fail(MPI_ERR_NOT_SAME, std::string("the ranks gave different ") + what);
}

void File::set_atomicity(bool atomic) {
  check_same(atomic, "atomicity flags");
  atomic_ = atomic;
}

// ---- size ----

void File::set_size(MPI_Offset size) {
  require(size >= 0, MPI_ERR_ARG, "negative size");
  require(!(amode_ & MPI_MODE_RDONLY), MPI_ERR_READ_ONLY, "the file was opened read-only");
  check_same(size, "sizes");
  int error = 0;
  if (comm_->rank() == 0 && ::ftruncate(fd_, size) != 0) error = errno;
  bcast(&error, 1, datatype_of(MPI_INT), 0, *comm_);
  if (error) fail_errno(error, "cannot resize", path_);
}

void File::preallocate(MPI_Offset size) {
  require_random_access();
  require(size >= 0, MPI_ERR_ARG, "negative size");
  require(!(amode_ & MPI_MODE_RDONLY), MPI_ERR_READ_ONLY, "the file was opened read-only");
  check_same(size, "sizes");
  int error = 0;
  // posix_fallocate keeps what is there and never shrinks the file.
  if (comm_->rank() == 0 && size > 0) error = ::posix_fallocate(fd_, 0, size);
  bcast(&error, 1, datatype_of(MPI_INT), 0, *comm_);
  if (error) fail_errno(error, "cannot allocate space for", path_);
}

MPI_Offset File::size() const {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) fail_errno(errno, "cannot find the size of", path_);
  return info.st_size;
}

void File::sync() {
  if (::fsync(fd_) != 0) fail_errno(errno, "cannot sync", path_);
}

// ---- views and positions ----

void File::set_view(MPI_Offset disp, const Datatype& etype, const Datatype& filetype, const char* datarep) {
  require(datarep != nullptr, MPI_ERR_UNSUPPORTED_DATAREP, "null data representation");
  const DataRepresentation* registered = find_datarep(datarep);
  require(registered != nullptr || strcasecmp(datarep, "native") == 0, MPI_ERR_UNSUPPORTED_DATAREP,
          "only \"native\" and the data representations of MPI_Register_datarep are supported");
  if (registered) {
    // Every access is of whole etypes, so with the etype's file extent equal to its size the
    // file holds as many bytes as memory's packed data, and the view maps them unchanged.
    require(etype.predefined(), MPI_ERR_UNSUPPORTED_DATAREP,
            "a registered data representation needs a predefined etype here");
    require(registered->extent_in_file(etype.public_handle()) == MPI_Aint(etype.size()), MPI_ERR_UNSUPPORTED_DATAREP,
            "a registered data representation whose file extent of the etype differs from its size in memory "
            "is not supported");
  }
  const bool sequential = amode_ & MPI_MODE_SEQUENTIAL;
  require((disp == MPI_DISPLACEMENT_CURRENT) == sequential, MPI_ERR_ARG,
          sequential ? "a file opened with MPI_MODE_SEQUENTIAL takes MPI_DISPLACEMENT_CURRENT as displacement"
                     : "MPI_DISPLACEMENT_CURRENT is only for MPI_MODE_SEQUENTIAL files");
  if (sequential) {
    // The new view starts at the byte the shared file pointer has reached, as rank 0 reads it.
    disp = comm_->rank() == 0 ? byte_offset(load_shared()) : 0;
    bcast(&disp, 1, datatype_of(MPI_OFFSET), 0, *comm_);
  }
  view_ = FileView(disp, etype, filetype);
  datarep_ = registered;
  position_ = 0;
  if (comm_->rank() == 0) store_shared(0);
  barrier(*comm_);  // nobody moves the shared pointer before it is reset
}

MPI_Offset File::end_position() const {
  const std::uint64_t etype = view_.etype_size();
  return MPI_Offset((view_.data_before(size()) + etype - 1) / etype);
}

MPI_Offset File::byte_offset(MPI_Offset position) const {
  require(position >= 0, MPI_ERR_ARG, "negative offset");
  return view_.extents(std::uint64_t(position) * view_.etype_size(), 1).front().offset;
}

MPI_Offset File::seek_target(MPI_Offset offset, int whence, MPI_Offset current) const {
  MPI_Offset target = 0;
  switch (whence) {
    case MPI_SEEK_SET: target = offset; break;
    case MPI_SEEK_CUR: target = current + offset; break;
    case MPI_SEEK_END: target = end_position() + offset; break;
    default: fail(MPI_ERR_ARG, "whence must be MPI_SEEK_SET, MPI_SEEK_CUR or MPI_SEEK_END");
  }
  require(target >= 0, MPI_ERR_ARG, "the file pointer would be before the start of the view");
  return target;
}

void File::seek(MPI_Offset offset, int whence) {
  require_random_access();
  position_ = seek_target(offset, whence, position_);
}

MPI_Offset File::position() const {
  require_random_access();
  return position_;
}

void File::require_random_access() const {
  require(!(amode_ & MPI_MODE_SEQUENTIAL), MPI_ERR_UNSUPPORTED_OPERATION,
          "a file opened with MPI_MODE_SEQUENTIAL is accessed through the shared file pointer only");
}

// ---- the shared file pointer ----

MPI_Offset File::load_shared() const {
  MPI_Offset value = 0;
  const ssize_t n = ::pread(shared_fd_, &value, sizeof value, 0);
  if (n < 0) fail_errno(errno, "cannot read the shared file pointer of", path_);
  return n == sizeof value ? value : 0;
}

void File::store_shared(MPI_Offset value) const {
  if (::pwrite(shared_fd_, &value, sizeof value, 0) != sizeof value)
    fail_errno(errno, "cannot write the shared file pointer of", path_);
}

MPI_Offset File::shared_position() const {
  RangeLock lock(shared_fd_, Access::read, 0, sizeof(MPI_Offset));
  return load_shared();
}

MPI_Offset File::fetch_add_shared(MPI_Offset amount) {
  RangeLock lock(shared_fd_, Access::write, 0, sizeof(MPI_Offset));
  const MPI_Offset before = load_shared();
  store_shared(before + amount);
  return before;
}

void File::seek_shared(MPI_Offset offset, int whence) {
  check_same(offset, "offsets");
  check_same(whence, "whence arguments");
  int error = MPI_SUCCESS;
  std::string why;
  if (comm_->rank() == 0) {
    try {
      RangeLock lock(shared_fd_, Access::write, 0, sizeof(MPI_Offset));
      store_shared(seek_target(offset, whence, load_shared()));
    } catch (const Error& e) {
      error = e.error_class;
      why = e.detail;
    }
  }
  bcast(&error, 1, datatype_of(MPI_INT), 0, *comm_);
  if (error != MPI_SUCCESS) fail(error, comm_->rank() == 0 ? why : "rank 0 could not move the shared file pointer");
}

// ---- data access ----

void File::check_access(Access how) const {
  if (how == Access::read)
    require(!(amode_ & MPI_MODE_WRONLY), MPI_ERR_ACCESS, "the file was opened write-only");
  else
    require(!(amode_ & MPI_MODE_RDONLY), MPI_ERR_READ_ONLY, "the file was opened read-only");
}

std::size_t File::access(Access how, MPI_Offset position, void* buf, std::size_t count, const Datatype& type) {
  check_access(how);
  require(position >= 0, MPI_ERR_ARG, "negative offset");
  const std::uint64_t bytes = std::uint64_t(count) * type.size();
  require(bytes % view_.etype_size() == 0, MPI_ERR_IO, "only whole etypes can be read or written");
  if (bytes == 0) return 0;
  std::vector<std::byte> staging;
  std::byte* data = static_cast<std::byte*>(buf);
  const bool converted = datarep_ && (how == Access::read ? datarep_->read : datarep_->write);
  const bool staged = converted || !type.contiguous();
  if (staged) {
    staging.resize(bytes);
    data = staging.data();
    if (how == Access::write) to_file(buf, count, type, data);
  }
  const std::vector<FileExtent> extents = view_.extents(std::uint64_t(position) * view_.etype_size(), bytes);
  const RangeLock lock(atomic_ ? fd_ : -1, how, extents.front().offset,
                       extents.back().offset + MPI_Offset(extents.back().length));
  std::uint64_t done = 0;
  for (const FileExtent& extent : extents) {
    const std::uint64_t moved = transfer_fully(fd_, how, data + done, extent.length, extent.offset, path_);
    done += moved;
    if (moved < extent.length) break;  // end of file
  }
  if (how == Access::read && staged) from_file(staging.data(), done, buf, count, type);
  return done;
}

void File::to_file(const void* buf, std::size_t count, const Datatype& type, std::byte* file_bytes) const {
  if (!datarep_ || !datarep_->write) return type.pack(buf, count, file_bytes);
  const int error = datarep_->write(const_cast<void*>(buf), type.public_handle(), int(count), file_bytes, 0,
                                    datarep_->extra_state);
  require(error == MPI_SUCCESS, error, "the data representation's write conversion failed");
}

// A read cut short by the end of file converts the whole elements it has.
void File::from_file(const std::byte* file_bytes, std::size_t bytes, void* buf, std::size_t count,
                     const Datatype& type) const {
  if (!datarep_ || !datarep_->read) return type.unpack(file_bytes, bytes, buf);
  const std::size_t whole = std::min(count, type.size() ? bytes / type.size() : count);
  if (whole == 0) return;
  const int error = datarep_->read(buf, type.public_handle(), int(whole), const_cast<std::byte*>(file_bytes), 0,
                                   datarep_->extra_state);
  require(error == MPI_SUCCESS, error, "the data representation's read conversion failed");
}

std::size_t File::access_individual(Access how, void* buf, std::size_t count, const Datatype& type) {
  const std::size_t done = access(how, position_, buf, count, type);
  position_ += MPI_Offset(done / view_.etype_size());
  return done;
}

std::size_t File::access_shared(Access how, void* buf, std::size_t count, const Datatype& type) {
  check_access(how);
  const std::uint64_t bytes = std::uint64_t(count) * type.size();
  require(bytes % view_.etype_size() == 0, MPI_ERR_IO, "only whole etypes can be read or written");
  const MPI_Offset start = fetch_add_shared(MPI_Offset(bytes / view_.etype_size()));
  return access(how, start, buf, count, type);
}

std::size_t File::access_ordered(Access how, void* buf, std::size_t count, const Datatype& type) {
  check_access(how);
  const std::uint64_t bytes = std::uint64_t(count) * type.size();
  require(bytes % view_.etype_size() == 0, MPI_ERR_IO, "only whole etypes can be read or written");
  // Every rank learns every rank's amount; rank 0 moves the shared pointer past all of it.
  const std::int64_t mine = std::int64_t(bytes / view_.etype_size());
  const std::size_t ranks = std::size_t(comm_->size());
  std::vector<std::int64_t> amounts(ranks);
  std::vector<int> ones(ranks, 1), displs(ranks);
  for (std::size_t r = 0; r < ranks; ++r) displs[r] = int(r);
  const Datatype& int64 = datatype_of(MPI_INT64_T);
  allgatherv(&mine, 1, int64, Blocks{amounts.data(), ones, displs, &int64}, *comm_);
  std::int64_t before_me = 0, total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    if (int(r) < comm_->rank()) before_me += amounts[r];
    total += amounts[r];
  }
  std::int64_t start = 0;
  if (comm_->rank() == 0) start = fetch_add_shared(total);
  bcast(&start, 1, int64, 0, *comm_);
  return access(how, start + before_me, buf, count, type);
}

void delete_file(const char* filename) {
  filename = strip_prefix(filename);
  if (::unlink(filename) != 0) fail_errno(errno, "cannot delete", filename);
}

// ---- handles ----

File& file_of(MPI_File handle) {
  require(handle != nullptr && handle != MPI_FILE_NULL && handle->kind == HandleKind::file, MPI_ERR_FILE,
          "invalid file handle");
  return *static_cast<File*>(handle);
}

ErrhandlerRef& default_file_errhandler() {
  static ErrhandlerRef handler(ErrhandlerKind::returns);
  return handler;
}

}  // namespace viastack::mpi
