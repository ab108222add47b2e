// R objects for libtorch's values, R data <-> tensors, and the garbage collector's share.
//
// A tensor is an external pointer (tag: the symbol `torch_tensor`) whose address is a
// TensorImpl holding one reference, released by a C finalizer; its class is R torch's
// c("torch_tensor", "R7"). A dtype is an integer (the ScalarType) of class "torch_dtype", a
// device a string ("cpu", "cuda:0") of class "torch_device", a generator an external pointer of
// class "torch_generator".
//
// R's garbage collector sees a few dozen bytes per tensor, not its storage: left alone, a loop
// of large temporaries grows without bound before a collection comes. The bytes of each new
// storage an R tensor holds are counted; once the bytes made since the last collection (less
// those freed since: let go of by the package itself, such as nn_sequential()'s layer outputs
// (release_unreferenced()), or by R's own collections) pass half of what was alive after it (and at
// least `floor`), the collector runs, and the finalizers release the storages. It runs a young
// collection (about a millisecond here), and a full one (30-70 ms: it walks every R object, the
// package's functions included) only when the tensors still alive hold half again as much as the
// working set (at least `floor` more): tensors alive at any collection, R's own too, move to older
// generations that young collections leave alone. The counts and the time spent are kept
// (tensor_memory_stats(), read by the benchmark's R runner).
//
// A collection due while a forward pass makes a tensor on an asynchronous device (CUDA) that a
// backward pass will run through (it requires grad) waits for the end of that backward pass
// (collect_pending(), called by $backward()), up to twice the bytes that made it due. Its cost is
// the CPU's (a young collection walks R's string cache and roots whatever it frees: 1 ms here,
// 3.7-5 ms on a GPU machine's host), and the device runs what is queued meanwhile: during the
// forward pass little is (the GPU proof's seed MLP, float32: R/py 0.94-0.95, collections every
// ~28 steps at 3.7 ms), at the end of backward the whole backward pass is. The CPU queues nothing
// ahead, so there a collection is due at once wherever it runs.
//
// Only a fresh result is counted (its TensorImpl and storage held by no one else): a new R object
// for a tensor that lives elsewhere (a parameter's gradient, an in-place op's own input, a view)
// holds no new memory, and counting it made a full collection run at every training step (a full
// collection walks every R object: tens of milliseconds). The R object that counted its bytes
// carries `counted` in its protected slot, and its finalizer takes the bytes back: the count is
// the bytes R objects made, whoever frees them in the end.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Formatting.h>
#include <ATen/core/Generator.h>
#include <ATen/core/grad_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/MPSHooksInterface.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/StringUtil.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include "ampkit_r.h"

namespace ampkit_r {
namespace {

SEXP tensor_tag = nullptr;
// The REFCNT of an R tensor just made: the references the package made (release_unreferenced()).
int own_references = 0;
SEXP counted = nullptr;  // the protected slot of a tensor whose bytes `memory` counted
SEXP tensor_class = nullptr;
SEXP dtype_class = nullptr;
SEXP device_class = nullptr;
SEXP generator_tag = nullptr;
SEXP generator_class = nullptr;

using TensorPtr = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

struct Memory {
  int64_t live = 0;                   // bytes of storages held by R tensors (as counted)
  int64_t since_collection = 0;       // bytes of new storages since the last collection, less those
                                      // freed since
  int64_t live_after = 0;             // `live` after the last collection
  int64_t live_after_full = 0;        // `live` after the last full collection: the working set
  int64_t floor = int64_t{64} << 20;  // set at load: set_cpu_allocator_config()'s default
  int64_t keep_freed = int64_t{256} << 20;  // the most freed heap kept after a collection
  int64_t free_heap_low = 0;                // glibc's free heap at its low mark (above)
  int64_t collections = 0;                  // young collections run
  int64_t full_collections = 0;             // full collections run
  double seconds = 0;                       // spent in them
  bool collecting = false;
  bool pending = false;    // a collection waits for the end of a backward pass
  bool defer_cpu = false;  // CPU tensors defer it too (the tests' switch: no GPU there)
};
Memory memory;

// The bytes an R tensor newly holds: its storage's, when no one else holds the tensor or its
// storage (a fresh result, handed over: not a view, not a tensor that lives elsewhere too).
int64_t fresh_bytes(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.use_count() != 1) return 0;
  const c10::Storage& storage = t.storage();
  if (!storage || storage.use_count() != 1) return 0;
  return static_cast<int64_t>(storage.nbytes());
}

// A fresh scalar that holds a far larger storage alone gets a storage of its own size. libtorch's
// mse_loss, smooth_l1_loss, binary_cross_entropy and soft_margin_loss reduce into their
// elementwise buffer and return a 0-dim view of it (2.13; in Python too): the R object that keeps
// the loss (`loss <- loss_fn(...)`, until the next step's rebinds it) would keep the buffer, the
// size of the batch's output, until R's next collection, which the buffer's bytes bring sooner.
// Python frees it at the rebinding. The copy changes no value, and the tensor keeps its
// TensorImpl (its grad_fn, version, requires_grad): no autograd node saved the buffer (its
// storage is held by this tensor alone), so none reads the old storage.
// Storages below this bring collections too seldom to be worth a copy (a few microseconds).
constexpr int64_t kCompactFrom = int64_t{1} << 20;

// Called where fresh_bytes() (the one rule of "held alone") found at least kCompactFrom bytes;
// true when the tensor was given a storage of its own size.
bool compact_scalar(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (t.dim() != 0 || t.layout() != at::kStrided || t.is_quantized() || t.is_conj() || t.is_neg() ||
      !impl->allow_tensor_metadata_change()) {
    return false;
  }
  at::Tensor own = at::empty({}, t.options());
  {
    at::NoGradGuard no_grad;
    own.copy_(t);
  }
  impl->set_storage_keep_dtype(own.storage());
  impl->set_storage_offset(0);
  return true;
}

SEXP gc_call(bool full) {
  SEXP f = Rf_ScalarLogical(FALSE);
  SEXP call = PROTECT(Rf_lang4(Rf_install("gc"), f, f, Rf_ScalarLogical(full ? TRUE : FALSE)));
  UNPROTECT(1);
  return call;
}

void run_gc(bool full) {
  SEXP call = PROTECT(gc_call(full));
  Rf_eval(call, R_BaseEnv);
  UNPROTECT(1);
  if (full) {
    memory.full_collections += 1;
    memory.live_after_full = memory.live;
  } else {
    memory.collections += 1;
    // What is alive after any collection bounds the working set from above: it may have shrunk.
    memory.live_after_full = std::min(memory.live_after_full, memory.live);
  }
}

// glibc's free heap (free chunks, the top included), in bytes.
int64_t free_heap_bytes() {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)
  return static_cast<int64_t>(mallinfo2().fordblks);
#else
  return static_cast<int64_t>(static_cast<unsigned int>(mallinfo().fordblks));
#endif
}

// Gives glibc's free heap back to the system, and takes what it counts as free after that as the
// new low mark: malloc_trim() hands back the pages inside free chunks but leaves the chunks in
// their bins, still counted as free.
void release_freed_heap() {
  malloc_trim(0);
  memory.free_heap_low = free_heap_bytes();
}

