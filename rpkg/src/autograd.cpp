// Autograd from R: backward, autograd_grad, grad mode, tensor hooks and R autograd functions.
//
// R code called by libtorch (a hook, an R autograd function's backward) runs on R's main thread
// only: R is single-threaded. A callback reached on another thread (the autograd engine runs a
// CUDA graph's nodes on its device threads) is queued for the main thread and waited for. So
// that the main thread is free to run them, a backward pass whose graph may hold R callbacks (any
// is alive) runs on a worker thread while the main thread serves the queue; with none alive it
// runs on the main thread directly (no thread handoff on the training step's path). The worker
// carries the main thread's thread-local state (grad mode, autocast). An R error in a callback
// fails the backward pass and is raised again, unchanged, once back in R.
//
// R objects held by libtorch (a hook's function, an autograd function's closures and context)
// are released on the main thread: a graph may be freed on an engine thread.
#include <ATen/ThreadLocalState.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/variable.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "ampkit_r.h"

namespace ampkit_r {
namespace {

std::thread::id main_thread;

// ---- R objects kept alive by C++, released on the main thread ----------------------------------

std::mutex release_mutex;
std::vector<SEXP> to_release;

void release_pending() {
  std::vector<SEXP> now;
  {
    std::lock_guard<std::mutex> lock(release_mutex);
    now.swap(to_release);
  }
  for (SEXP x : now) R_ReleaseObject(x);
}

// An R object held by C++: preserved while alive; released on the main thread.
struct Held {
  explicit Held(SEXP x) : value(x) { R_PreserveObject(x); }
  ~Held() {
    if (std::this_thread::get_id() == main_thread) {
      R_ReleaseObject(value);
    } else {
      std::lock_guard<std::mutex> lock(release_mutex);
      to_release.push_back(value);
    }
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  SEXP value;
};

// How many R callbacks libtorch may call (hooks, autograd function nodes) are alive.
std::atomic<int64_t> callbacks_alive{0};
struct CallbackCount {
  CallbackCount() { ++callbacks_alive; }
  ~CallbackCount() { --callbacks_alive; }
};

// ---- Python's GIL, when Python runs in this process (reticulate)
// ---------------------------------
//
// With Python's torch imported, libtorch refuses to run the autograd engine while the calling
// thread holds Python's GIL (reticulate keeps it on R's thread). The engine runs with the GIL
// released, and R code called back from it takes the GIL again while it runs (it may call
// Python). Python's C API is looked up at run time: the package does not link Python.
struct PythonApi {
  int (*is_initialized)() = nullptr;
  int (*gil_check)() = nullptr;
  void* (*save_thread)() = nullptr;
  void (*restore_thread)(void*) = nullptr;
  int (*gil_ensure)() = nullptr;
  void (*gil_release)(int) = nullptr;
  // The error a Python exception left set (python_error_message())
  void* (*err_occurred)() = nullptr;
  void (*err_fetch)(void**, void**, void**) = nullptr;
  void* (*object_str)(void*) = nullptr;
  const char* (*unicode_as_utf8)(void*) = nullptr;
  void (*dec_ref)(void*) = nullptr;
  bool found = false;
};

PythonApi look_up_python() {
  PythonApi a;
  a.is_initialized = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  a.gil_check = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_Check"));
  a.save_thread = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyEval_SaveThread"));
  a.restore_thread = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "PyEval_RestoreThread"));
  a.gil_ensure = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_Ensure"));
  a.gil_release = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "PyGILState_Release"));
  a.err_occurred = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyErr_Occurred"));
  a.err_fetch =
      reinterpret_cast<void (*)(void**, void**, void**)>(dlsym(RTLD_DEFAULT, "PyErr_Fetch"));
  a.object_str = reinterpret_cast<void* (*)(void*)>(dlsym(RTLD_DEFAULT, "PyObject_Str"));
  a.unicode_as_utf8 =
      reinterpret_cast<const char* (*)(void*)>(dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8"));
  a.dec_ref = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "Py_DecRef"));
  a.found = a.is_initialized && a.gil_check && a.save_thread && a.restore_thread && a.gil_ensure &&
            a.gil_release && a.err_occurred && a.err_fetch && a.object_str && a.unicode_as_utf8 &&
            a.dec_ref;
  return a;
}

