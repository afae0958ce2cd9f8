// C entry points: MPI-IO (file.hpp). An error in a call on a file goes to
// that file's error handler; one with no open file to blame (MPI_File_open,
// MPI_File_delete, a bad handle) to MPI_FILE_NULL's, which is
// MPI_ERRORS_RETURN unless the program sets another (MPI 3.1, 13.7).
#include <cstring>
#include <memory>

#include "c_api.hpp"
#include "datarep.hpp"
#include "file.hpp"
#include "info.hpp"

using namespace viastack::mpi;

namespace {

int raise_file_error(MPI_File file, const char* function, const Error& error) {
  const bool open = file != nullptr && file != MPI_FILE_NULL && file->kind == HandleKind::file;
  const ErrhandlerRef handler = open ? static_cast<File*>(file)->errhandler() : default_file_errhandler();
  handler.apply(&file, function, error.error_class, error_message(error));
  return error.error_class;
}

// guarded (c_api.hpp) with the file's error handler.
template <class Body>
int file_guarded(const char* function, MPI_File file, Body&& body) {
  const LibraryEntry entry;
  try {
    body();
    return MPI_SUCCESS;
  } catch (const Error& e) {
    return raise_file_error(file, function, e);
  } catch (const std::bad_alloc&) {
    return raise_file_error(file, function, Error{MPI_ERR_NO_MEM, "out of memory"});
  }
}

// Which file pointer a data access uses (MPI 3.1, 13.4.1).
enum class Pointer { explicit_offset, individual, shared, ordered };

std::size_t transfer(File& file, Access how, Pointer pointer, MPI_Offset offset, const void* buf, int count,
                     MPI_Datatype datatype) {
  check_count(count);
  const Datatype& type = datatype_of(datatype);
  check_buffer(buf, count, type);
  void* data = const_cast<void*>(buf);  // only read from when writing
  if (pointer == Pointer::explicit_offset || pointer == Pointer::individual) file.require_random_access();
  switch (pointer) {
    case Pointer::explicit_offset: return file.access(how, offset, data, std::size_t(count), type);
    case Pointer::individual: return file.access_individual(how, data, std::size_t(count), type);
    case Pointer::shared: return file.access_shared(how, data, std::size_t(count), type);
    case Pointer::ordered: return file.access_ordered(how, data, std::size_t(count), type);
  }
  return 0;
}

// A file access's status: its byte count, for MPI_Get_count and MPI_Get_elements.
void set_status(MPI_Status* status, std::size_t bytes) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  status->_cancelled = 0;
  status->_ucount = bytes;
}

int blocking(const char* function, MPI_File fh, Access how, Pointer pointer, MPI_Offset offset, const void* buf,
             int count, MPI_Datatype datatype, MPI_Status* status) {
  return file_guarded(function, fh, [&] {
    set_status(status, transfer(file_of(fh), how, pointer, offset, buf, count, datatype));
  });
}

// The non-blocking calls do the access at once (MPI 3.1, 13.4.2 allows it) and hand
// out a complete request, which MPI_Wait and MPI_Test retire as any other.
int nonblocking(const char* function, MPI_File fh, Access how, Pointer pointer, MPI_Offset offset, const void* buf,
                int count, MPI_Datatype datatype, MPI_Request* request) {
  return file_guarded(function, fh, [&] {
    File& file = file_of(fh);
    check_pointer(request, "null request pointer");
    const std::size_t bytes = transfer(file, how, pointer, offset, buf, count, datatype);
    auto* done = new Request(Request::Type::recv, nullptr);
    done->complete = true;
    done->bytes = bytes;
    *request = done;
  });
}

// Split collectives (MPI 3.1, 13.4.5): the access happens in the begin call; the end call hands out its status.
int split_begin(const char* function, MPI_File fh, SplitCollective kind, Access how, Pointer pointer,
                MPI_Offset offset, const void* buf, int count, MPI_Datatype datatype) {
  return file_guarded(function, fh, [&] {
    File& file = file_of(fh);
    require(file.split == SplitCollective::none, MPI_ERR_IO,
            "a split collective is already under way on this file (one at a time)");
    file.split_bytes = transfer(file, how, pointer, offset, buf, count, datatype);
    file.split = kind;
  });
}