// After a collection: when the free heap has grown by more than the bound since its low mark
// (memory freed and not reused since), all of it goes back to the system. glibc's trim threshold
// alone reaches only the free memory at the heap's top, and R's own allocations often sit above
// the tensors freed.
void release_freed_beyond_bound() {
  if (memory.keep_freed == INT64_MAX) return;
  const int64_t free_now = free_heap_bytes();
  memory.free_heap_low = std::min(memory.free_heap_low, free_now);
  if (free_now - memory.free_heap_low > memory.keep_freed) release_freed_heap();
}

// Runs R's collector (and so the finalizers of unreachable tensors): young, then full when the
// tensors still alive hold half again as much as the working set (the live bytes after the last
// full collection; at least `floor` more). Called where an R tensor was just made and protected;
// with `full` (a full collection at once), where an allocation failed.
void collect(bool full) {
  memory.collecting = true;
  const auto started = std::chrono::steady_clock::now();
  if (!full) {
    run_gc(false);
    const int64_t bound =
        memory.live_after_full + std::max(memory.floor, memory.live_after_full / 2);
    full = memory.live > bound;
  }
  if (full) run_gc(true);
  release_freed_beyond_bound();
  memory.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  memory.since_collection = 0;
  memory.live_after = memory.live;
  memory.collecting = false;
  memory.pending = false;
}

// Whether a collection due at the making of `t` may wait for the end of a backward pass (see
// the top of the file): `t` is on a device that queues work and is part of a graph.
bool defers(const at::Tensor& t) { return t.requires_grad() && (!t.is_cpu() || memory.defer_cpu); }

void finalize_tensor(SEXP x) {
  auto* impl = static_cast<c10::TensorImpl*>(R_ExternalPtrAddr(x));
  if (impl == nullptr) return;
  R_ClearExternalPtr(x);
  TensorPtr owned = TensorPtr::reclaim(impl);
  if (R_ExternalPtrProtected(x) == counted && owned->has_storage()) {
    R_SetExternalPtrProtected(x, R_NilValue);
    const int64_t bytes = static_cast<int64_t>(owned->unsafe_storage().nbytes());
    memory.live = std::max<int64_t>(0, memory.live - bytes);
    // Freed before the package's next collection (let go of, or collected by R's own): bytes
    // that collection need not find.
    memory.since_collection = std::max<int64_t>(0, memory.since_collection - bytes);
  }
}

void finalize_generator(SEXP x) {
  auto* impl = static_cast<c10::GeneratorImpl*>(R_ExternalPtrAddr(x));
  if (impl == nullptr) return;
  R_ClearExternalPtr(x);
  c10::intrusive_ptr<c10::GeneratorImpl>::reclaim(impl);
}

std::string arg_text(const char* arg) { return std::string("`") + arg + "`"; }

}  // namespace

void collect_garbage() {
  if (!memory.collecting) collect(true);
}

void collect_pending() {
  if (memory.pending && !memory.collecting) collect(false);
}

// Lets go of an R tensor's reference now, as its finalizer would at R's next collection (the
// object then reads as freed), where R's reference count says no R code holds it any more.
// R counts the references to each object from R's own structures (R >= 4.0: REFCNT): bindings,
// list elements, attributes, promises' values. The package's own are counted when a tensor is
// made (its finalizer's weak reference: 1 in R 4.2); a tensor with no more than those is one no
// R code can reach. References R does not count (C code's PROTECT) are the caller's to know of.
void release_unreferenced(SEXP x) {
  if (is_tensor(x) && REFCNT(x) <= own_references) finalize_tensor(x);
}

// ---- tensors -----------------------------------------------------------------------------------

bool is_tensor(SEXP x) { return TYPEOF(x) == EXTPTRSXP && R_ExternalPtrTag(x) == tensor_tag; }

at::Tensor tensor_of(SEXP x, const char* arg) {
  if (!is_tensor(x)) {
    value_error(arg_text(arg) + " must be a tensor, got " + describe(x) + ".");
  }
  auto* impl = static_cast<c10::TensorImpl*>(R_ExternalPtrAddr(x));
  if (impl == nullptr) {
    value_error(arg_text(arg) + " is a tensor that no longer exists (it was freed).");
  }
  return at::Tensor(TensorPtr::reclaim_copy(impl));
}

// R vectors whose memory tensors share (torch_tensor_from_buffer): preserved while a tensor holds
// them. A storage may be freed on another thread (an autograd worker, Python's): the vector is
// then released later, on R's thread, by the next tensor made.
struct SharedBuffers {
  std::thread::id r_thread;
  std::mutex mutex;
  std::vector<SEXP> released;  // by other threads, not yet given back to R
  std::atomic<bool> pending{false};
};
SharedBuffers shared_buffers;

void release_buffer(void* buffer) {
  if (std::this_thread::get_id() == shared_buffers.r_thread) {
    R_ReleaseObject(static_cast<SEXP>(buffer));
    return;
  }
  std::lock_guard<std::mutex> lock(shared_buffers.mutex);
  shared_buffers.released.push_back(static_cast<SEXP>(buffer));
  shared_buffers.pending = true;
}