// Looked up once, and again after reticulate started Python (C_python_started, from the
// package's reticulate.onPyInit hook): a lookup per backward would cost microseconds.
PythonApi python_api_cache;
bool python_looked_up = false;

const PythonApi& python_api() {
  if (!python_looked_up) {
    python_api_cache = look_up_python();
    python_looked_up = true;
  }
  return python_api_cache;
}

bool python_running() {
  const PythonApi& api = python_api();
  return api.found && api.is_initialized();
}

// Releases the GIL for its lifetime if this thread holds it.
struct ReleaseGil {
  ReleaseGil() {
    if (python_running() && python_api().gil_check()) state = python_api().save_thread();
  }
  ~ReleaseGil() {
    if (state != nullptr) python_api().restore_thread(state);
  }
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;
  void* state = nullptr;
};

// Takes the GIL for its lifetime (R code that may call Python), if Python runs.
struct TakeGil {
  TakeGil() {
    if (python_running()) {
      state = python_api().gil_ensure();
      taken = true;
    }
  }
  ~TakeGil() {
    if (taken) python_api().gil_release(state);
  }
  TakeGil(const TakeGil&) = delete;
  TakeGil& operator=(const TakeGil&) = delete;
  int state = 0;
  bool taken = false;
};

}  // namespace

// The message of the Python exception left set on this thread, taken (cleared), or "". An op
// whose Python dispatch mode (the autocast audit's) raised reaches R as torch's python_error,
// whose what() stays empty until built under the GIL; the exception left set made Python's next
// call fail ("returned a result with an exception set").
std::string python_error_message() {
  if (!python_running()) return "";
  const PythonApi& api = python_api();
  TakeGil gil;
  if (api.err_occurred() == nullptr) return "";
  void *type = nullptr, *value = nullptr, *traceback = nullptr;
  api.err_fetch(&type, &value, &traceback);
  std::string message;
  if (value != nullptr) {
    void* text = api.object_str(value);
    if (text != nullptr) {
      const char* utf8 = api.unicode_as_utf8(text);
      if (utf8 != nullptr) message = utf8;
      api.dec_ref(text);
    }
  }
  if (api.err_occurred() != nullptr) api.err_fetch(&type, &value, &traceback);  // str() failed
  for (void* o : {type, value, traceback}) {
    if (o != nullptr) api.dec_ref(o);
  }
  return message;
}