int split_end(const char* function, MPI_File fh, SplitCollective kind, MPI_Status* status) {
  return file_guarded(function, fh, [&] {
    File& file = file_of(fh);
    require(file.split == kind, MPI_ERR_IO, "no matching split collective was begun on this file");
    file.split = SplitCollective::none;
    set_status(status, file.split_bytes);
  });
}

// What MPI_File_get_view hands out: predefined types themselves, copies of derived ones for the program to free.
MPI_Datatype handed_out_type(const Datatype& type) {
  return type.predefined() ? type.public_handle() : &(new Datatype(type))->handle;
}

}  // namespace

// ---- opening, closing, the file's properties ----

int MPI_File_open(MPI_Comm comm, const char* filename, int amode, MPI_Info info, MPI_File* fh) {
  return file_guarded("MPI_File_open", MPI_FILE_NULL, [&] {
    check_pointer(fh, "null output pointer");
    *fh = MPI_FILE_NULL;
    const Communicator& c = communicator_of(comm);
    Hints hints = hints_of(info);
    *fh = File::open(c, filename, amode, std::move(hints), default_file_errhandler()).release();
  });
}

int MPI_File_close(MPI_File* fh) {
  return file_guarded("MPI_File_close", fh ? *fh : MPI_FILE_NULL, [&] {
    check_pointer(fh, "null file pointer");
    File& file = file_of(*fh);
    file.close();
    delete &file;
    *fh = MPI_FILE_NULL;
  });
}

int MPI_File_delete(const char* filename, MPI_Info info) {
  return file_guarded("MPI_File_delete", MPI_FILE_NULL, [&] {
    hints_of(info);  // checks the handle; no hint changes how a file is removed
    delete_file(filename);
  });
}

int MPI_File_set_size(MPI_File fh, MPI_Offset size) {
  return file_guarded("MPI_File_set_size", fh, [&] { file_of(fh).set_size(size); });
}

int MPI_File_preallocate(MPI_File fh, MPI_Offset size) {
  return file_guarded("MPI_File_preallocate", fh, [&] { file_of(fh).preallocate(size); });
}

int MPI_File_get_size(MPI_File fh, MPI_Offset* size) {
  return file_guarded("MPI_File_get_size", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(size, "null output pointer");
    *size = file.size();
  });
}

int MPI_File_sync(MPI_File fh) {
  return file_guarded("MPI_File_sync", fh, [&] { file_of(fh).sync(); });
}

int MPI_File_get_amode(MPI_File fh, int* amode) {
  return file_guarded("MPI_File_get_amode", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(amode, "null output pointer");
    *amode = file.amode();
  });
}

int MPI_File_get_group(MPI_File fh, MPI_Group* group) {
  return file_guarded("MPI_File_get_group", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(group, "null output pointer");
    *group = &(new Group(file.comm().group().world_ranks(), runtime().world_rank()))->handle;
  });
}

int MPI_File_set_info(MPI_File fh, MPI_Info info) {
  return file_guarded("MPI_File_set_info", fh, [&] {
    File& file = file_of(fh);
    file.add_hints(hints_of(info));
  });
}

int MPI_File_get_info(MPI_File fh, MPI_Info* info_used) {
  return file_guarded("MPI_File_get_info", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(info_used, "null output pointer");
    *info_used = new Info(file.hints());
  });
}

int MPI_File_set_atomicity(MPI_File fh, int flag) {
  return file_guarded("MPI_File_set_atomicity", fh, [&] { file_of(fh).set_atomicity(flag != 0); });
}

int MPI_File_get_atomicity(MPI_File fh, int* flag) {
  return file_guarded("MPI_File_get_atomicity", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(flag, "null output pointer");
    *flag = file.atomic();
  });
}

int MPI_File_get_type_extent(MPI_File fh, MPI_Datatype datatype, MPI_Aint* extent) {
  return file_guarded("MPI_File_get_type_extent", fh, [&] {
    const File& file = file_of(fh);
    const Datatype& type = datatype_of(datatype);
    check_pointer(extent, "null output pointer");
    // "native": the extent in memory; a registered representation says a predefined type's.
    const DataRepresentation* datarep = file.datarep();
    *extent = datarep && type.predefined() ? datarep->extent_in_file(type.public_handle()) : type.extent();
  });
}