void release_pending_buffers() {
  if (!shared_buffers.pending.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(shared_buffers.mutex);
  for (SEXP x : shared_buffers.released) R_ReleaseObject(x);
  shared_buffers.released.clear();
  shared_buffers.pending = false;
}

SEXP make_tensor(at::Tensor t) {
  release_pending_buffers();
  int64_t bytes = fresh_bytes(t);
  if (bytes >= kCompactFrom && compact_scalar(t)) bytes = fresh_bytes(t);
  const bool may_wait = bytes > 0 && defers(t);
  SEXP x = PROTECT(
      R_MakeExternalPtr(t.unsafeReleaseTensorImpl(), tensor_tag, bytes > 0 ? counted : R_NilValue));
  Rf_setAttrib(x, R_ClassSymbol, tensor_class);
  R_RegisterCFinalizerEx(x, finalize_tensor, TRUE);
  own_references = REFCNT(x);
  if (bytes > 0) {
    memory.live += bytes;
    memory.since_collection += bytes;
    const int64_t due = std::max(memory.floor, memory.live_after / 2);
    if (!memory.collecting && memory.since_collection > due) {
      if (may_wait && memory.since_collection <= 2 * due) {
        memory.pending = true;
      } else {
        collect(false);
      }
    }
  }
  UNPROTECT(1);
  return x;
}

// ---- dtypes, devices, generators ---------------------------------------------------------------

bool is_dtype(SEXP x) {
  return TYPEOF(x) == INTSXP && XLENGTH(x) == 1 && Rf_inherits(x, "torch_dtype");
}

c10::ScalarType dtype_of(SEXP x, const char* arg) {
  if (!is_dtype(x)) {
    value_error(arg_text(arg) + " must be a torch_dtype such as torch_float32(), got " +
                describe(x) + ".");
  }
  return static_cast<c10::ScalarType>(INTEGER(x)[0]);
}

c10::ScalarType dtype_or_name_of(SEXP x, const char* arg) {
  if (TYPEOF(x) == STRSXP) {
    // A name ("float16", "half"): the package's alias table (R/values.R) is the one home.
    SEXP call = PROTECT(Rf_lang3(Rf_install("as_torch_dtype"), x, Rf_mkString(arg)));
    SEXP d = PROTECT(eval_protected(call, package_namespace()));
    const c10::ScalarType t = dtype_of(d, arg);
    UNPROTECT(2);
    return t;
  }
  return dtype_of(x, arg);
}

bool flag_of(SEXP x, const char* arg) {
  if (TYPEOF(x) == LGLSXP && XLENGTH(x) == 1 && LOGICAL(x)[0] != NA_LOGICAL) {
    return LOGICAL(x)[0] == TRUE;
  }
  value_error(arg_text(arg) + " must be TRUE or FALSE, got " + describe(x) + ".");
}

SEXP make_dtype(c10::ScalarType type) {
  SEXP x = PROTECT(Rf_ScalarInteger(static_cast<int>(type)));
  Rf_setAttrib(x, R_ClassSymbol, dtype_class);
  UNPROTECT(1);
  return x;
}

bool is_device(SEXP x) {
  return TYPEOF(x) == STRSXP && XLENGTH(x) == 1 && Rf_inherits(x, "torch_device");
}

c10::Device device_of(SEXP x, const char* arg) {
  if (TYPEOF(x) != STRSXP || XLENGTH(x) != 1 || STRING_ELT(x, 0) == NA_STRING) {
    value_error(arg_text(arg) + " must be a torch_device or a string such as \"cpu\" or " +
                "\"cuda\", got " + describe(x) + ".");
  }
  const char* text = CHAR(STRING_ELT(x, 0));
  try {
    return c10::Device(text);
  } catch (const c10::Error&) {
    value_error(arg_text(arg) +
                " must name a device such as \"cpu\", \"cuda\" or \"cuda:1\", got \"" + text +
                "\".");
  }
}

SEXP make_device(const c10::Device& device) {
  SEXP x = PROTECT(Rf_mkString(device.str().c_str()));
  Rf_setAttrib(x, R_ClassSymbol, device_class);
  UNPROTECT(1);
  return x;
}

bool is_generator(SEXP x) { return TYPEOF(x) == EXTPTRSXP && R_ExternalPtrTag(x) == generator_tag; }

at::Generator generator_of(SEXP x) {
  auto* impl = static_cast<c10::GeneratorImpl*>(R_ExternalPtrAddr(x));
  return at::Generator(c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(impl));
}

SEXP make_generator(at::Generator g) {
  SEXP x = PROTECT(R_MakeExternalPtr(g.unsafeReleaseGeneratorImpl(), generator_tag, R_NilValue));
  Rf_setAttrib(x, R_ClassSymbol, generator_class);
  R_RegisterCFinalizerEx(x, finalize_generator, TRUE);
  UNPROTECT(1);
  return x;
}

// ---- numbers -----------------------------------------------------------------------------------

// bit64's integer64: doubles whose bits are 64-bit integers (R torch's int64 values in R).
bool is_integer64(SEXP data) { return TYPEOF(data) == REALSXP && Rf_inherits(data, "integer64"); }

int64_t integer64_at(SEXP x, R_xlen_t i, const char* arg) {
  const int64_t v = static_cast<const int64_t*>(DATAPTR_RO(x))[i];
  if (v == INT64_MIN) value_error(arg_text(arg) + " must not be NA.");  // bit64's NA
  return v;
}

bool is_number(SEXP x) {
  if (Rf_xlength(x) != 1 || OBJECT(x)) return false;
  switch (TYPEOF(x)) {
    case REALSXP:
      return !R_IsNA(REAL(x)[0]);
    case INTSXP:
      return INTEGER(x)[0] != NA_INTEGER;
    case LGLSXP:
      return LOGICAL(x)[0] != NA_LOGICAL;
    default:
      return false;
  }
}

SEXP r_int64(int64_t x) {
  if (x > INT32_MIN && x <= INT32_MAX) return Rf_ScalarInteger(static_cast<int>(x));
  return Rf_ScalarReal(static_cast<double>(x));
}

double number_of(SEXP x, const char* arg) {
  if (is_integer64(x) && XLENGTH(x) == 1) return static_cast<double>(integer64_at(x, 0, arg));
  if (!is_number(x)) value_error(arg_text(arg) + " must be a number, got " + describe(x) + ".");
  switch (TYPEOF(x)) {
    case REALSXP:
      return REAL(x)[0];
    case INTSXP:
      return INTEGER(x)[0];
    default:
      return LOGICAL(x)[0];
  }
}

namespace {
int64_t whole(double v, const char* arg, SEXP x) {
  if (!(v == std::trunc(v)) || v < -9.2233720368547758e18 || v >= 9.2233720368547758e18) {
    value_error(arg_text(arg) + " must be whole numbers, got " + describe(x) + ".");
  }
  return static_cast<int64_t>(v);
}
}  // namespace

int64_t whole_number_of(SEXP x, const char* arg) {
  if (TYPEOF(x) == INTSXP && XLENGTH(x) == 1 && INTEGER(x)[0] != NA_INTEGER) return INTEGER(x)[0];
  if (is_integer64(x) && XLENGTH(x) == 1) return integer64_at(x, 0, arg);
  if (!is_number(x) || TYPEOF(x) == LGLSXP) {
    value_error(arg_text(arg) + " must be a whole number, got " + describe(x) + ".");
  }
  return whole(REAL(x)[0], arg, x);
}

std::vector<int64_t> whole_numbers_of(SEXP x, const char* arg) {
  const R_xlen_t n = Rf_xlength(x);
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (TYPEOF(x) == INTSXP) {
    const int* v = INTEGER(x);
    for (R_xlen_t i = 0; i < n; ++i) {
      if (v[i] == NA_INTEGER) value_error(arg_text(arg) + " must not be NA.");
      out[i] = v[i];
    }
  } else if (is_integer64(x)) {
    for (R_xlen_t i = 0; i < n; ++i) out[i] = integer64_at(x, i, arg);
  } else if (TYPEOF(x) == REALSXP) {
    const double* v = REAL(x);
    for (R_xlen_t i = 0; i < n; ++i) out[i] = whole(v[i], arg, x);
  } else {
    value_error(arg_text(arg) + " must be whole numbers, got " + describe(x) + ".");
  }
  return out;
}

// Sizes given as plain R numbers (`torch_zeros(2, 3)`, `x$view(c(-1, 64))`), the common case:
// their integers, as sizes_of() and whole_numbers() (arguments.R) give them; NULL for anything
// else (names, tensors, bit64's integer64, NA, fractions, numbers beyond R's integers), which
// those read and check in R. One call where they take ~10 us.
extern "C" SEXP C_plain_sizes(SEXP dots) {
  if (TYPEOF(dots) != VECSXP || !Rf_isNull(Rf_getAttrib(dots, R_NamesSymbol))) return R_NilValue;
  R_xlen_t n = 0;
  for (R_xlen_t i = 0; i < XLENGTH(dots); ++i) {
    SEXP e = VECTOR_ELT(dots, i);
    if (OBJECT(e) || (TYPEOF(e) != INTSXP && TYPEOF(e) != REALSXP)) return R_NilValue;
    n += XLENGTH(e);
  }
  SEXP out = PROTECT(Rf_allocVector(INTSXP, n));
  int* to = INTEGER(out);
  for (R_xlen_t i = 0; i < XLENGTH(dots); ++i) {
    SEXP e = VECTOR_ELT(dots, i);
    const R_xlen_t m = XLENGTH(e);
    if (TYPEOF(e) == INTSXP) {
      const int* from = INTEGER(e);
      for (R_xlen_t j = 0; j < m; ++j) {
        if (from[j] == NA_INTEGER) return UNPROTECT(1), R_NilValue;
        *to++ = from[j];
      }
    } else {
      const double* from = REAL(e);
      for (R_xlen_t j = 0; j < m; ++j) {
        if (!(from[j] == std::trunc(from[j])) || std::fabs(from[j]) > INT_MAX) {
          return UNPROTECT(1), R_NilValue;
        }
        *to++ = static_cast<int>(from[j]);
      }
    }
  }
  UNPROTECT(1);
  return out;
}

void zero_position_error(const std::string& arg) {
  if (arg == "ignore_index") {  // a class the losses ignore, not a position: R torch's words
    value_error(
        "`ignore_index` is a 1 based class index, so it cannot be 0. Use a negative value (e.g. "
        "the default -100) for a target value that never occurs.");
  }
  value_error("Indexing starts at 1 but found a 0. `" + arg +
              "` is 1-based (the first is 1, the last -1).");
}

int64_t zero_based(int64_t index, const char* arg) {
  if (index > 0) return index - 1;
  if (index < 0) return index;
  zero_position_error(arg);
}

// ---- R data <-> tensors ------------------------------------------------------------------------

namespace {

c10::ScalarType r_storage_type(SEXP data) {
  switch (TYPEOF(data)) {
    case REALSXP:
      return is_integer64(data) ? at::kLong : at::kDouble;
    case INTSXP:
    case LGLSXP:
      return at::kInt;
    case RAWSXP:
      return at::kByte;
    case CPLXSXP:
      return at::kComplexDouble;
    default:
      value_error(
          "`data` must be a numeric, integer, logical, raw or complex vector or array, "
          "got " +
          describe(data) + ".");
  }
}

// The shape of an R vector or array: its dims, or its length.
std::vector<int64_t> r_shape(SEXP data) {
  SEXP dim = Rf_getAttrib(data, R_DimSymbol);
  if (Rf_isNull(dim)) return {static_cast<int64_t>(XLENGTH(data))};
  std::vector<int64_t> shape(static_cast<size_t>(XLENGTH(dim)));
  for (R_xlen_t i = 0; i < XLENGTH(dim); ++i) shape[i] = INTEGER(dim)[i];
  return shape;
}

// A tensor laid out as R lays out `shape` (column-major): the storage read as the reversed shape,
// then its dims reversed (a view).
at::Tensor column_major_view(at::Tensor flat_reversed, size_t ndim) {
  std::vector<int64_t> order(ndim);
  for (size_t i = 0; i < ndim; ++i) order[i] = static_cast<int64_t>(ndim - 1 - i);
  return flat_reversed.permute(order);
}

// R's NA in integers and logicals is a bit pattern (INT_MIN) that an integer or bool tensor would
// keep as a number (or as TRUE): refused, as CONFORMANCE.md says. NA in doubles is NaN, a value.
template <class T>
void refuse(const T* values, R_xlen_t n, T na, const char* why) {
  for (R_xlen_t i = 0; i < n; ++i) {
    if (values[i] == na) {
      value_error("`data` has an NA at position " + std::to_string(i + 1) + ": " + why);
    }
  }
}

void refuse_na(SEXP data) {
  const R_xlen_t n = XLENGTH(data);
  const char* integers = "integer tensors have no NA (use doubles, whose NA becomes NaN).";
  if (TYPEOF(data) == INTSXP) {
    refuse(INTEGER_RO(data), n, NA_INTEGER, integers);
  } else if (is_integer64(data)) {  // bit64's NA is the smallest int64
    refuse(static_cast<const int64_t*>(DATAPTR_RO(data)), n, INT64_MIN, integers);
  } else if (TYPEOF(data) == LGLSXP) {
    refuse(LOGICAL_RO(data), n, NA_LOGICAL, "bool tensors have no NA.");
  }
}

}  // namespace

at::Tensor tensor_from_r(SEXP data, std::optional<c10::ScalarType> dtype,
                         const c10::Device& device) {
  const c10::ScalarType stored = r_storage_type(data);
  refuse_na(data);
  const std::vector<int64_t> shape = r_shape(data);
  std::vector<int64_t> reversed(shape.rbegin(), shape.rend());
  at::Tensor host = at::empty(reversed, at::TensorOptions().dtype(stored));
  const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
  if (bytes > 0) std::memcpy(host.data_ptr(), DATAPTR_RO(data), bytes);
  c10::ScalarType target =
      dtype.value_or(is_integer64(data)        ? at::kLong
                     : TYPEOF(data) == REALSXP ? at::typeMetaToScalarType(at::get_default_dtype())
                     : TYPEOF(data) == INTSXP  ? at::kLong
                     : TYPEOF(data) == LGLSXP  ? at::kBool
                     : TYPEOF(data) == CPLXSXP
                         ? at::toComplexType(at::typeMetaToScalarType(at::get_default_dtype()))
                         : at::kByte);
  at::Tensor t = column_major_view(host, shape.size());
  if (TYPEOF(data) == LGLSXP && target != at::kBool) {
    t = t.ne(0).to(target);
  } else if (TYPEOF(data) == LGLSXP) {
    t = t.ne(0);
  } else {
    t = t.to(target);
  }
  return t.to(device).contiguous();
}

namespace {

// Whether a 64-bit or unsigned integer tensor's values are all R integers (NA_integer_,
// INT32_MIN, is none). Unsigned ones are compared as doubles: libtorch's min and max have no
// kernels for them.
bool fits_r_integers(const at::Tensor& t) {
  if (t.numel() == 0) return true;
  const at::Tensor v = t.scalar_type() == at::kLong ? t : t.to(at::kDouble);
  return v.max().item<double>() <= INT32_MAX && v.min().item<double>() > INT32_MIN;
}

}  // namespace

// R data from a tensor: doubles for floating types, integers for integral ones up to 32 bits
// (int64 too, when every value fits; doubles otherwise), logicals for bool, raw for uint8 (as R
// torch: raw vectors round-trip), complex; an array with the tensor's shape (dims for 2 or more
// dimensions, a vector for 1, a scalar for 0). Quantized tensors give their dequantized values.
SEXP r_from_tensor(const at::Tensor& tensor, bool integer64) {
  if (tensor.layout() != c10::kStrided) {
    value_error("Sparse tensors are not supported for as_array conversion. Use $to_dense() first.");
  }
  if (tensor.is_meta()) value_error("A meta tensor has no data to convert.");
  // A conjugate or negative view's values are its bits with a flag: resolved before the copy.
  at::Tensor t = tensor.detach().to(at::kCPU).resolve_conj().resolve_neg();
  if (t.is_quantized()) t = t.dequantize();
  const int64_t ndim = t.dim();
  std::vector<int64_t> order(static_cast<size_t>(ndim));
  for (int64_t i = 0; i < ndim; ++i) order[i] = ndim - 1 - i;
  t = t.permute(order).contiguous();
  const c10::ScalarType type = t.scalar_type();
  SEXPTYPE r_type;
  c10::ScalarType as;
  if (integer64) {  // bit64's integer64: int64's bits in doubles
    r_type = REALSXP;
    as = at::kLong;
  } else if (type == at::kBool) {
    r_type = LGLSXP;
    as = at::kInt;
  } else if (type == at::kByte) {
    r_type = RAWSXP;
    as = at::kByte;
  } else if (at::isComplexType(type)) {
    r_type = CPLXSXP;
    as = at::kComplexDouble;
  } else if (at::isFloatingType(type)) {
    r_type = REALSXP;
    as = at::kDouble;
  } else if ((type == at::kLong || type == at::kUInt32 || type == at::kUInt64) &&
             fits_r_integers(t)) {
    r_type = INTSXP;
    as = at::kInt;
  } else if (type == at::kLong || type == at::kUInt32 || type == at::kUInt64) {
    // R torch warns here too (it gives wrong integers; doubles are exact up to 2^53).
    TORCH_WARN(
        "Integer values beyond R's integer range are returned as doubles (exact up to 2^53); "
        "bit64::as.integer64(x) gives them exactly.");
    r_type = REALSXP;
    as = at::kDouble;
  } else {
    r_type = INTSXP;
    as = at::kInt;
  }
  t = t.to(as).contiguous();
  SEXP out = PROTECT(Rf_allocVector(r_type, t.numel()));
  if (t.numel() > 0) {
    std::memcpy(DATAPTR(out), t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  if (ndim >= 2) {
    SEXP dim = PROTECT(Rf_allocVector(INTSXP, ndim));
    for (int64_t i = 0; i < ndim; ++i) INTEGER(dim)[i] = static_cast<int>(tensor.size(i));
    Rf_setAttrib(out, R_DimSymbol, dim);
    UNPROTECT(1);
  }
  if (integer64) {  // R torch's classes: "integer64" after an array's implicit ones
    const char* classes[] = {"matrix", "array", "integer64"};
    const int first = ndim == 2 ? 0 : ndim > 2 ? 1 : 2;
    SEXP cls = PROTECT(Rf_allocVector(STRSXP, 3 - first));
    for (int i = first; i < 3; ++i) SET_STRING_ELT(cls, i - first, Rf_mkChar(classes[i]));
    Rf_setAttrib(out, R_ClassSymbol, cls);
    UNPROTECT(1);
  }
  UNPROTECT(1);
  return out;
}

// ---- .Call entries -----------------------------------------------------------------------------

extern "C" SEXP C_values_init(SEXP tensor_cls, SEXP dtype_cls, SEXP device_cls,
                              SEXP generator_cls) {
  shared_buffers.r_thread = std::this_thread::get_id();
  tensor_tag = Rf_install("torch_tensor");
  counted = Rf_install("ampkit_counted");
  generator_tag = Rf_install("torch_generator");
  for (SEXP* slot : {&tensor_class, &dtype_class, &device_class, &generator_class}) {
    if (*slot != nullptr) R_ReleaseObject(*slot);
  }
  tensor_class = tensor_cls;
  dtype_class = dtype_cls;
  device_class = device_cls;
  generator_class = generator_cls;
  for (SEXP cls : {tensor_class, dtype_class, device_class, generator_class}) {
    R_PreserveObject(cls);
    MARK_NOT_MUTABLE(cls);
  }
  return R_NilValue;
}

extern "C" SEXP C_tensor_from_r(SEXP data, SEXP dtype, SEXP device, SEXP requires_grad) {
  AMPKIT_R_BEGIN
  std::optional<c10::ScalarType> type;
  if (!Rf_isNull(dtype)) type = dtype_of(dtype, "dtype");
  const c10::Device where =
      Rf_isNull(device) ? c10::Device(c10::kCPU) : device_of(device, "device");
  at::Tensor t = tensor_from_r(data, type, where);
  if (Rf_asLogical(requires_grad) == TRUE) t.requires_grad_(true);
  return make_tensor(std::move(t));
  AMPKIT_R_END
}

// A tensor over an R vector's own memory (R torch's torch_tensor_from_buffer): writing to one
// writes to the other. `shape` is read in row-major order, as libtorch's from_blob.
extern "C" SEXP C_tensor_from_buffer(SEXP buffer, SEXP shape, SEXP dtype) {
  AMPKIT_R_BEGIN
  if (!Rf_isVectorAtomic(buffer) || TYPEOF(buffer) == STRSXP) {
    value_error("`buffer` must be a raw, numeric, integer, logical or complex vector, got " +
                describe(buffer) + ".");
  }
  const std::vector<int64_t> sizes = whole_numbers_of(shape, "shape");
  const c10::ScalarType type = dtype_of(dtype, "dtype");
  const size_t have =
      static_cast<size_t>(XLENGTH(buffer)) * (TYPEOF(buffer) == RAWSXP    ? 1
                                              : TYPEOF(buffer) == REALSXP ? sizeof(double)
                                              : TYPEOF(buffer) == CPLXSXP ? sizeof(Rcomplex)
                                                                          : sizeof(int));
  int64_t numel = 1;
  for (int64_t d : sizes) {
    if (d < 0) value_error("`shape` must not have negative sizes.");
    numel *= d;
  }
  const size_t need = static_cast<size_t>(numel) * c10::elementSize(type);
  if (need > have) {
    value_error("`shape` and `dtype` need " + std::to_string(need) + " bytes, but `buffer` has " +
                std::to_string(have) + ".");
  }
  R_PreserveObject(buffer);
  at::Tensor t;
  try {
    t = at::from_blob(
        DATAPTR(buffer), sizes, [buffer](void*) { release_buffer(buffer); },
        at::TensorOptions().dtype(type));
  } catch (...) {
    R_ReleaseObject(buffer);
    throw;
  }
  return make_tensor(std::move(t));
  AMPKIT_R_END
}

extern "C" SEXP C_r_from_tensor(SEXP x, SEXP integer64) {
  AMPKIT_R_BEGIN
  return r_from_tensor(tensor_of(x, "x"), Rf_asLogical(integer64) == TRUE);
  AMPKIT_R_END
}

extern "C" SEXP C_is_tensor(SEXP x) { return Rf_ScalarLogical(is_tensor(x)); }

// Lets go of the tensors of a list's R tensor objects now, as their finalizers would at a later
// collection: for R objects that no one reads again (an optimizer step's own objects of the
// gradients, which would otherwise keep the last step's gradients alive after
// zero_grad(set_to_none = TRUE), unseen by the collection rule: they are not fresh results).
// Other elements are left alone; a released object reads as a freed tensor.
extern "C" SEXP C_release_tensors(SEXP list) {
  if (TYPEOF(list) == VECSXP) {
    for (R_xlen_t i = 0; i < Rf_xlength(list); ++i) {
      if (is_tensor(VECTOR_ELT(list, i))) finalize_tensor(VECTOR_ELT(list, i));
    }
  }
  return R_NilValue;
}

extern "C" SEXP C_dtype_info(SEXP dtype) {
  AMPKIT_R_BEGIN
  const c10::ScalarType t = dtype_of(dtype, "dtype");
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 4));
  SET_VECTOR_ELT(out, 0, Rf_mkString(c10::toString(t)));
  SET_VECTOR_ELT(out, 1, Rf_ScalarLogical(at::isFloatingType(t)));
  SET_VECTOR_ELT(out, 2, Rf_ScalarLogical(at::isComplexType(t)));
  SET_VECTOR_ELT(out, 3, Rf_ScalarInteger(static_cast<int>(c10::elementSize(t))));
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

extern "C" SEXP C_dtype_named(SEXP name) {
  AMPKIT_R_BEGIN
  const std::string text = CHAR(STRING_ELT(name, 0));
  for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
    const auto t = static_cast<c10::ScalarType>(i);
    if (text == c10::toString(t)) return make_dtype(t);
  }
  value_error("no dtype named \"" + text + "\".");
  AMPKIT_R_END
}

extern "C" SEXP C_default_dtype(SEXP set) {
  AMPKIT_R_BEGIN
  if (!Rf_isNull(set)) {
    const c10::ScalarType t = dtype_of(set, "dtype");
    if (!at::isFloatingType(t)) {
      value_error("`dtype` must be a floating dtype such as torch_float64(), got " +
                  std::string(c10::toString(t)) + ".");
    }
    at::set_default_dtype(c10::scalarTypeToTypeMeta(t));
  }
  return make_dtype(at::typeMetaToScalarType(at::get_default_dtype()));
  AMPKIT_R_END
}

extern "C" SEXP C_device_info(SEXP device) {
  AMPKIT_R_BEGIN
  const c10::Device d = device_of(device, "device");
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 3));
  SET_VECTOR_ELT(out, 0, Rf_mkString(c10::DeviceTypeName(d.type(), /*lower_case=*/true).c_str()));
  SET_VECTOR_ELT(out, 1, d.has_index() ? Rf_ScalarInteger(d.index()) : R_NilValue);
  SET_VECTOR_ELT(out, 2, make_device(d));
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// A full collection now (the benchmark's R runner, before its timed steps): the working set is
// measured, as after any full one.
extern "C" SEXP C_memory_collect() {
  collect_garbage();
  return R_NilValue;
}