namespace {

// ---- running R code on the main thread ----------------------------------------------------------

struct Task {
  std::function<void()> run;
  std::promise<void> done;
  // The calling thread's state (grad mode above all: an autograd worker's is the pass's
  // create_graph), under which the main thread runs the callback, as the worker would.
  at::ThreadLocalState state;
};
std::mutex task_mutex;
std::condition_variable task_ready;
std::deque<Task*> tasks;

void on_main_thread(const std::function<void()>& fn) {
  if (std::this_thread::get_id() == main_thread) {
    TakeGil gil;
    fn();
    return;
  }
  Task task{fn, {}, at::ThreadLocalState()};
  std::future<void> done = task.done.get_future();
  {
    std::lock_guard<std::mutex> lock(task_mutex);
    tasks.push_back(&task);
  }
  task_ready.notify_all();
  done.get();  // the main thread's exception, rethrown here
}

// On the main thread: runs queued callbacks until `work` is done.
void serve(std::future<void>& work) {
  for (;;) {
    Task* task = nullptr;
    {
      std::unique_lock<std::mutex> lock(task_mutex);
      task_ready.wait_for(lock, std::chrono::milliseconds(1), [] { return !tasks.empty(); });
      if (!tasks.empty()) {
        task = tasks.front();
        tasks.pop_front();
      }
    }
    if (task != nullptr) {
      try {
        TakeGil gil;
        at::ThreadLocalStateGuard as_caller(task->state);
        task->run();
        task->done.set_value();
      } catch (...) {
        task->done.set_exception(std::current_exception());
      }
      continue;
    }
    if (work.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return;
  }
}

// Runs `fn` (an autograd pass): on the main thread when no R callback is alive, else on a worker
// with the main thread serving callbacks.
void run_autograd(const std::function<void()>& fn) {
  release_pending();
  ReleaseGil no_gil;
  if (callbacks_alive.load() == 0) {
    fn();
    return;
  }
  const at::ThreadLocalState state;
  std::packaged_task<void()> work([&] {
    at::ThreadLocalStateGuard guard(state);
    fn();
  });
  std::future<void> done = work.get_future();
  std::thread worker(std::move(work));
  serve(done);
  worker.join();
  done.get();
  release_pending();
}

bool flag(SEXP x) { return Rf_asLogical(x) == TRUE; }

// Calls the R function `fn` with `args` (an R list) on the main thread.
SEXP call_r(SEXP fn, SEXP args) {
  SEXP call = PROTECT(Rf_lcons(fn, Rf_VectorToPairList(args)));
  SEXP out = eval_protected(call, R_GlobalEnv);
  UNPROTECT(1);
  return out;
}

// ---- R autograd functions -----------------------------------------------------------------------

// The R side of one application: its forward and backward and the R context object.
struct RClosures : torch::CustomClassHolder {
  RClosures(SEXP forward, SEXP backward, SEXP ctx)
      : forward(forward), backward(backward), ctx(ctx) {}
  Held forward, backward, ctx;
  CallbackCount count;
};

SEXP ctx_tag = nullptr;

// The AutogradContext an R context object may use while its forward or backward runs.
SEXP ctx_pointer(torch::autograd::AutogradContext* ctx) {
  return R_MakeExternalPtr(ctx, ctx_tag, R_NilValue);
}

torch::autograd::AutogradContext* context_of(SEXP x) {
  if (TYPEOF(x) != EXTPTRSXP || R_ExternalPtrTag(x) != ctx_tag || R_ExternalPtrAddr(x) == nullptr) {
    throw Error("runtime_error",
                "the autograd context is only usable inside its forward() and backward().");
  }
  return static_cast<torch::autograd::AutogradContext*>(R_ExternalPtrAddr(x));
}

c10::intrusive_ptr<RClosures> closures_of(torch::autograd::AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<RClosures>(ctx->saved_data.at("r").toCapsule());
}

// Calls the R function `runner` (the package's autograd_call(), which binds the context and
// calls the user's function) with the context pointer and the tensors; returns its tensors.
std::vector<at::Tensor> run_r_step(SEXP runner, torch::autograd::AutogradContext* ctx, SEXP r_ctx,
                                   const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  on_main_thread([&] {
    SEXP pointer = PROTECT(ctx_pointer(ctx));
    SEXP args = PROTECT(Rf_allocVector(VECSXP, 3));
    SET_VECTOR_ELT(args, 0, r_ctx);
    SET_VECTOR_ELT(args, 1, pointer);
    SET_VECTOR_ELT(args, 2, tensor_list(tensors));
    SEXP result = PROTECT(call_r(runner, args));
    R_ClearExternalPtr(pointer);
    out = tensors_of(result, "result");
    UNPROTECT(3);
  });
  return out;
}

// The inputs travel as a TensorList: Function::apply finds the node's inputs among its
// arguments by type (a Tensor, an optional Tensor or a TensorList), and a std::vector is none.
struct RFunction : torch::autograd::Function<RFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                at::TensorList inputs,
                                                c10::intrusive_ptr<RClosures> closures) {
    ctx->saved_data["r"] = c10::IValue::make_capsule(closures);
    return run_r_step(closures->forward.value, ctx, closures->ctx.value, inputs.vec());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto closures = closures_of(ctx);
    auto out = run_r_step(closures->backward.value, ctx, closures->ctx.value, grads);
    out.emplace_back();  // forward's last argument, the closures, has no gradient
    return out;
  }
};

// ---- hooks --------------------------------------------------------------------------------------

struct RHook {
  explicit RHook(SEXP fn) : fn(fn) {}
  Held fn;
  CallbackCount count;
};

SEXP node_tag = nullptr;

// How libtorch holds graph nodes (a shared_ptr up to torch 2.12, an intrusive_ptr since).
using NodePtr = std::decay_t<decltype(std::declval<const at::Tensor&>().grad_fn())>;

