// MPI-IO over POSIX files (MPI 3.1, chapter 13), what ROMIO's generic "ufs"
// driver does: every rank opens the file itself and reads and writes its own
// part with pread/pwrite through its view; collective calls move each rank's
// data the same way (no aggregation through chosen ranks). The shared file
// pointer lives in a side file that every member holds open and that is
// unlinked as soon as all have it; an fcntl lock on it makes each update
// atomic. Atomic mode locks the byte range of each access the same way.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi.hpp"
#include "comm.hpp"
#include "errhandler.hpp"
#include "info.hpp"

namespace viastack::mpi {

class Datatype;
struct DataRepresentation;

enum class Access : std::uint8_t { read, write };

// A contiguous stretch of the file.
struct FileExtent {
  MPI_Offset offset;
  std::uint64_t length;
};

// A file view (MPI 3.1, 13.3): from byte `disp` on, the filetype tiled again
// and again, its extent apart; the data visible are the filetype's bytes. A
// position counts etypes of that data.
class FileView {
 public:
  FileView();  // disp 0, etype and filetype MPI_BYTE: every byte of the file
  // Throws MPI_ERR_TYPE for an etype of size 0, a filetype that is not whole etypes,
  // or one whose bytes are not at increasing, non-negative, non-overlapping displacements.
  FileView(MPI_Offset disp, const Datatype& etype, const Datatype& filetype);

  MPI_Offset disp() const { return disp_; }
  const Datatype& etype() const { return *etype_; }
  const Datatype& filetype() const { return *filetype_; }
  std::size_t etype_size() const;

  // Where bytes [data_offset, data_offset + length) of the view's data lie, in order,
  // adjacent stretches merged.
  std::vector<FileExtent> extents(std::uint64_t data_offset, std::uint64_t length) const;
  // How many bytes of the view's data lie before file byte `file_size`.
  std::uint64_t data_before(MPI_Offset file_size) const;

 private:
  struct Run {
    std::int64_t offset;       // within a tile
    std::uint64_t length;
    std::uint64_t data_start;  // data bytes of the tile before this run
  };
  MPI_Offset disp_ = 0;
  std::shared_ptr<const Datatype> etype_, filetype_;
  std::vector<Run> runs_;  // empty when the tiles' data is one contiguous stream
  std::uint64_t tile_bytes_ = 1;
  std::int64_t tile_extent_ = 1;
};

// A split collective begun (MPI_File_*_begin) and not yet ended.
enum class SplitCollective : std::uint8_t { none, read_at_all, write_at_all, read_all, write_all, read_ordered,
                                            write_ordered };

class File : public ompi_file_t {
 public:
  // MPI_File_open, collective over comm. Throws MPI_ERR_AMODE, MPI_ERR_NOT_SAME (amodes differ)
  // or the class of what open(2) said, on every rank.
  static std::unique_ptr<File> open(const Communicator& comm, const char* filename, int amode, Hints hints,
                                    ErrhandlerRef errhandler);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // MPI_File_close, collective: removes the file for MPI_MODE_DELETE_ON_CLOSE.
  void close();

  int amode() const { return amode_; }
  const Communicator& comm() const { return *comm_; }
  const std::string& path() const { return path_; }
  const Hints& hints() const { return hints_; }
  void add_hints(const Hints& hints);
  const ErrhandlerRef& errhandler() const { return errhandler_; }
  void set_errhandler(ErrhandlerRef errhandler) { errhandler_ = std::move(errhandler); }
  bool atomic() const { return atomic_; }
  void set_atomicity(bool atomic);  // collective (MPI_ERR_NOT_SAME when ranks differ)

  // Collective: the file's size, set or grown to at least `size` (MPI_ERR_NOT_SAME when ranks differ).
  void set_size(MPI_Offset size);
  void preallocate(MPI_Offset size);
  MPI_Offset size() const;
  void sync();