extern "C" SEXP C_memory_stats(SEXP floor_mb, SEXP defer_cpu) {
  if (!Rf_isNull(floor_mb)) {  // at least a byte; int64's range, with room
    memory.floor =
        static_cast<int64_t>(std::min(std::max(Rf_asReal(floor_mb) * (1 << 20), 1.0), 0x1p62));
  }
  if (!Rf_isNull(defer_cpu)) memory.defer_cpu = Rf_asLogical(defer_cpu) == TRUE;
  SEXP out = PROTECT(Rf_allocVector(REALSXP, 8));
  REAL(out)[0] = static_cast<double>(memory.live);
  REAL(out)[1] = static_cast<double>(memory.since_collection);
  REAL(out)[2] = static_cast<double>(memory.live_after);
  REAL(out)[3] = static_cast<double>(memory.floor);
  REAL(out)[4] = static_cast<double>(memory.collections);
  REAL(out)[5] = static_cast<double>(memory.full_collections);
  REAL(out)[6] = memory.seconds;
  REAL(out)[7] = memory.pending ? 1 : 0;
  UNPROTECT(1);
  return out;
}

}  // namespace ampkit_r

// ---- tensor metadata ---------------------------------------------------------------------------

namespace ampkit_r {

namespace {
// The TensorImpl's address as text: the key R keeps per-tensor state under (optimizers).
std::string address_of(const at::Tensor& t) {
  return std::to_string(reinterpret_cast<uintptr_t>(t.unsafeGetTensorImpl()));
}
// A list of tensors (tensors_of()), every one there: NULL has no address and no value.
std::vector<at::Tensor> defined_tensors_of(SEXP tensors) {
  std::vector<at::Tensor> ts = tensors_of(tensors, "tensors");
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].defined()) {
      value_error("`tensors` must be a list of tensors, got NULL at position " +
                  std::to_string(i + 1) + ".");
    }
  }
  return ts;
}
}  // namespace