void finalize_node(SEXP x) {
  auto* p = static_cast<NodePtr*>(R_ExternalPtrAddr(x));
  if (p == nullptr) return;
  R_ClearExternalPtr(x);
  delete p;
}

SEXP make_node(const NodePtr& node) {
  if (!node) return R_NilValue;
  SEXP x = PROTECT(R_MakeExternalPtr(new NodePtr(node), node_tag, R_NilValue));
  R_RegisterCFinalizerEx(x, finalize_node, TRUE);
  Rf_setAttrib(x, R_ClassSymbol, Rf_mkString("autograd_node"));
  UNPROTECT(1);
  return x;
}

}  // namespace

std::vector<at::Tensor> tensors_of(SEXP list, const char* arg) {
  std::vector<at::Tensor> out;
  if (is_tensor(list)) {
    out.push_back(tensor_of(list, arg));
    return out;
  }
  if (!Rf_isNull(list) && TYPEOF(list) != VECSXP) {
    value_error(std::string("`") + arg + "` must be a list of tensors, got " + describe(list) +
                ".");
  }
  for (R_xlen_t i = 0; i < Rf_xlength(list); ++i) {
    SEXP e = VECTOR_ELT(list, i);
    out.push_back(Rf_isNull(e) ? at::Tensor() : tensor_of(e, arg));
  }
  return out;
}

SEXP tensor_list(std::vector<at::Tensor> tensors) {
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(tensors.size())));
  for (size_t i = 0; i < tensors.size(); ++i) {
    SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), make_tensor(std::move(tensors[i])));
  }
  UNPROTECT(1);
  return out;
}

extern "C" SEXP C_autograd_init() {
  main_thread = std::this_thread::get_id();
  ctx_tag = Rf_install("ampkit_autograd_context");
  node_tag = Rf_install("ampkit_autograd_node");
  return R_NilValue;
}

// Python has started in this process (reticulate): look its C API up again.
extern "C" SEXP C_python_started() {
  python_looked_up = false;
  return R_NilValue;
}

// Whether the calling thread is R's main thread: what an R callback run by libtorch must see
// (the tests ask it from hooks and autograd functions).
extern "C" SEXP C_on_r_thread() {
  return Rf_ScalarLogical(std::this_thread::get_id() == main_thread);
}

extern "C" SEXP C_grad_mode(SEXP enabled) {
  AMPKIT_R_BEGIN
  const bool before = at::GradMode::is_enabled();
  if (!Rf_isNull(enabled)) at::GradMode::set_enabled(flag(enabled));
  return Rf_ScalarLogical(before);
  AMPKIT_R_END
}

extern "C" SEXP C_anomaly_mode(SEXP enabled) {
  AMPKIT_R_BEGIN
  const bool before = torch::autograd::AnomalyMode::is_enabled();
  torch::autograd::AnomalyMode::set_enabled(flag(enabled));
  return Rf_ScalarLogical(before);
  AMPKIT_R_END
}