// ---- error handlers ----

int MPI_File_set_errhandler(MPI_File file, MPI_Errhandler errhandler) {
  return file_guarded("MPI_File_set_errhandler", file, [&] {
    ErrhandlerRef handler = errhandler_for(errhandler, HandleKind::file);
    if (file == MPI_FILE_NULL)
      default_file_errhandler() = std::move(handler);
    else
      file_of(file).set_errhandler(std::move(handler));
  });
}

int MPI_File_get_errhandler(MPI_File file, MPI_Errhandler* errhandler) {
  return file_guarded("MPI_File_get_errhandler", file, [&] {
    const ErrhandlerRef& handler = file == MPI_FILE_NULL ? default_file_errhandler() : file_of(file).errhandler();
    check_pointer(errhandler, "null output pointer");
    *errhandler = handed_out(handler);
  });
}

// The file's handler applied to errorcode; MPI_SUCCESS once it returns (MPI 3.1, 8.3.6).
int MPI_File_call_errhandler(MPI_File file, int errorcode) {
  return file_guarded("MPI_File_call_errhandler", file, [&] {
    const ErrhandlerRef handler = file == MPI_FILE_NULL ? default_file_errhandler() : file_of(file).errhandler();
    handler.apply(&file, "MPI_File_call_errhandler", errorcode, error_string(errorcode));
  });
}

// ---- views and file pointers ----

int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char* datarep,
                      MPI_Info info) {
  return file_guarded("MPI_File_set_view", fh, [&] {
    File& file = file_of(fh);
    const Datatype& e = datatype_of(etype);
    const Datatype& f = datatype_of(filetype);
    Hints hints = hints_of(info);
    file.set_view(disp, e, f, datarep);
    file.add_hints(hints);
  });
}

int MPI_File_get_view(MPI_File fh, MPI_Offset* disp, MPI_Datatype* etype, MPI_Datatype* filetype, char* datarep) {
  return file_guarded("MPI_File_get_view", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(disp, "null output pointer");
    check_pointer(etype, "null output pointer");
    check_pointer(filetype, "null output pointer");
    check_pointer(datarep, "null output pointer");
    *disp = file.view().disp();
    *etype = handed_out_type(file.view().etype());
    *filetype = handed_out_type(file.view().filetype());
    std::strcpy(datarep, file.datarep() ? file.datarep()->name.c_str() : "native");
  });
}

// Errors go to MPI_FILE_NULL's handler, as there is no file.
int MPI_Register_datarep(const char* datarep, MPI_Datarep_conversion_function* read_conversion_fn,
                         MPI_Datarep_conversion_function* write_conversion_fn,
                         MPI_Datarep_extent_function* dtype_file_extent_fn, void* extra_state) {
  return file_guarded("MPI_Register_datarep", MPI_FILE_NULL, [&] {
    check_pointer(datarep, "null data representation name");
    register_datarep(DataRepresentation{datarep, read_conversion_fn, write_conversion_fn, dtype_file_extent_fn,
                                        extra_state});
  });
}

int MPI_File_seek(MPI_File fh, MPI_Offset offset, int whence) {
  return file_guarded("MPI_File_seek", fh, [&] { file_of(fh).seek(offset, whence); });
}

int MPI_File_get_position(MPI_File fh, MPI_Offset* offset) {
  return file_guarded("MPI_File_get_position", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(offset, "null output pointer");
    *offset = file.position();
  });
}

int MPI_File_seek_shared(MPI_File fh, MPI_Offset offset, int whence) {
  return file_guarded("MPI_File_seek_shared", fh, [&] { file_of(fh).seek_shared(offset, whence); });
}

int MPI_File_get_position_shared(MPI_File fh, MPI_Offset* offset) {
  return file_guarded("MPI_File_get_position_shared", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(offset, "null output pointer");
    *offset = file.shared_position();
  });
}

int MPI_File_get_byte_offset(MPI_File fh, MPI_Offset offset, MPI_Offset* disp) {
  return file_guarded("MPI_File_get_byte_offset", fh, [&] {
    const File& file = file_of(fh);
    check_pointer(disp, "null output pointer");
    *disp = file.byte_offset(offset);
  });
}