// The keys (address_of) of a list of tensors, in one call: an optimizer's step reads them for
// every parameter (R's format() of each address cost ~10 us a tensor).
extern "C" SEXP C_tensor_addresses(SEXP tensors) {
  AMPKIT_R_BEGIN
  const std::vector<at::Tensor> ts = defined_tensors_of(tensors);
  SEXP out = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(ts.size())));
  for (size_t i = 0; i < ts.size(); ++i) {
    SET_STRING_ELT(out, static_cast<R_xlen_t>(i), Rf_mkChar(address_of(ts[i]).c_str()));
  }
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// The values of a list of one-element tensors as doubles, in one call (an optimizer's step counts,
// which $item() one by one read at ~10 us each).
extern "C" SEXP C_tensor_items(SEXP tensors) {
  AMPKIT_R_BEGIN
  const std::vector<at::Tensor> ts = defined_tensors_of(tensors);
  SEXP out = PROTECT(Rf_allocVector(REALSXP, static_cast<R_xlen_t>(ts.size())));
  for (size_t i = 0; i < ts.size(); ++i) REAL(out)[i] = ts[i].item<double>();
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// A tensor's metadata by name: "shape", "dtype", "device", "ndim", "numel", "element_size",
// "is_contiguous", "print" (libtorch's text), "impl" (the TensorImpl's address, for identity;
// "address": the same as text),
// "defined", "is_floating_point", "is_quantized", "layout", "data_ptr", "storage_offset", "stride",
// "dim" (the shape, or NULL for a freed or undefined tensor).
extern "C" SEXP C_tensor_meta(SEXP x, SEXP what) {
  AMPKIT_R_BEGIN
  const std::string field = CHAR(STRING_ELT(what, 0));
  // dim(): NULL for a freed or undefined tensor, not an error. Printers and deparsers read dim()
  // of any value, rlang's among them when it writes an error's call: an error there, raised
  // through rlang again, recursed until the C stack ran out (a freed tensor given to do.call()).
  if (!is_tensor(x) || R_ExternalPtrAddr(x) == nullptr) {
    if (field == "defined") return Rf_ScalarLogical(FALSE);
    if (field == "dim") return R_NilValue;
  }
  const at::Tensor t = tensor_of(x, "x");
  if (field == "defined") return Rf_ScalarLogical(t.defined());
  if (field == "dim" && !t.defined()) return R_NilValue;
  if (field == "impl") {
    return Rf_ScalarReal(static_cast<double>(reinterpret_cast<uintptr_t>(t.unsafeGetTensorImpl())));
  }
  if (field == "address") return Rf_mkString(address_of(t).c_str());
  if (field == "print") {
    std::ostringstream text;
    if (!t.defined()) {
      text << "[ Tensor (undefined) ]";
    } else if (t.is_meta()) {
      // libtorch's printer copies the data out, which a meta tensor has none of: its footer only
      // (R torch's "[ METAFloatType{2,3} ]").
      text << "[ " << c10::DeviceTypeName(c10::DeviceType::Meta, /*lower_case=*/false)
           << c10::toString(t.scalar_type()) << "Type{" << c10::Join(",", t.sizes()) << "} ]";
    } else {
      // Outside autograd, as PyTorch's printer: a view changed in place under no_grad would fail
      // to record the printer's own operations on it.
      at::NoGradGuard no_grad;
      text << t;
    }
    return Rf_mkString(text.str().c_str());
  }
  if (!t.defined()) throw Error("runtime_error", "the tensor is undefined.");
  if (field == "shape" || field == "dim") {
    // Integers, as R torch's; doubles where a size passes R's integers (an expanded tensor's
    // 3e9 wrapped to a negative size).
    const auto sizes = t.sizes();
    const bool wide = std::any_of(sizes.begin(), sizes.end(),
                                  [](int64_t n) { return n > std::numeric_limits<int>::max(); });
    SEXP out = PROTECT(Rf_allocVector(wide ? REALSXP : INTSXP, t.dim()));
    for (int64_t i = 0; i < t.dim(); ++i) {
      if (wide) {
        REAL(out)[i] = static_cast<double>(sizes[i]);
      } else {
        INTEGER(out)[i] = static_cast<int>(sizes[i]);
      }
    }
    UNPROTECT(1);
    return out;
  }
  if (field == "dtype") return make_dtype(t.scalar_type());
  if (field == "device") return make_device(t.device());
  if (field == "ndim") return Rf_ScalarInteger(static_cast<int>(t.dim()));
  if (field == "numel") return Rf_ScalarReal(static_cast<double>(t.numel()));
  if (field == "element_size") return Rf_ScalarInteger(static_cast<int>(t.element_size()));
  if (field == "is_contiguous") return Rf_ScalarLogical(t.is_contiguous());
  if (field == "is_channels_last") {
    return Rf_ScalarLogical(t.is_contiguous(at::MemoryFormat::ChannelsLast));
  }
  if (field == "is_floating_point") return Rf_ScalarLogical(t.is_floating_point());
  if (field == "is_quantized") return Rf_ScalarLogical(t.is_quantized());
  if (field == "layout") return Rf_ScalarInteger(static_cast<int>(t.layout()));
  if (field == "storage_offset") return Rf_ScalarReal(static_cast<double>(t.storage_offset()));
  if (field == "data_ptr") {  // a number, as PyTorch's data_ptr(): exact below 2^53
    return Rf_ScalarReal(static_cast<double>(reinterpret_cast<uintptr_t>(t.data_ptr())));
  }
  if (field == "stride") {
    // Doubles, as R torch's $stride() (int64 in libtorch).
    SEXP out = PROTECT(Rf_allocVector(REALSXP, t.dim()));
    const auto strides = t.strides();
    for (int64_t i = 0; i < t.dim(); ++i) REAL(out)[i] = static_cast<double>(strides[i]);
    UNPROTECT(1);
    return out;
  }
  value_error("no tensor field `" + field + "`.");
  AMPKIT_R_END
}

// A seed from R: bit64's integer64 (its bits: seeds are 64-bit), or a whole number from -2^63 to
// 2^64 - 1, PyTorch's range (a negative one its two's complement). Outside it, or a fraction or
// NA, is an error: cast as it was, 2^64 became 0 and 1.5 became 1.
uint64_t seed_of(SEXP seed) {
  if (is_integer64(seed) && XLENGTH(seed) == 1) {
    return static_cast<uint64_t>(integer64_at(seed, 0, "seed"));
  }
  if (!is_number(seed) || TYPEOF(seed) == LGLSXP) {
    value_error("`seed` must be a whole number, got " + describe(seed) + ".");
  }
  const double v = number_of(seed, "seed");
  if (v != std::trunc(v) || v < -9223372036854775808.0 || v >= 18446744073709551616.0) {
    value_error("`seed` must be a whole number from -2^63 to 2^64 - 1, got " + describe(seed) +
                ".");
  }
  return v < 0 ? static_cast<uint64_t>(static_cast<int64_t>(v)) : static_cast<uint64_t>(v);
}

extern "C" SEXP C_generator_new(SEXP seed) {
  AMPKIT_R_BEGIN
  at::Generator g = at::detail::createCPUGenerator();
  if (!Rf_isNull(seed)) g.set_current_seed(seed_of(seed));
  return make_generator(std::move(g));
  AMPKIT_R_END
}

extern "C" SEXP C_generator_seed(SEXP generator, SEXP seed) {
  AMPKIT_R_BEGIN
  at::Generator g = generator_of(generator);
  std::lock_guard<std::mutex> lock(g.mutex());
  if (!Rf_isNull(seed)) g.set_current_seed(seed_of(seed));
  // Exact, as bit64's integer64 (the seed may pass 2^53, where doubles stop being whole).
  SEXP out = PROTECT(Rf_allocVector(REALSXP, 1));
  const auto current = static_cast<int64_t>(g.current_seed());
  std::memcpy(REAL(out), &current, sizeof current);
  Rf_setAttrib(out, R_ClassSymbol, Rf_mkString("integer64"));
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

extern "C" SEXP C_manual_seed(SEXP seed) {
  AMPKIT_R_BEGIN
  at::manual_seed(static_cast<uint64_t>(whole_number_of(seed, "seed")));
  return R_NilValue;
  AMPKIT_R_END
}

// CUDA through libtorch's hooks (present in every build; no CUDA code here): "available",
// "count", "synchronize".
extern "C" SEXP C_cuda(SEXP what, SEXP index) {
  AMPKIT_R_BEGIN
  const std::string op = CHAR(STRING_ELT(what, 0));
  const auto& hooks = at::detail::getCUDAHooks();
  if (op == "available") return Rf_ScalarLogical(at::globalContext().hasCUDA());
  if (op == "count")
    return Rf_ScalarInteger(at::globalContext().hasCUDA() ? hooks.deviceCount() : 0);
  if (op == "synchronize") {
    if (at::globalContext().hasCUDA()) {
      hooks.deviceSynchronize(static_cast<c10::DeviceIndex>(
          Rf_isNull(index) ? hooks.getCurrentDevice() : Rf_asInteger(index)));
    }
    return R_NilValue;
  }
  if (!at::globalContext().hasCUDA()) throw Error("runtime_error", "no CUDA device is available.");
  if (op == "current_device") return Rf_ScalarInteger(hooks.getCurrentDevice());
  // CUDA's runtime version as CUDA writes it (major * 1000 + minor * 10, 12080 for 12.8).
  if (op == "runtime_version") return Rf_ScalarReal(static_cast<double>(hooks.versionCUDART()));
  const auto device = static_cast<c10::DeviceIndex>(Rf_isNull(index) ? hooks.getCurrentDevice()
                                                                     : Rf_asInteger(index));
  c10::DeviceAllocator* allocator = c10::getDeviceAllocator(c10::DeviceType::CUDA);
  if (op == "memory_stats") {
    // R torch's layout: each kind of bytes, "all" pools, its current/peak/allocated/freed.
    const auto stats = allocator->getDeviceStats(device);
    const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    const c10::CachingAllocator::Stat* kinds[] = {
        &stats.allocated_bytes[agg], &stats.reserved_bytes[agg], &stats.active_bytes[agg]};
    SEXP out = PROTECT(Rf_allocVector(VECSXP, 3));
    for (int i = 0; i < 3; ++i) {
      SEXP counts = PROTECT(Rf_allocVector(REALSXP, 4));
      REAL(counts)[0] = static_cast<double>(kinds[i]->current);
      REAL(counts)[1] = static_cast<double>(kinds[i]->peak);
      REAL(counts)[2] = static_cast<double>(kinds[i]->allocated);
      REAL(counts)[3] = static_cast<double>(kinds[i]->freed);
      SET_VECTOR_ELT(out, i, counts);
      UNPROTECT(1);
    }
    UNPROTECT(1);
    return out;
  }
  if (op == "reset_peak") {
    allocator->resetPeakStats(device);
    return R_NilValue;
  }
  if (op == "empty_cache") {
    allocator->emptyCache();
    return R_NilValue;
  }
  value_error("no CUDA query `" + op + "`.");
  AMPKIT_R_END
}

// The backends this libtorch was built with (R torch's backends_*(), PyTorch's torch.backends):
// "mkl", "mkldnn", "openmp", "mps", "cudnn" (TRUE or FALSE); "cudnn_version", cuDNN's own number
// (major * 1000 + minor * 100 + patch before 9, major * 10000 + ... since); "mps_synchronize".
extern "C" SEXP C_backend(SEXP what) {
  AMPKIT_R_BEGIN
  const std::string op = CHAR(STRING_ELT(what, 0));
  if (op == "mkl") return Rf_ScalarLogical(at::hasMKL());
  if (op == "mkldnn") return Rf_ScalarLogical(at::hasMKLDNN());
  if (op == "openmp") return Rf_ScalarLogical(at::hasOpenMP());
  if (op == "mps") return Rf_ScalarLogical(at::hasMPS());
  const bool cudnn = at::globalContext().hasCUDA() && at::globalContext().hasCuDNN();
  if (op == "cudnn") return Rf_ScalarLogical(cudnn);
  if (op == "cudnn_version") {
    if (!cudnn) throw Error("runtime_error", "CuDNN is not available.");
    return Rf_ScalarReal(static_cast<double>(at::detail::getCUDAHooks().versionCuDNN()));
  }
  if (op == "mps_synchronize") {
    if (!at::hasMPS()) throw Error("runtime_error", "MPS is not available.");
    at::detail::getMPSHooks().deviceSynchronize();
    return R_NilValue;
  }
  value_error("no backend query `" + op + "`.");
  AMPKIT_R_END
}

// glibc's malloc serves blocks of up to 32 MiB from its heap (its own adaptive limit's ceiling,
// fixed) and keeps up to `trim_mb` MiB of what it was given back (negative: all of it; mallopt()
// takes an int, so 2 GiB or more keeps all at the heap's top), for the rest of the process: at the
// heap's top by its trim threshold, elsewhere by collect()'s check. Whether glibc took it.
// - At load, 256 MiB (set_cpu_allocator_config()'s default): R frees a tensor only when it
//   collects, and then hundreds at once; glibc handed that memory back to the system after each
//   collection and faulted it in again at the next allocations (a 32x32 product from R took
//   9.9 us, 6.2 with the memory kept; Python's 6.7, freeing one at a time).
// - All of it: the benchmark runners' allocator policy (ampkit.bench.measure.steady_allocator
//   says why).
extern "C" SEXP C_keep_freed_heap(SEXP trim_mb) {
  const double mb = Rf_asReal(trim_mb);
  const double bytes = mb * (1 << 20);
  const bool all = mb < 0 || bytes >= 0x1p62;  // int64's range, with room
  const int trim = all || bytes > INT_MAX ? -1 : static_cast<int>(bytes);
  const bool took =
      mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, trim) == 1;
  if (took) {
    memory.keep_freed = all ? INT64_MAX : static_cast<int64_t>(bytes);
    memory.free_heap_low = free_heap_bytes();
  }
  return Rf_ScalarLogical(took);
}

// Gives the free memory of glibc's heap back to the system now (cpu_cache_flush()): what
// C_keep_freed_heap() let it keep.
extern "C" SEXP C_release_freed_heap() {
  release_freed_heap();
  return R_NilValue;
}

// The number of threads libtorch uses between operations (NULL reads). libtorch takes a new
// number once, before any inter-op work: its error says so.
extern "C" SEXP C_num_interop_threads(SEXP n) {
  AMPKIT_R_BEGIN
  if (!Rf_isNull(n)) {
    at::set_num_interop_threads(static_cast<int>(whole_number_of(n, "num_threads")));
  }
  return Rf_ScalarInteger(at::get_num_interop_threads());
  AMPKIT_R_END
}

// The number of threads libtorch uses for intra-op parallelism (NULL reads).
extern "C" SEXP C_num_threads(SEXP n) {
  AMPKIT_R_BEGIN
  if (!Rf_isNull(n)) at::set_num_threads(static_cast<int>(whole_number_of(n, "num_threads")));
  return Rf_ScalarInteger(at::get_num_threads());
  AMPKIT_R_END
}

}  // namespace ampkit_r