extern "C" SEXP C_backward(SEXP tensors, SEXP grads, SEXP retain_graph, SEXP create_graph,
                           SEXP inputs) {
  AMPKIT_R_BEGIN
  const auto outs = tensors_of(tensors, "tensors");
  const auto gs = tensors_of(grads, "grad_tensors");
  const auto ins = tensors_of(inputs, "inputs");
  std::optional<bool> retain;
  if (!Rf_isNull(retain_graph)) retain = flag(retain_graph);
  const bool create = flag(create_graph);
  run_autograd([&] { torch::autograd::backward(outs, gs, retain, create, ins); });
  // The device has the whole backward pass queued: a collection due since the forward pass
  // costs it nothing now.
  collect_pending();
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_autograd_grad(SEXP outputs, SEXP inputs, SEXP grad_outputs, SEXP retain_graph,
                                SEXP create_graph, SEXP allow_unused) {
  AMPKIT_R_BEGIN
  const auto outs = tensors_of(outputs, "outputs");
  const auto ins = tensors_of(inputs, "inputs");
  const auto gs = tensors_of(grad_outputs, "grad_outputs");
  std::optional<bool> retain;
  if (!Rf_isNull(retain_graph)) retain = flag(retain_graph);
  torch::autograd::variable_list result;
  run_autograd([&] {
    result = torch::autograd::grad(outs, ins, gs, retain, flag(create_graph), flag(allow_unused));
  });
  collect_pending();  // as after $backward()
  return tensor_list(std::move(result));
  AMPKIT_R_END
}

// Reads (value NULL) or sets a tensor's autograd field: "requires_grad", "grad", "is_leaf",
// "retains_grad", "grad_fn", "version", "output_nr".
extern "C" SEXP C_tensor_autograd(SEXP x, SEXP field, SEXP value) {
  AMPKIT_R_BEGIN
  at::Tensor t = tensor_of(x, "x");
  const std::string what = CHAR(STRING_ELT(field, 0));
  if (what == "requires_grad") {
    if (!Rf_isNull(value)) t.set_requires_grad(flag(value));
    return Rf_ScalarLogical(t.requires_grad());
  }
  if (what == "grad") {
    if (Rf_isNull(value)) return make_tensor(t.grad());
    if (TYPEOF(value) == LGLSXP && XLENGTH(value) == 1 && LOGICAL(value)[0] == FALSE) {
      t.mutable_grad() = at::Tensor();  // R's `x$grad <- NULL`
      return R_NilValue;
    }
    if (!is_tensor(value))
      value_error("`grad` must be a tensor or NULL, got " + describe(value) + ".");
    const at::Tensor g = tensor_of(value, "grad");
    // PyTorch's checks of an assigned gradient (its Tensor.grad setter's words)
    if (g.scalar_type() != t.scalar_type()) {
      value_error(std::string("attempting to assign a gradient with dtype '") +
                  c10::toString(g.scalar_type()) + "' to a tensor with dtype '" +
                  c10::toString(t.scalar_type()) +
                  "'. Please ensure that the gradient and the tensor have the same dtype");
    }
    if (g.device() != t.device()) {
      value_error("attempting to assign a gradient on " + g.device().str() + " to a tensor on " +
                  t.device().str() + ". Please ensure that the gradient and the tensor are on " +
                  "the same device");
    }
    if (!g.is_sparse() && g.sizes() != t.sizes()) {
      value_error("attempting to assign a gradient of size '" + c10::str(g.sizes()) +
                  "' to a tensor of size '" + c10::str(t.sizes()) +
                  "'. Please ensure that the gradient and the tensor are the same size");
    }
    t.mutable_grad() = g;
    return R_NilValue;
  }
  if (what == "is_leaf") return Rf_ScalarLogical(t.is_leaf());
  if (what == "retains_grad") return Rf_ScalarLogical(t.retains_grad());
  if (what == "grad_fn") return make_node(t.grad_fn());
  if (what == "version") return Rf_ScalarReal(static_cast<double>(t._version()));
  value_error("no autograd field `" + what + "`.");
  AMPKIT_R_END
}

// The gradients of a list of tensors: a list with NULL where a tensor has none (one call for an
// optimizer's step).
extern "C" SEXP C_grads(SEXP params) {
  AMPKIT_R_BEGIN
  const R_xlen_t n = Rf_xlength(params);
  SEXP out = PROTECT(Rf_allocVector(VECSXP, n));
  for (R_xlen_t i = 0; i < n; ++i) {
    const at::Tensor& g = tensor_of(VECTOR_ELT(params, i), "params").grad();
    if (g.defined()) SET_VECTOR_ELT(out, i, make_tensor(g));
  }
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

// Zeroes the gradients of a list of tensors in place (detached first), or removes them.
extern "C" SEXP C_zero_grad(SEXP params, SEXP set_to_none) {
  AMPKIT_R_BEGIN
  const bool none = flag(set_to_none);
  at::NoGradGuard no_grad;
  for (R_xlen_t i = 0; i < Rf_xlength(params); ++i) {
    at::Tensor t = tensor_of(VECTOR_ELT(params, i), "params");
    at::Tensor& g = t.mutable_grad();
    if (!g.defined()) continue;
    if (none) {
      g.reset();
    } else {
      if (g.grad_fn()) {
        g = g.detach();
      } else {
        g.requires_grad_(false);
      }
      g.zero_();
    }
  }
  return R_NilValue;
  AMPKIT_R_END
}

extern "C" SEXP C_node_info(SEXP node) {
  AMPKIT_R_BEGIN
  auto* p = static_cast<NodePtr*>(R_ExternalPtrAddr(node));
  if (p == nullptr) throw Error("runtime_error", "this autograd node no longer exists.");
  const auto& n = **p;
  SEXP out = PROTECT(Rf_allocVector(VECSXP, 2));
  SET_VECTOR_ELT(out, 0, Rf_mkString(n.name().c_str()));
  SEXP next = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(n.num_outputs())));
  for (uint32_t i = 0; i < n.num_outputs(); ++i) {
    SET_VECTOR_ELT(next, i, make_node(n.next_edge(i).function));
  }
  SET_VECTOR_ELT(out, 1, next);
  UNPROTECT(2);
  return out;
  AMPKIT_R_END
}