// ---- data access: explicit offsets ----

int MPI_File_read_at(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype datatype,
                     MPI_Status* status) {
  return blocking("MPI_File_read_at", fh, Access::read, Pointer::explicit_offset, offset, buf, count, datatype,
                  status);
}

int MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype datatype,
                         MPI_Status* status) {
  return blocking("MPI_File_read_at_all", fh, Access::read, Pointer::explicit_offset, offset, buf, count, datatype,
                  status);
}

int MPI_File_write_at(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype datatype,
                      MPI_Status* status) {
  return blocking("MPI_File_write_at", fh, Access::write, Pointer::explicit_offset, offset, buf, count, datatype,
                  status);
}

int MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype datatype,
                          MPI_Status* status) {
  return blocking("MPI_File_write_at_all", fh, Access::write, Pointer::explicit_offset, offset, buf, count,
                  datatype, status);
}

int MPI_File_iread_at(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype datatype,
                      MPI_Request* request) {
  return nonblocking("MPI_File_iread_at", fh, Access::read, Pointer::explicit_offset, offset, buf, count, datatype,
                     request);
}

int MPI_File_iwrite_at(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype datatype,
                       MPI_Request* request) {
  return nonblocking("MPI_File_iwrite_at", fh, Access::write, Pointer::explicit_offset, offset, buf, count,
                     datatype, request);
}

int MPI_File_iread_at_all(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype datatype,
                          MPI_Request* request) {
  return nonblocking("MPI_File_iread_at_all", fh, Access::read, Pointer::explicit_offset, offset, buf, count,
                     datatype, request);
}

int MPI_File_iwrite_at_all(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype datatype,
                           MPI_Request* request) {
  return nonblocking("MPI_File_iwrite_at_all", fh, Access::write, Pointer::explicit_offset, offset, buf, count,
                     datatype, request);
}

int MPI_File_read_at_all_begin(MPI_File fh, MPI_Offset offset, void* buf, int count, MPI_Datatype datatype) {
  return split_begin("MPI_File_read_at_all_begin", fh, SplitCollective::read_at_all, Access::read,
                     Pointer::explicit_offset, offset, buf, count, datatype);
}

int MPI_File_read_at_all_end(MPI_File fh, void*, MPI_Status* status) {
  return split_end("MPI_File_read_at_all_end", fh, SplitCollective::read_at_all, status);
}

int MPI_File_write_at_all_begin(MPI_File fh, MPI_Offset offset, const void* buf, int count, MPI_Datatype datatype) {
  return split_begin("MPI_File_write_at_all_begin", fh, SplitCollective::write_at_all, Access::write,
                     Pointer::explicit_offset, offset, buf, count, datatype);
}

int MPI_File_write_at_all_end(MPI_File fh, const void*, MPI_Status* status) {
  return split_end("MPI_File_write_at_all_end", fh, SplitCollective::write_at_all, status);
}

// ---- data access: individual file pointers ----

int MPI_File_read(MPI_File fh, void* buf, int count, MPI_Datatype datatype, MPI_Status* status) {
  return blocking("MPI_File_read", fh, Access::read, Pointer::individual, 0, buf, count, datatype, status);
}

int MPI_File_read_all(MPI_File fh, void* buf, int count, MPI_Datatype datatype, MPI_Status* status) {
  return blocking("MPI_File_read_all", fh, Access::read, Pointer::individual, 0, buf, count, datatype, status);
}

int MPI_File_write(MPI_File fh, const void* buf, int count, MPI_Datatype datatype, MPI_Status* status) {
  return blocking("MPI_File_write", fh, Access::write, Pointer::individual, 0, buf, count, datatype, status);
}

int MPI_File_write_all(MPI_File fh, const void* buf, int count, MPI_Datatype datatype, MPI_Status* status) {
  return blocking("MPI_File_write_all", fh, Access::write, Pointer::individual, 0, buf, count, datatype, status);
}

int MPI_File_iread(MPI_File fh, void* buf, int count, MPI_Datatype datatype, MPI_Request* request) {
  return nonblocking("MPI_File_iread", fh, Access::read, Pointer::individual, 0, buf, count, datatype, request);
}