// ---- sharing tensors with Python (no copy) ------------------------------------------------------

namespace ampkit_r {

// The address of a new reference to x's TensorImpl, for Python's ampkit._C.adopt_tensor() to take
// over: the same tensor in Python, no copy.
extern "C" SEXP C_tensor_share(SEXP x) {
  AMPKIT_R_BEGIN
  at::Tensor t = tensor_of(x, "x");
  return Rf_ScalarReal(
      static_cast<double>(reinterpret_cast<uintptr_t>(t.unsafeReleaseTensorImpl())));
  AMPKIT_R_END
}

// Takes over the reference at `address` (from Python's ampkit._C.share_tensor()) as an R tensor.
extern "C" SEXP C_tensor_adopt(SEXP address) {
  AMPKIT_R_BEGIN
  auto* impl = reinterpret_cast<c10::TensorImpl*>(static_cast<uintptr_t>(Rf_asReal(address)));
  return make_tensor(
      at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim(impl)));
  AMPKIT_R_END
}

}  // namespace ampkit_r

namespace ampkit_r {

// The default CPU generator's state (a uint8 tensor); with `state`, sets it.
// The state of the default generator of the CPU (`device` NULL) or of CUDA device `device` (its
// index, checked by R); sets it to `state` unless that is NULL.
extern "C" SEXP C_rng_state(SEXP state, SEXP device) {
  AMPKIT_R_BEGIN
  if (!Rf_isNull(device) && !at::globalContext().hasCUDA()) {
    throw Error("runtime_error", "no CUDA device is available.");
  }
  at::Generator g = Rf_isNull(device) ? at::detail::getDefaultCPUGenerator()
                                      : at::detail::getCUDAHooks().getDefaultGenerator(
                                            static_cast<c10::DeviceIndex>(Rf_asInteger(device)));
  std::lock_guard<std::mutex> lock(g.mutex());
  if (!Rf_isNull(state)) {
    g.set_state(tensor_of(state, "state"));
    return R_NilValue;
  }
  return make_tensor(g.get_state());
  AMPKIT_R_END
}

}  // namespace ampkit_r