// A hook: fn(grad) runs on the main thread; a tensor it returns replaces the gradient.
extern "C" SEXP C_register_hook(SEXP x, SEXP fn) {
  AMPKIT_R_BEGIN
  at::Tensor t = tensor_of(x, "x");
  auto hook = std::make_shared<RHook>(fn);
  const unsigned pos = t.register_hook([hook](const at::Tensor& grad) -> at::Tensor {
    at::Tensor replaced;
    on_main_thread([&] {
      SEXP args = PROTECT(Rf_allocVector(VECSXP, 1));
      SET_VECTOR_ELT(args, 0, make_tensor(grad));
      SEXP result = PROTECT(call_r(hook->fn.value, args));
      if (is_tensor(result)) replaced = tensor_of(result, "hook's result");
      UNPROTECT(2);
    });
    return replaced;
  });
  return Rf_ScalarReal(static_cast<double>(pos));
  AMPKIT_R_END
}

extern "C" SEXP C_remove_hook(SEXP x, SEXP pos) {
  AMPKIT_R_BEGIN
  tensor_of(x, "x").remove_hook(static_cast<unsigned>(Rf_asReal(pos)));
  return R_NilValue;
  AMPKIT_R_END
}

// Applies an R autograd function: `inputs` the tensors, `forward` and `backward` the package's
// runners (R/autograd.R), `ctx` the R context object. Returns forward's tensors.
extern "C" SEXP C_autograd_function_apply(SEXP inputs, SEXP forward, SEXP backward, SEXP ctx) {
  AMPKIT_R_BEGIN
  release_pending();
  auto closures = c10::make_intrusive<RClosures>(forward, backward, ctx);
  const std::vector<at::Tensor> tensors = tensors_of(inputs, "inputs");
  auto outputs = RFunction::apply(at::TensorList(tensors), closures);
  return tensor_list(std::move(outputs));
  AMPKIT_R_END
}

// The context's operations, valid inside forward() or backward(): "save_for_backward",
// "saved_variables", "mark_dirty", "mark_non_differentiable", "needs_input_grad".
extern "C" SEXP C_autograd_context(SEXP pointer, SEXP what, SEXP tensors) {
  AMPKIT_R_BEGIN
  torch::autograd::AutogradContext* ctx = context_of(pointer);
  const std::string op = CHAR(STRING_ELT(what, 0));
  if (op == "save_for_backward") {
    ctx->save_for_backward(tensors_of(tensors, "tensors"));
    return R_NilValue;
  }
  if (op == "saved_variables") return tensor_list(ctx->get_saved_variables());
  if (op == "mark_dirty") {
    ctx->mark_dirty(tensors_of(tensors, "tensors"));
    return R_NilValue;
  }
  if (op == "mark_non_differentiable") {
    ctx->mark_non_differentiable(tensors_of(tensors, "tensors"));
    return R_NilValue;
  }
  if (op == "needs_input_grad") {
    const R_xlen_t n = Rf_asInteger(tensors);
    SEXP out = PROTECT(Rf_allocVector(LGLSXP, n));
    for (R_xlen_t i = 0; i < n; ++i) LOGICAL(out)[i] = ctx->needs_input_grad(i);
    UNPROTECT(1);
    return out;
  }
  value_error("no autograd context operation `" + op + "`.");
  AMPKIT_R_END
}

}  // namespace ampkit_r