int MPI_File_iwrite(MPI_File fh, const void* buf, int count, MPI_Datatype datatype, MPI_Request* request) {
  return nonblocking("MPI_File_iwrite", fh, Access::write, Pointer::individual, 0, buf, count, datatype, request);
}

int MPI_File_iread_all(MPI_File fh, void* buf, int count, MPI_Datatype datatype, MPI_Request* request) {
  return nonblocking("MPI_File_iread_all", fh, Access::read, Pointer::individual, 0, buf, count, datatype, request);
}

int MPI_File_iwrite_all(MPI_File fh, const void* buf, int count, MPI_Datatype datatype, MPI_Request* request) {
  return nonblocking("MPI_File_iwrite_all", fh, Access::write, Pointer::individual, 0, buf, count, datatype,
                     request);
}

int MPI_File_read_all_begin(MPI_File fh, void* buf, int count, MPI_Datatype datatype) {
  return split_begin("MPI_File_read_all_begin", fh, SplitCollective::read_all, Access::read, Pointer::individual, 0,
                     buf, count, datatype);
}

int MPI_File_read_all_end(MPI_File fh, void*, MPI_Status* status) {
  return split_end("MPI_File_read_all_end", fh, SplitCollective::read_all, status);
}

int MPI_File_write_all_begin(MPI_File fh, const void* buf, int count, MPI_Datatype datatype) {
  return split_begin("MPI_File_write_all_begin", fh, SplitCollective::write_all, Access::write, Pointer::individual,
                     0, buf, count, datatype);
}

int MPI_File_write_all_end(MPI_File fh, const void*, MPI_Status* status) {
  return split_end("MPI_File_write_all_end", fh, SplitCollective::write_all, status);
}

// ---- data access: the shared file pointer ----

int MPI_File_read_shared(MPI_File fh, void* buf, int count, MPI_Datatype datatype, MPI_Status* status) {
  return blocking("MPI_File_read_shared", fh, Access::read, Pointer::shared, 0, buf, count, datatype, status);
}

int MPI_File_write_shared(MPI_File fh, const void* buf, int count, MPI_Datatype datatype, MPI_Status* status) {
  return blocking("MPI_File_write_shared", fh, Access::write, Pointer::shared, 0, buf, count, datatype, status);
}

int MPI_File_iread_shared(MPI_File fh, void* buf, int count, MPI_Datatype datatype, MPI_Request* request) {
  return nonblocking("MPI_File_iread_shared", fh, Access::read, Pointer::shared, 0, buf, count, datatype, request);
}

int MPI_File_iwrite_shared(MPI_File fh, const void* buf, int count, MPI_Datatype datatype, MPI_Request* request) {
  return nonblocking("MPI_File_iwrite_shared", fh, Access::write, Pointer::shared, 0, buf, count, datatype,
                     request);
}

int MPI_File_read_ordered(MPI_File fh, void* buf, int count, MPI_Datatype datatype, MPI_Status* status) {
  return blocking("MPI_File_read_ordered", fh, Access::read, Pointer::ordered, 0, buf, count, datatype, status);
}

int MPI_File_write_ordered(MPI_File fh, const void* buf, int count, MPI_Datatype datatype, MPI_Status* status) {
  return blocking("MPI_File_write_ordered", fh, Access::write, Pointer::ordered, 0, buf, count, datatype, status);
}

int MPI_File_read_ordered_begin(MPI_File fh, void* buf, int count, MPI_Datatype datatype) {
  return split_begin("MPI_File_read_ordered_begin", fh, SplitCollective::read_ordered, Access::read,
                     Pointer::ordered, 0, buf, count, datatype);
}

int MPI_File_read_ordered_end(MPI_File fh, void*, MPI_Status* status) {
  return split_end("MPI_File_read_ordered_end", fh, SplitCollective::read_ordered, status);
}

int MPI_File_write_ordered_begin(MPI_File fh, const void* buf, int count, MPI_Datatype datatype) {
  return split_begin("MPI_File_write_ordered_begin", fh, SplitCollective::write_ordered, Access::write,
                     Pointer::ordered, 0, buf, count, datatype);
}

int MPI_File_write_ordered_end(MPI_File fh, const void*, MPI_Status* status) {
  return split_end("MPI_File_write_ordered_end", fh, SplitCollective::write_ordered, status);
}