  const FileView& view() const { return view_; }
  // Collective; resets both file pointers. A file opened with MPI_MODE_SEQUENTIAL takes
  // MPI_DISPLACEMENT_CURRENT, the byte the shared file pointer has reached (MPI 3.1, 13.3), and no other.
  // datarep: "native", or one registered by MPI_Register_datarep whose file extent of the etype, which
  // must be predefined, is its size in memory (else MPI_ERR_UNSUPPORTED_DATAREP, as for the others).
  void set_view(MPI_Offset disp, const Datatype& etype, const Datatype& filetype, const char* datarep);
  // The view's registered data representation; null for "native".
  const DataRepresentation* datarep() const { return datarep_; }
  // The position, in etypes, just past the view's data in the file.
  MPI_Offset end_position() const;
  MPI_Offset byte_offset(MPI_Offset position) const;

  // count elements of type at buf, read from or written to the view's data at `position` (etypes);
  // returns the bytes moved (a read stops at the end of file).
  std::size_t access(Access how, MPI_Offset position, void* buf, std::size_t count, const Datatype& type);
  // The same at the individual file pointer, which moves past what was accessed.
  std::size_t access_individual(Access how, void* buf, std::size_t count, const Datatype& type);
  // The same at the shared file pointer, moved atomically by this call's amount.
  std::size_t access_shared(Access how, void* buf, std::size_t count, const Datatype& type);
  // Collective: the ranks' data in rank order from the shared file pointer, which moves past all of it.
  std::size_t access_ordered(Access how, void* buf, std::size_t count, const Datatype& type);

  // MPI_MODE_SEQUENTIAL allows only the shared file pointer: explicit offsets, the individual
  // pointer (and seek, position) and preallocate throw MPI_ERR_UNSUPPORTED_OPERATION, as in ROMIO.
  void require_random_access() const;
  MPI_Offset position() const;
  void seek(MPI_Offset offset, int whence);
  MPI_Offset shared_position() const;
  void seek_shared(MPI_Offset offset, int whence);  // collective

  // The split collective under way, and the bytes its begin moved.
  SplitCollective split = SplitCollective::none;
  std::size_t split_bytes = 0;

 private:
  File(const Communicator& comm, std::string path, int amode, Hints hints, ErrhandlerRef errhandler);
  void check_access(Access how) const;
  void check_same(std::int64_t value, const char* what) const;
  MPI_Offset fetch_add_shared(MPI_Offset amount);
  void store_shared(MPI_Offset value) const;
  MPI_Offset load_shared() const;
  MPI_Offset seek_target(MPI_Offset offset, int whence, MPI_Offset current) const;
  // The view's data representation applied: count elements of type between memory and file bytes
  // (the data packed, converted by the representation's functions if it has them).
  void to_file(const void* buf, std::size_t count, const Datatype& type, std::byte* file_bytes) const;
  void from_file(const std::byte* file_bytes, std::size_t bytes, void* buf, std::size_t count,
                 const Datatype& type) const;

  std::unique_ptr<Communicator> comm_;  // a private copy of the communicator the file was opened on
  std::string path_;
  int amode_;
  Hints hints_;
  ErrhandlerRef errhandler_;
  int fd_ = -1;
  int shared_fd_ = -1;  // the side file holding the shared file pointer
  bool atomic_ = false;
  FileView view_;
  const DataRepresentation* datarep_ = nullptr;
  MPI_Offset position_ = 0;  // the individual file pointer, in etypes
};

// MPI_File_delete: removes the file (MPI_ERR_NO_SUCH_FILE, MPI_ERR_ACCESS, ... from unlink(2)).
void delete_file(const char* filename);

// The open file behind a handle; MPI_ERR_FILE for MPI_FILE_NULL, null, closed or foreign handles.
File& file_of(MPI_File handle);

// The error handler of MPI_FILE_NULL: what files opened from now on start with (MPI_ERRORS_RETURN at first).
ErrhandlerRef& default_file_errhandler();

}  // namespace viastack::mpi
